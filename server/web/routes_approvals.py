"""Settings › Approvals: calls held for a person (``server.barrier.approvals``).

Each pending call shows its AI, its run, where it writes, the labels its run carried and what
needs the person, and the text exactly as it would be written: the request rendered as a person
must read it, escaped and quoted (``ApprovalRequest.message``), so no text can imitate the page.
Approve applies it now, as its run's step; decline clears its text. A call that can no longer be
applied (a policy now denies it, its run ended, its token was revoked, it expired) is never
offered: the listing voids it first. Below, the calls decided lately, with how and by whom.
"""

from __future__ import annotations

from fastapi import Depends, Request
from fastapi.responses import Response

from server.errors import EsfisError
from server.web.pages import Posted, operator, operator_of, page, posted, redirect, settings_router, url

router = settings_router()
DECIDED_SHOWN = 25


def _page(request: Request, *, status: int = 200, error: str | None = None) -> Response:
    service = operator_of(request)
    pending = service.approvals(status="pending", last=500)
    decided = [v for v in service.approvals(status=None, last=DECIDED_SHOWN + len(pending)) if not v.held.pending]
    return page(
        request,
        "approvals.html",
        status=status,
        error=error,
        section="approvals",
        pending=pending,
        decided=decided[:DECIDED_SHOWN],
    )


@router.get("/approvals")
def approvals(request: Request, _=Depends(operator)) -> Response:
    return _page(request)


@router.post("/approvals")
def decide(request: Request, done: Posted = Depends(posted)) -> Response:
    approval_id = done.field("id")
    action = done.field("action")
    by = f"operator {done.session.token_id} (web)"
    try:
        if action not in ("approve", "decline"):
            return _page(request, status=422, error="action must be approve or decline")
        held = operator_of(request).decide_approval(approval_id, approve=action == "approve", by=by)
    except EsfisError as exc:
        return _page(request, status=exc.status, error=exc.message)
    said = {
        "approved": f"{held.id} approved: written as {held.result}",
        "declined": f"{held.id} declined: nothing was written, and its text is gone",
    }.get(held.status, f"{held.id} could not be applied ({held.status}): {held.reason}")
    return redirect(request, url(request, "approvals"), said)
