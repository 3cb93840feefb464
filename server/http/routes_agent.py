"""Agent endpoints: remember, recall, get, replace, forget, and context by reference; each one
call on the façade.

The caller is the token's AI. Where it stands comes from ``space`` or ``cwd`` (in the body, or
the query for GET and DELETE), else no space; a token confined to a subtree stands in its own
space when the request names none, and is refused (403, naming only its own space) anywhere
outside it. The token is the run (``server.barrier.runs``): an agent token's requests form its standing
run, a run token is its own run, and no header or argument names another. HTTP has no person at
the call, so a write the barrier sends to a person is refused. Endpoints are plain ``def``:
FastAPI runs them in its thread pool, so embedding and LanceDB work never block the event loop.
"""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import APIRouter, Query, Request, Response

from server import render
from server.facade import Esfis
from server.http.auth import AgentToken, RunOpener, service_of
from server.http.schemas import (
    CWD_DOC,
    ERRORS,
    SPACE_DOC,
    ContextIn,
    Cwd,
    RecallIn,
    RememberIn,
    ReplaceIn,
    RunIn,
    RunTokenOut,
    Text,
)
from server.models import Caller, Token
from server.shapes import ContextOut, MemoryOut, RecallOut, ReferenceOut

router = APIRouter(prefix="/v1", tags=["agents"], responses=ERRORS)

SpaceQuery = Annotated[Text | None, Query(description=SPACE_DOC)]
CwdQuery = Annotated[Cwd | None, Query(description=CWD_DOC)]


def caller_for(service: Esfis, token: Token, space: str | None, cwd: str | None) -> Caller:
    return service.caller(space=space, cwd=cwd, transport="http", token=token)


@router.post("/runs", status_code=201, response_model=RunTokenOut, summary="open a run")
def open_run(body: RunIn, request: Request, token: RunOpener) -> dict:
    """A run token for one agent session: the same AI, in the opener's scope or a narrower one,
    sealed at its first step, expiring. A harness gives the model only this token. Opened with
    an agent token, the run shares what that token's standing run carries; opened with a
    runs-only token (``esfis token create --ai A --runs-only``), it starts carrying nothing."""
    run_token, secret = service_of(request).open_run(token, space=body.space, ttl=body.ttl)
    return render.run_token_json(run_token, secret)


@router.post("/memories", status_code=201, response_model=MemoryOut, summary="remember")
def remember(body: RememberIn, request: Request, token: AgentToken) -> dict:
    """Store a memory in the caller's space, or a personal one with ``personal: true``."""
    service = service_of(request)
    caller = caller_for(service, token, body.space, body.cwd)
    memory = service.remember(
        caller, body.text, personal=body.personal, valid_until=body.valid_until, labels=body.labels
    )
    return render.memory_json(memory)


@router.post("/recall", response_model=RecallOut, summary="recall")
async def recall(body: RecallIn, request: Request, token: AgentToken) -> Response:
    """The memories the caller reaches that best answer ``query``, best first. The same answer
    as ``esfis recall --json``; nothing about other spaces."""
    service = service_of(request)

    def answer() -> bytes:
        caller = caller_for(service, token, body.space, body.cwd)
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
) -> dict:
    """One memory; an id the caller cannot see answers exactly as one that never existed."""
    service = service_of(request)
    caller = caller_for(service, token, space, cwd)
    return render.memory_json(service.get(caller, memory_id))  # the core hides an unseen successor


@router.post("/memories/{memory_id}/replace", status_code=201, response_model=MemoryOut, summary="replace")
def replace_memory(memory_id: str, body: ReplaceIn, request: Request, token: AgentToken) -> dict:
    """Supersede a memory with a new text, in the old one's space; answers the new memory."""
    service = service_of(request)
    caller = caller_for(service, token, body.space, body.cwd)
    return render.memory_json(service.replace(caller, memory_id, body.text, space=body.new_space))


@router.delete("/memories/{memory_id}", status_code=204, summary="forget")
def forget_memory(
    memory_id: str,
    request: Request,
    token: AgentToken,
    space: SpaceQuery = None,
    cwd: CwdQuery = None,
) -> Response:
    """Forget a memory for good: its text and vector leave the store."""
    service = service_of(request)
    service.forget(caller_for(service, token, space, cwd), memory_id)
    return Response(status_code=204)


@router.post("/context", status_code=201, response_model=ReferenceOut, summary="share")
def share(body: ContextIn, request: Request, token: AgentToken) -> dict:
    """A reference to memories the caller sees: ids, labels, digests and runs, never texts."""
    service = service_of(request)
    caller = caller_for(service, token, body.space, body.cwd)
    return render.reference_json(service.share(caller, body.memory_ids))


@router.get("/context/{ref}", response_model=ContextOut, summary="open a context reference")
def open_context(
    ref: str,
    request: Request,
    token: AgentToken,
    space: SpaceQuery = None,
    cwd: CwdQuery = None,
) -> dict:
    """The memories of a reference (texts and labels), when this run's scope reaches every label
    in it or a grant covers the crossing; else 403 ``data_barrier``. Opening adds the labels to
    the run."""
    service = service_of(request)
    reference, memories = service.open_context(caller_for(service, token, space, cwd), ref)
    return render.opened_json(reference, memories)
