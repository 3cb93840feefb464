"""Operator endpoints: spaces, policies, deliveries with their ``why``, grants, trusted sources,
runs and their trail, and bulk import.

Each is one call on the façade with an operator token. Import streams: the body is read in
chunks as the importer consumes lines, so a large file never sits whole in memory.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Annotated, Any

import anyio
import anyio.from_thread
from fastapi import APIRouter, Path, Query, Request, Response

from server import shapes
from server.clock import iso
from server.errors import InvalidInput
from server.facade import EVERYWHERE, PERSONAL, MemoryFilter
from server.http.auth import OperatorToken, service_of
from server.http.bodies import IMPORT_BODY_LIMIT
from server.http.schemas import (
    ERRORS,
    BackupIn,
    DedupeIn,
    ForgetWhereIn,
    GrantIn,
    MemoryFilterIn,
    PolicyIn,
    SpaceIn,
    Text,
    TrustIn,
)
from server.shapes import (
    BackupOut,
    DedupeOut,
    DeliveriesOut,
    DeliveryOut,
    ForgetWhereOut,
    GrantOut,
    GrantsOut,
    ImportOut,
    MemoryDetailOut,
    MemoryPageOut,
    PoliciesOut,
    RuleOut,
    RunOut,
    RunsOut,
    SpaceOut,
    SpaceRemovedOut,
    SpacesOut,
    TrailOut,
    TrustedListOut,
    TrustedOut,
    WhyOut,
)

router = APIRouter(prefix="/v1", tags=["operators"], responses=ERRORS)

SpaceName = Annotated[str, Path(description="a space name; segments joined by '/'")]
DeliveryId = Annotated[int, Path(ge=1, le=2**62, description="a delivery number")]


# -- spaces ---------------------------------------------------------------------------------


@router.get("/spaces", response_model=SpacesOut)
def list_spaces(request: Request, _: OperatorToken) -> dict:
    return {"spaces": [shapes.SpaceOut.of(s).dump() for s in service_of(request).operator.spaces()]}


@router.post("/spaces", status_code=201, response_model=SpaceOut)
def create_space(body: SpaceIn, request: Request, _: OperatorToken) -> dict:
    """Create a space by name, with optional folders (on the server's machine)."""
    return shapes.SpaceOut.of(service_of(request).operator.create_space(body.name, body.folders)).dump()


@router.delete("/spaces/{name:path}", response_model=SpaceRemovedOut)
def remove_space(
    name: SpaceName,
    request: Request,
    _: OperatorToken,
    purge: Annotated[bool, Query(description="forget the space's memories with it")] = False,
) -> dict:
    """Remove a space; refused (409) while it holds memories, unless ``purge``."""
    purged = service_of(request).operator.remove_space(name, purge=purge)
    return {"removed": name, "purged": purged}


# -- policies -------------------------------------------------------------------------------


@router.get("/policies", response_model=PoliciesOut)
def list_policies(request: Request, _: OperatorToken) -> dict:
    return {"policies": [shapes.RuleOut.of(r).dump() for r in service_of(request).operator.policies()]}


@router.put("/policies", response_model=RuleOut)
def set_policy(body: PolicyIn, request: Request, _: OperatorToken) -> dict:
    """Set the rule for an AI (or '*') in a space (or everywhere); it applies to the next request."""
    return shapes.RuleOut.of(
        service_of(request).operator.set_policy(body.ai, EVERYWHERE if body.space is None else body.space, body.effect)
    ).dump()


@router.delete("/policies", status_code=204)
def clear_policy(
    request: Request,
    _: OperatorToken,
    ai: Annotated[Text, Query(description="an AI name, or '*'")],
    space: Annotated[Text | None, Query(description="a space; absent: the rule for everywhere")] = None,
) -> Response:
    service_of(request).operator.clear_policy(ai, EVERYWHERE if space is None else space)
    return Response(status_code=204)


# -- the memories themselves (server.facade.curation) --------------------------------------


def _memory_filter(body: MemoryFilterIn | ForgetWhereIn) -> MemoryFilter:
    return MemoryFilter(
        space=PERSONAL if body.space is None else body.space,
        below=body.below,
        ai=body.ai,
        origin=body.origin,
        since=body.since,
        before=body.before,
        state=body.state,
    )


@router.get("/memories", response_model=MemoryPageOut)
def list_memories(request: Request, _: OperatorToken, query: Annotated[MemoryFilterIn, Query()]) -> dict:
    """Memories newest first under a filter, a keyset page at a time: pass ``next_cursor`` back
    as ``cursor`` for the next page."""
    found = service_of(request).operator.memory_page(_memory_filter(query), cursor=query.cursor, limit=query.limit)
    return MemoryPageOut.of(found).dump()


@router.get("/memories/{memory_id}/provenance", response_model=MemoryDetailOut)
def memory_provenance(memory_id: str, request: Request, _: OperatorToken) -> dict:
    """One memory as the operator sees it: its text, what it superseded, the run that wrote it,
    and the deliveries that included it (ids only)."""
    return MemoryDetailOut.of(service_of(request).operator.memory(memory_id)).dump()


@router.post("/forget", response_model=ForgetWhereOut)
def forget_where(body: ForgetWhereIn, request: Request, _: OperatorToken) -> dict:
    """Forget by filter: ``dry_run`` (the default) counts what the filter selects and gives the
    newest row it may touch; the same filter with that ``up_to`` and ``dry_run: false`` forgets
    them for good (nothing written after the dry run)."""
    operator = service_of(request).operator
    chosen = _memory_filter(body)
    if body.dry_run:
        return ForgetWhereOut.of(operator.preview_forget(chosen), dry_run=True).dump()
    if body.up_to is None:
        raise InvalidInput("up_to is required to forget: take it from a dry run of the same filter", field="up_to")
    forgotten = operator.forget_where(chosen, up_to=body.up_to)
    return ForgetWhereOut(dry_run=False, matched=forgotten, up_to=body.up_to).dump()


@router.post("/dedupe", response_model=DedupeOut)
def dedupe(body: DedupeIn, request: Request, _: OperatorToken) -> dict:
    """Fold one space's copies (memories of the same fact) into their earliest memory, superseding
    the others (``esfis dedupe``): ``dry_run`` (the default) counts them; resumable, never across
    spaces."""
    report = service_of(request).operator.dedupe(PERSONAL if body.space is None else body.space, dry_run=body.dry_run)
    return DedupeOut(
        space=report.space, current=report.current, copies=report.copies, kept=report.kept, dry_run=report.dry_run
    ).dump()


# -- deliveries -----------------------------------------------------------------------------


@router.get("/deliveries", response_model=DeliveriesOut)
def list_deliveries(
    request: Request,
    _: OperatorToken,
    ai: Annotated[Text | None, Query(description="only this AI's")] = None,
    space: Annotated[Text | None, Query(description="only from this space")] = None,
    last: Annotated[int, Query(ge=1, le=10_000, description="the most recent N")] = 20,
) -> dict:
    deliveries = service_of(request).operator.deliveries(ai=ai, space=space, last=last)
    return {"deliveries": [shapes.DeliveryOut.of(d).dump() for d in deliveries]}


@router.get("/deliveries/{delivery_id}", response_model=DeliveryOut)
def get_delivery(delivery_id: DeliveryId, request: Request, _: OperatorToken) -> dict:
    return shapes.DeliveryOut.of(service_of(request).operator.delivery(delivery_id)).dump()


@router.get("/deliveries/{delivery_id}/why", response_model=WhyOut)
def why(delivery_id: DeliveryId, request: Request, _: OperatorToken) -> dict:
    """Explain a delivery now: what went in, what was cut and why, and (for the operator only)
    what other spaces would have answered."""
    return shapes.WhyOut.of(service_of(request).operator.why(delivery_id)).dump()


# -- grants, trusted sources, runs ---------------------------------------------------------


@router.get("/grants", response_model=GrantsOut)
def list_grants(request: Request, _: OperatorToken) -> dict:
    return {"grants": [shapes.GrantOut.of(g).dump() for g in service_of(request).operator.grants()]}


@router.post("/grants", status_code=201, response_model=GrantOut)
def add_grant(body: GrantIn, request: Request, _: OperatorToken) -> dict:
    """Let data of ``from``'s subtree be written into exactly ``to`` (null: personal), one way."""
    grant = service_of(request).operator.add_grant(
        body.from_, PERSONAL if body.to is None else body.to, ai=body.ai, until=body.until
    )
    return shapes.GrantOut.of(grant).dump()


@router.delete("/grants/{grant_id}", response_model=GrantOut)
def revoke_grant(grant_id: str, request: Request, _: OperatorToken) -> dict:
    return shapes.GrantOut.of(service_of(request).operator.revoke_grant(grant_id)).dump()


@router.get("/trusted-sources", response_model=TrustedListOut)
def list_trusted(request: Request, _: OperatorToken) -> dict:
    return {"trusted_sources": [shapes.TrustedOut.of(t).dump() for t in service_of(request).operator.trusted_sources()]}


@router.put("/trusted-sources", response_model=TrustedOut)
def trust(body: TrustIn, request: Request, _: OperatorToken) -> dict:
    """Trust an origin mark: runs carrying only trusted marks may forget without a person."""
    return shapes.TrustedOut.of(service_of(request).operator.trust(body.source)).dump()


@router.delete("/trusted-sources", status_code=204)
def distrust(
    request: Request, _: OperatorToken, source: Annotated[Text, Query(description="an origin mark, e.g. source:github")]
) -> Response:
    service_of(request).operator.distrust(source)
    return Response(status_code=204)


@router.get("/runs", response_model=RunsOut)
def list_runs(
    request: Request,
    _: OperatorToken,
    last: Annotated[int, Query(ge=1, le=10_000, description="the most recent N")] = 20,
) -> dict:
    return {"runs": [shapes.RunOut.of(r).dump() for r in service_of(request).operator.run_list(last=last)]}


@router.delete("/runs/{run_id}", response_model=RunOut)
def end_run(run_id: str, request: Request, token: OperatorToken) -> dict:
    """End a run: its run token stops working at the next request; a standing run starts afresh
    at its token's next request. The trail records who ended it."""
    return shapes.RunOut.of(service_of(request).operator.end_run(run_id, by=f"operator {token.id}")).dump()


@router.get("/runs/{run_id}", response_model=TrailOut)
def trail(run_id: str, request: Request, _: OperatorToken) -> dict:
    """A run's trail: what it carries and every step, with ids, labels and rules, never texts."""
    run, steps = service_of(request).operator.trail(run_id)
    return shapes.TrailOut.of(run, steps).dump()


# -- held calls -----------------------------------------------------------------------------


def _call(view) -> dict:
    return shapes.HeldCallOut.of_view(view.held, rendering=view.message, approvable=view.approvable).dump()


@router.get("/approvals", response_model=shapes.HeldCallsOut)
def list_approvals(
    request: Request,
    _: OperatorToken,
    status: Annotated[
        Text | None, Query(description="pending (the default), approved, declined, expired, void, withdrawn, or all")
    ] = None,
    last: Annotated[int, Query(ge=1, le=10_000, description="the most recent N")] = 100,
) -> dict:
    """Calls held for a person, newest first, each with its text rendered as the person must
    read it (escaped and quoted). One that can no longer be applied is void, never approvable."""
    wanted = "pending" if status is None else None if status == "all" else status
    views = service_of(request).operator.approvals(status=wanted, last=last)
    return {"approvals": [_call(v) for v in views]}


@router.post("/approvals/{approval_id}/approve", response_model=shapes.ApprovalOut)
def approve(approval_id: str, request: Request, token: OperatorToken) -> dict:
    """Apply a held call now, as its run's step (or void it, with the reason, if it no longer can be)."""
    held = service_of(request).operator.decide_approval(approval_id, approve=True, by=f"operator {token.id}")
    return shapes.ApprovalOut.of(held).dump()


@router.post("/approvals/{approval_id}/decline", response_model=shapes.ApprovalOut)
def decline(approval_id: str, request: Request, token: OperatorToken) -> dict:
    """Decline a held call: nothing is applied, and its text leaves the catalog."""
    held = service_of(request).operator.decide_approval(approval_id, approve=False, by=f"operator {token.id}")
    return shapes.ApprovalOut.of(held).dump()


# -- backup ---------------------------------------------------------------------------------


@router.post("/backup", status_code=201, response_model=BackupOut)
def backup(body: BackupIn, request: Request, _: OperatorToken) -> dict:
    """A consistent backup of this server's home into ``path``, a folder on the server's
    machine (absolute; absent or empty). Answers when the backup is complete."""
    report = service_of(request).operator.backup(body.path)
    return BackupOut(
        path=str(report.path),
        taken_at=iso(report.taken_at),
        memories=report.memories,
        partitions=report.partitions,
        forgotten_since=report.forgotten_since,
        seconds=round(report.seconds, 3),
    ).dump()


# -- import ---------------------------------------------------------------------------------

_IMPORT_BODY = {
    "requestBody": {
        "required": True,
        "description": (
            'JSON Lines: one {"text", "space"?, "valid_from"?, "valid_until"?, "labels"?, "key"?, '
            '"vector"?} per line; at most ' + f"{IMPORT_BODY_LIMIT // 2**20} MiB, streamed"
        ),
        "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
    }
}


@router.post("/import", response_model=ImportOut, openapi_extra=_IMPORT_BODY)
async def import_lines(
    request: Request,
    _: OperatorToken,
    ai: Annotated[Text, Query(description="the AI recorded as writer")] = "import",
    create_spaces: Annotated[
        bool, Query(description="create the spaces rows name that do not exist yet (each listed in the answer)")
    ] = False,
) -> dict[str, Any]:
    """Bulk import, streamed in batches; bad rows are reported by line and the rest go on, and a
    re-run adds nothing twice. Answers the report."""
    service = service_of(request)
    chunks = request.stream().__aiter__()

    async def next_chunk() -> bytes | None:
        try:
            return await chunks.__anext__()
        except StopAsyncIteration:
            return None

    def run() -> Any:
        body = io.BufferedReader(_BodyReader(lambda: anyio.from_thread.run(next_chunk)), 64 * 1024)
        return service.operator.import_jsonl(body, ai=ai, create_spaces=create_spaces)

    report = await anyio.to_thread.run_sync(run)
    return {
        "imported": report.imported,
        "skipped": report.skipped,
        "failed": report.failed,
        "errors": [{"line": line, "reason": reason} for line, reason in report.errors],
        "seconds": report.seconds,
        "created_spaces": list(report.created_spaces),
    }


class _BodyReader(io.RawIOBase):
    """The request body as a blocking file, for the importer's thread."""

    def __init__(self, next_chunk: Callable[[], bytes | None]) -> None:
        self._next = next_chunk
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._next()
            if chunk is None:
                return 0
            self._pending = chunk
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n
