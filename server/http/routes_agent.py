"""Agent endpoints: remember, recall, get, replace, forget, and context by reference; each one
call on the façade.

The caller is the token's AI. Where it stands comes from ``space`` or ``cwd`` (in the body, or
the query for GET and DELETE), else no space; a token confined to a subtree stands in its own
space when the request names none, and is refused (403, naming only its own space) anywhere
outside it. ``X-Esfis-Run`` names the run: requests of one token with one header value are one
run (the same value from another token is another run); no header, a run of its own. HTTP has
no person at the call, so a write the barrier sends to a person is refused. Endpoints are plain
``def``: FastAPI runs them in its thread pool, so embedding and LanceDB work never block the
event loop.
"""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import APIRouter, Header, Query, Request, Response

from server import render
from server.http.auth import AgentToken, service_of
from server.http.schemas import CWD_DOC, ERRORS, SPACE_DOC, ContextIn, Cwd, RecallIn, RememberIn, ReplaceIn, Text
from server.shapes import ContextOut, MemoryOut, RecallOut, ReferenceOut
from server.models import Caller, Token
from server.service import Esfis

router = APIRouter(prefix="/v1", tags=["agents"], responses=ERRORS)

RunId = Annotated[
    str | None,
    Header(
        alias="X-Esfis-Run",
        pattern=r"^[A-Za-z0-9._:-]{1,128}$",
        description="the run this request belongs to (an agent session), up to 128 of [A-Za-z0-9._:-]",
    ),
]
SpaceQuery = Annotated[Text | None, Query(description=SPACE_DOC)]
CwdQuery = Annotated[Cwd | None, Query(description=CWD_DOC)]


def caller_for(service: Esfis, token: Token, space: str | None, cwd: str | None, run_id: str | None) -> Caller:
    assert token.ai is not None  # agent_token guarantees it
    return service.caller(token.ai, space=space, cwd=cwd, transport="http", run=run_id, owner=f"token:{token.id}",
                          scope=token.space)


@router.post("/memories", status_code=201, response_model=MemoryOut, summary="remember")
def remember(body: RememberIn, request: Request, token: AgentToken, run_id: RunId = None) -> dict:
    """Store a memory in the caller's space, or a personal one with ``personal: true``."""
    service = service_of(request)
    caller = caller_for(service, token, body.space, body.cwd, run_id)
    memory = service.remember(
        caller, body.text, personal=body.personal, valid_until=body.valid_until, labels=body.labels
    )
    return render.memory_json(memory)


@router.post("/recall", response_model=RecallOut, summary="recall")
async def recall(body: RecallIn, request: Request, token: AgentToken, run_id: RunId = None) -> Response:
    """The memories the caller reaches that best answer ``query``, best first. The same answer
    as ``esfis recall --json``; nothing about other spaces."""
    service = service_of(request)

    def answer() -> bytes:
        caller = caller_for(service, token, body.space, body.cwd, run_id)
        return render.recall_json_bytes(service.recall(caller, body.query, limit=body.limit).memories)

    # The hot path: the whole recall (caller, embedding, search, catalog, encoding) in one trip to
    # a worker thread, and the answer sent as encoded, not validated against its model again.
    return Response(await anyio.to_thread.run_sync(answer), media_type="application/json")


@router.get("/memories/{memory_id}", response_model=MemoryOut, summary="get")
def get_memory(
    memory_id: str,
    request: Request,
    token: AgentToken,
    space: SpaceQuery = None,
    cwd: CwdQuery = None,
    run_id: RunId = None,
) -> dict:
    """One memory; an id the caller cannot see answers exactly as one that never existed."""
    service = service_of(request)
    caller = caller_for(service, token, space, cwd, run_id)
    return render.memory_json(service.get(caller, memory_id))  # the core hides an unseen successor


@router.post("/memories/{memory_id}/replace", status_code=201, response_model=MemoryOut, summary="replace")
def replace_memory(
    memory_id: str, body: ReplaceIn, request: Request, token: AgentToken, run_id: RunId = None
) -> dict:
    """Supersede a memory with a new text, in the old one's space; answers the new memory."""
    service = service_of(request)
    caller = caller_for(service, token, body.space, body.cwd, run_id)
    return render.memory_json(service.replace(caller, memory_id, body.text, space=body.new_space))


@router.delete("/memories/{memory_id}", status_code=204, summary="forget")
def forget_memory(
    memory_id: str,
    request: Request,
    token: AgentToken,
    space: SpaceQuery = None,
    cwd: CwdQuery = None,
    run_id: RunId = None,
) -> Response:
    """Forget a memory for good: its text and vector leave the store."""
    service = service_of(request)
    service.forget(caller_for(service, token, space, cwd, run_id), memory_id)
    return Response(status_code=204)


@router.post("/context", status_code=201, response_model=ReferenceOut, summary="share")
def share(body: ContextIn, request: Request, token: AgentToken, run_id: RunId = None) -> dict:
    """A reference to memories the caller sees: ids, labels, digests and runs, never texts."""
    service = service_of(request)
    caller = caller_for(service, token, body.space, body.cwd, run_id)
    return render.reference_json(service.share(caller, body.memory_ids))


@router.get("/context/{ref}", response_model=ContextOut, summary="open a context reference")
def open_context(
    ref: str,
    request: Request,
    token: AgentToken,
    space: SpaceQuery = None,
    cwd: CwdQuery = None,
    run_id: RunId = None,
) -> dict:
    """The memories of a reference (texts and labels), when this run's scope reaches every label
    in it or a grant covers the crossing; else 403 ``data_barrier``. Opening adds the labels to
    the run."""
    service = service_of(request)
    reference, memories = service.open_context(caller_for(service, token, space, cwd, run_id), ref)
    return render.opened_json(reference, memories)
