"""Agent endpoints: remember, recall, get, replace, forget, and context by reference; each one
call on the façade.

The caller is the token's AI (one dependency, ``AsAgent``, for every route). Where it stands
comes from ``space`` or ``cwd`` (in the body, or the query for GET and DELETE), else no space; a token confined to a subtree stands in its own
space when the request names none, and is refused (403, naming only its own space) anywhere
outside it. The token is the run (``server.barrier.runs``): an agent token's requests form its standing
run, a run token is its own run, and no header or argument names another. HTTP has no person at
the call (whoever holds the token answers, and that may be the model), so a write or forget
the barrier sends to a person is **held** for the operator: 202 with ``approval: {id, status:
"pending"}``, nothing applied, the outcome at ``GET /v1/approvals/{id}``. Endpoints are plain ``def``:
FastAPI runs them in its thread pool, so embedding and LanceDB work never block the event loop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

import anyio
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse

from server import inputs
from server.facade import Esfis
from server.http.auth import AgentToken, RunOpener, service_of
from server.http.schemas import (
    ERRORS,
    ContextIn,
    Cwd,
    MemoryListIn,
    RecallIn,
    RememberIn,
    ReplaceIn,
    RunIn,
    SpaceListIn,
    Text,
)
from server.metrics import time_stage
from server.models import Caller, Held, Token
from server.shapes import (
    ApprovalOut,
    ContextOut,
    HeldOut,
    MemoryListOut,
    MemoryOut,
    RecallOut,
    ReferenceOut,
    RememberedOut,
    RunTokenOut,
    SpaceListOut,
)

router = APIRouter(prefix="/v1", tags=["agents"], responses=ERRORS)


class Placed(Protocol):
    """Where a request says its caller stands: a body's ``space``/``cwd``, or the query's."""

    @property
    def space(self) -> str | None: ...
    @property
    def cwd(self) -> str | None: ...


@dataclass(frozen=True)
class Place:
    space: str | None = None
    cwd: str | None = None


async def _place_in_query(
    space: Annotated[Text | None, Query(description=inputs.SPACE)] = None,
    cwd: Annotated[Cwd | None, Query(description=inputs.CWD)] = None,
) -> Place:
    return Place(space, cwd)


InQuery = Annotated[Place, Depends(_place_in_query)]  # GET and DELETE: ?space= or ?cwd=


@dataclass(frozen=True)
class Agent:
    """The AI behind an agent request: its token, and the service that places it.

    The caller is made by ``at``, not by the dependency itself: resolving it reads the catalog,
    so it runs in the route's worker thread (the same trip as the call), and only after FastAPI
    has validated the body, so an invalid body still answers 422 before any lookup."""

    service: Esfis
    token: Token

    def at(self, place: Placed) -> Caller:
        return self.service.caller(space=place.space, cwd=place.cwd, transport="http", token=self.token)


async def _agent(request: Request, token: AgentToken) -> Agent:  # async: no I/O, no thread trip
    return Agent(service_of(request), token)


AsAgent = Annotated[Agent, Depends(_agent)]


@router.post("/runs", status_code=201, response_model=RunTokenOut, summary="open a run")
def open_run(body: RunIn, request: Request, token: RunOpener) -> dict:
    """A run token for one agent session: the same AI, in the opener's scope or a narrower one,
    sealed at its first step, expiring. A harness gives the model only this token. Opened with
    an agent token, the run shares what that token's standing run carries; opened with a
    runs-only token (``esfis token create --ai A --runs-only``), it starts carrying nothing."""
    run_token, secret = service_of(request).open_run(token, space=body.space, ttl=body.ttl)
    # The only time the secret is shown.
    return RunTokenOut.of(run_token, secret).dump()


HELD: dict[int | str, dict[str, Any]] = {
    202: {"model": HeldOut, "description": "held for the operator's approval: nothing is applied yet"}
}


def _held(held: Held) -> JSONResponse:
    return JSONResponse(HeldOut.of(held).dump(), status_code=202)


@router.post("/memories", status_code=201, response_model=RememberedOut, responses=HELD, summary="remember")
def remember(body: RememberIn, agent: AsAgent) -> Response | dict:
    """Store a memory in the caller's space, or a personal one with ``personal: true``. A write
    that needs a person's approval (into personal, carrying a space's data) is held: 202. A fact
    the space holds already is not stored again: the answer is that memory, ``duplicate_of`` set
    (``dedupe: false`` stores it regardless)."""
    memory = agent.service.remember(
        agent.at(body),
        body.text,
        personal=body.personal,
        valid_until=body.valid_until,
        labels=body.labels,
        hold=True,
        dedupe=body.dedupe,
        data=body.data,
    )
    return _held(memory) if isinstance(memory, Held) else RememberedOut.of(memory).dump()


@router.post("/recall", response_model=RecallOut, summary="recall")
async def recall(body: RecallIn, agent: AsAgent) -> Response:
    """The memories the caller reaches that best answer ``query``, best first. The same answer
    as ``esfis recall --json``; nothing about other spaces. ``filter`` selects by the memories'
    ``data`` before ranking; with a filter and no query, the newest that match."""

    def answer() -> bytes:
        result = agent.service.recall(agent.at(body), body.query, limit=body.limit, as_of=body.as_of, where=body.filter)
        encoding = time.perf_counter()
        encoded = RecallOut.of(result.memories).model_dump_json(by_alias=True).encode()
        time_stage("encoding", time.perf_counter() - encoding)
        return encoded

    # The hot path: the whole recall (caller, embedding, search, catalog, encoding) in one trip to
    # a worker thread, and the answer sent as encoded, not validated against its model again.
    return Response(await anyio.to_thread.run_sync(answer), media_type="application/json")


@router.get("/memories/{memory_id}", response_model=MemoryOut, summary="get")
def get_memory(memory_id: str, agent: AsAgent, where: InQuery) -> dict:
    """One memory; an id the caller cannot see answers exactly as one that never existed."""
    return MemoryOut.of(agent.service.get(agent.at(where), memory_id)).dump()  # the core hides an unseen successor


@router.post(
    "/memories/{memory_id}/replace", status_code=201, response_model=MemoryOut, responses=HELD, summary="replace"
)
def replace_memory(memory_id: str, body: ReplaceIn, agent: AsAgent) -> Response | dict:
    """Supersede a memory with a new text, in the old one's space; answers the new memory (or
    202: held for the operator's approval)."""
    memory = agent.service.replace(
        agent.at(body), memory_id, body.text, space=body.new_space, hold=True, data=body.data
    )
    return _held(memory) if isinstance(memory, Held) else MemoryOut.of(memory).dump()


@router.delete("/memories/{memory_id}", status_code=204, responses=HELD, summary="forget")
def forget_memory(memory_id: str, agent: AsAgent, where: InQuery) -> Response:
    """Forget a memory for good: its text and vector leave the store. A run that read untrusted
    content is held for the operator's approval (202). An approval's id (``apr_…``) of this run
    withdraws that held call."""
    held = agent.service.forget(agent.at(where), memory_id, hold=True)
    return _held(held) if held is not None else Response(status_code=204)


@router.get("/approvals/{approval_id}", response_model=ApprovalOut, summary="check an approval")
def check_approval(approval_id: str, agent: AsAgent, where: InQuery) -> dict:
    """A held call of this token's (or this run's): pending, approved (with the memory it
    wrote), declined, expired, void or withdrawn. Any other id answers 404, as an unknown one."""
    return ApprovalOut.of(agent.service.check_approval(agent.at(where), approval_id)).dump()


@router.post("/context", status_code=201, response_model=ReferenceOut, summary="share")
def share(body: ContextIn, agent: AsAgent) -> dict:
    """A reference to memories the caller sees: ids, labels, digests and runs, never texts."""
    return ReferenceOut.of(agent.service.share(agent.at(body), body.memory_ids)).dump()


@router.get("/context/{ref}", response_model=ContextOut, summary="open a context reference")
def open_context(ref: str, agent: AsAgent, where: InQuery) -> dict:
    """The memories of a reference (texts and labels), when this run's scope reaches every label
    in it or a grant covers the crossing; else 403 ``data_barrier``. Opening adds the labels to
    the run."""
    reference, memories = agent.service.open_context(agent.at(where), ref)
    return ContextOut.of(reference, memories).dump()


@router.get("/browse/spaces", response_model=SpaceListOut, summary="list the spaces the caller reads")
def list_spaces(agent: AsAgent, query: Annotated[SpaceListIn, Query()]) -> dict:
    """The spaces the caller reads from where it stands (its own and those below it, allowed by
    policy; ``within``: one space and those below it), by name, a page at a time; ``personal``
    says whether it reads personal memories. No other space is ever named. Reads no memory."""
    page = agent.service.list_spaces(agent.at(query), within=query.within, cursor=query.cursor, limit=query.limit)
    return SpaceListOut.of(page).dump()


@router.post("/browse/memories", response_model=MemoryListOut, summary="list the memories the caller reads")
def list_memories(body: MemoryListIn, agent: AsAgent) -> dict:
    """The current memories the caller reads, newest first, a keyset page at a time; ``within``
    (and ``below``) narrows to one space, ``filter`` selects by ``data`` as recall's does. What
    a page lists is read by the run, as a recall's results are: in the delivery log, and carried
    by the run (the data barrier)."""
    page = agent.service.list_memories(
        agent.at(body), within=body.within, below=body.below, where=body.filter, cursor=body.cursor, limit=body.limit
    )
    return MemoryListOut.of(page).dump()
