"""What happened: deliveries (filtered by AI, space and run, newest first, paged) and each one's
why; runs and their trails; grants and trusted sources.

A delivery's page is its ``--why``, built when asked: what went in (with today's text), what
was cut and why, and the memories of other spaces that would have answered — shown to the
operator, marked as never seen by the agent.
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import Depends, Request
from fastapi.responses import Response

from server.errors import EsfisError
from server.facade import PERSONAL
from server.web.pages import (
    Posted,
    WebError,
    int_param,
    operator,
    operator_of,
    page,
    posted,
    redirect,
    service_of,
    settings_router,
    text_param,
    url,
)

router = settings_router()
PER_PAGE = 25
CUT_REASONS = {
    "space": "in other spaces: never read or scored",
    "policy": "in spaces denied to this AI by policy: never read or scored",
    "superseded": "superseded: skipped before ranking",
    "expired": "expired: skipped before ranking",
    "not_yet_valid": "not yet valid: skipped before ranking",
    "filter": "data not matching the recall's filter: skipped before ranking",
    "relevance": "scored in scope, ranked below the candidates recorded",
    "limit": "past the limit",
}


def _pages(total: int, number: int) -> dict:
    last = max(1, -(-total // PER_PAGE))
    return {
        "number": number,
        "last": last,
        "total": total,
        "newer": number - 1 if number > 1 else None,
        "older": number + 1 if number < last else None,
    }


@router.get("/deliveries")
def deliveries(request: Request, _=Depends(operator)) -> Response:
    service = service_of(request)
    filters = {k: text_param(request, k) for k in ("ai", "space", "run")}
    number = int_param(request, "page", 1)
    try:
        found, total = service.operator.delivery_page(**filters, page=number, per_page=PER_PAGE)
        error, status = None, 200
    except EsfisError as exc:  # a bad filter: say so on the page, with the filter form
        found, total, error, status = [], 0, exc.message, exc.status
    query = urlencode({k: v for k, v in filters.items() if v})
    return page(
        request,
        "deliveries.html",
        status=status,
        error=error,
        section="deliveries",
        deliveries=found,
        filters=filters,
        query=query,
        pages=_pages(total, number),
        ais=service.operator.known_ais(),
        spaces=[s.name for s in service.operator.spaces()],
    )


@router.get("/deliveries/{number}")
def why(number: str, request: Request, _=Depends(operator)) -> Response:
    if not number.isdigit() or len(number) > 18 or int(number) < 1:
        raise WebError(404, f"there is no delivery {number[:40]}")
    explained = operator_of(request).why(int(number))
    went = [i for i in explained.items if i.item.outcome == "delivered"]
    cut = [i for i in explained.items if i.item.outcome == "limit"]
    counts = [
        (reason, n, CUT_REASONS.get(reason, ""))
        for reason, n in sorted(explained.delivery.cut.items())
        if n and reason != "limit"
    ]
    return page(
        request,
        "why.html",
        section="deliveries",
        why=explained,
        delivery=explained.delivery,
        went=went,
        cut=cut,
        counts=counts,
    )


@router.get("/runs")
def runs(request: Request, _=Depends(operator)) -> Response:
    service = service_of(request)
    ai = text_param(request, "ai")
    number = int_param(request, "page", 1)
    try:
        found, total = service.operator.run_page(ai=ai, page=number, per_page=PER_PAGE)
        error, status = None, 200
    except EsfisError as exc:
        found, total, error, status = [], 0, exc.message, exc.status
    return page(
        request,
        "runs.html",
        status=status,
        error=error,
        section="runs",
        runs=found,
        ai=ai or "",
        ais=service.operator.known_ais(),
        query=urlencode({"ai": ai}) if ai else "",
        pages=_pages(total, number),
    )


@router.get("/runs/{run_id}")
def trail(run_id: str, request: Request, _=Depends(operator)) -> Response:
    run, steps = operator_of(request).trail(run_id)
    return page(request, "trail.html", section="runs", run=run, steps=steps)


# -- grants and trusted sources -------------------------------------------------------------


def _grants_page(request: Request, *, status: int = 200, error: str | None = None, form: dict | None = None):
    service = service_of(request)
    return page(
        request,
        "grants.html",
        status=status,
        error=error,
        section="grants",
        grants=service.operator.grants(),
        trusted=service.operator.trusted_sources(),
        spaces=[s.name for s in service.operator.spaces()],
        ais=service.operator.known_ais(),
        form=form or {},
    )


@router.get("/grants")
def grants(request: Request, _=Depends(operator)) -> Response:
    return _grants_page(request)


@router.post("/grants")
def add_grant(request: Request, done: Posted = Depends(posted)) -> Response:
    to = done.field("to")
    try:
        grant = operator_of(request).add_grant(
            done.field("from"),
            PERSONAL if to == "(personal)" else to,
            ai=done.optional("ai"),
            until=done.optional("until"),
        )
    except EsfisError as exc:
        return _grants_page(request, status=exc.status, error=exc.message, form=done.form)
    target = "personal" if grant.to_space is None else grant.to_space
    return redirect(request, url(request, "grants"), f"grant {grant.id}: {grant.from_space} → {target}")


@router.post("/grants/revoke")
def revoke_grant(request: Request, done: Posted = Depends(posted)) -> Response:
    try:
        grant = operator_of(request).revoke_grant(done.field("id"))
    except EsfisError as exc:
        return _grants_page(request, status=exc.status, error=exc.message)
    return redirect(request, url(request, "grants"), f"grant {grant.id} revoked")


@router.post("/trusted")
def trust(request: Request, done: Posted = Depends(posted)) -> Response:
    service = service_of(request)
    try:
        if done.field("action") == "remove":
            service.operator.distrust(done.field("source"))
            said = f"{done.field('source')} is no longer trusted"
        else:
            said = f"{service.operator.trust(done.field('source')).source} is trusted"
    except EsfisError as exc:
        return _grants_page(request, status=exc.status, error=exc.message, form=done.form)
    return redirect(request, url(request, "grants"), said)
