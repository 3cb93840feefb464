"""Settings › Memories: what the agents remembered, seen, searched, corrected and forgotten by
the person who owns it.

A list per space (or personal), newest first, a keyset page of 50 at a time (``Older →``
follows the cursor; nothing ever loads a partition whole); filters by space and the spaces
below, AI, origin mark, time written and state; a search box that runs a recall as the
operator in the chosen spaces, with each row's score, cosine and what its words added. A
memory's page: its text, labels, digest, the run that wrote it (linked to its trail), what it
superseded and what superseded it, and the deliveries that included it (ids only).

Every change is a form with CSRF and the same-site check (``pages.posted``), and goes through
a confirmation that names what will change: replace, forget, forget by filter (whose
confirmation carries the preview's count and the newest row it may touch, so a memory written
after the preview is never forgotten). Texts an agent wrote are shown escaped (the ``inert``
filter: control and bidi characters as escapes, autoescaped HTML).
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import Depends, Request
from fastapi.responses import Response

from server.errors import EsfisError
from server.facade import PERSONAL, MemoryFilter
from server.web.pages import (
    Posted,
    WebError,
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
from server.web.plots import stacked_bars

router = settings_router()
PER_PAGE = 50
FIELDS = ("space", "below", "ai", "origin", "since", "before", "state")
PERSONAL_CHOICE = "(personal)"
DAYS = 30


def _filter_of(values: dict[str, str | None]) -> MemoryFilter:
    space = values.get("space") or ""
    return MemoryFilter(
        space=PERSONAL if space == PERSONAL_CHOICE else space,
        below=values.get("below") in ("1", "on", "yes"),
        ai=values.get("ai") or None,
        origin=values.get("origin") or None,
        since=values.get("since") or None,
        before=values.get("before") or None,
        state=values.get("state") or None,
    )


def _query_filters(request: Request) -> dict[str, str | None]:
    return {k: text_param(request, k) for k in FIELDS}


def _spaces(request: Request) -> list[str]:
    return [s.name for s in operator_of(request).spaces()]


@router.get("/memories")
def memories(request: Request, _=Depends(operator)) -> Response:
    """The list (or, with ``q``, the operator's search) under the filters in the query."""
    op = operator_of(request)
    values = _query_filters(request)
    spaces = _spaces(request)
    if not values["space"]:
        values["space"] = spaces[0] if spaces else PERSONAL_CHOICE
    query = text_param(request, "q")
    cursor = text_param(request, "cursor")
    listed: list = []
    found: list = []
    next_cursor: str | None = None
    delivery_id: int | None = None
    error: str | None = None
    status = 200
    try:
        f = _filter_of(values)
        if query:
            found, delivery_id = op.search_memories(query, f, limit=20)
        else:
            result = op.memory_page(f, cursor=cursor, limit=PER_PAGE)
            listed, next_cursor = result.memories, result.next_cursor
    except EsfisError as exc:  # a bad filter: say so on the page, with the filter form
        error, status = exc.message, exc.status
    kept = urlencode({k: v for k, v in values.items() if v})
    return page(
        request,
        "memories.html",
        status=status,
        error=error,
        section="memories",
        values=values,
        query=query or "",
        kept=kept,
        listed=listed,
        found=found,
        delivery_id=delivery_id,
        next_cursor=next_cursor,
        first_page=cursor is None,
        spaces=spaces,
        ais=op.known_ais(),
        personal=PERSONAL_CHOICE,
        now=service_of(request).clock(),
    )


@router.get("/memories/{memory_id}")
def memory(memory_id: str, request: Request, _=Depends(operator)) -> Response:
    detail = operator_of(request).memory(memory_id)
    return page(request, "memory.html", section="memories", detail=detail, m=detail.memory, confirm=None)


@router.post("/memories/{memory_id}/replace")
def replace(memory_id: str, request: Request, done: Posted = Depends(posted)) -> Response:
    op = operator_of(request)
    detail = op.memory(memory_id)
    text = done.form.get("text", "")
    if done.field("confirm") != "yes":  # the first press: say what will change
        return page(
            request, "memory.html", section="memories", detail=detail, m=detail.memory, confirm="replace", new_text=text
        )
    try:
        new = op.correct_memory(memory_id, text)
    except EsfisError as exc:
        return page(
            request,
            "memory.html",
            status=exc.status,
            error=exc.message,
            section="memories",
            detail=detail,
            m=detail.memory,
            confirm=None,
        )
    return redirect(request, url(request, "memories", new.id), f"{memory_id} replaced: this is its new version")


@router.post("/memories/{memory_id}/forget")
def forget(memory_id: str, request: Request, done: Posted = Depends(posted)) -> Response:
    op = operator_of(request)
    detail = op.memory(memory_id)
    if done.field("confirm") != "yes":
        return page(request, "memory.html", section="memories", detail=detail, m=detail.memory, confirm="forget")
    op.forget_memory(memory_id)
    space = PERSONAL_CHOICE if detail.memory.space is None else detail.memory.space
    back = url(request, "memories") + "?" + urlencode({"space": space})
    return redirect(request, back, f"{memory_id} forgotten for good: its text is gone from disk")


@router.post("/memories/forget-where")
def forget_where(request: Request, done: Posted = Depends(posted)) -> Response:
    """A preview (the count, and the newest row it may touch), then the confirmed forget."""
    op = operator_of(request)
    values = {k: done.optional(k) for k in FIELDS}
    f = _filter_of(values)
    if done.field("confirm") != "yes":
        preview = op.preview_forget(f)
        return page(
            request,
            "forget_where.html",
            section="memories",
            values=values,
            preview=preview,
            kept=urlencode({k: v for k, v in values.items() if v}),
        )
    up_to, expected = done.field("up_to"), done.field("count")
    if not up_to.isdigit() or not expected.isdigit():
        raise WebError(422, "this confirmation is not one a preview made: preview the forget again")
    forgotten = op.forget_where(f, up_to=int(up_to))
    back = url(request, "memories") + "?" + urlencode({"space": values["space"] or PERSONAL_CHOICE})
    said = f"forgot {forgotten} {'memory' if forgotten == 1 else 'memories'} for good"
    if forgotten != int(expected):
        said += f" (the preview counted {expected}: some were forgotten or changed meanwhile)"
    return redirect(request, back, said)


@router.post("/memories/dedupe")
def dedupe(request: Request, done: Posted = Depends(posted)) -> Response:
    """Fold a space's copies of one fact into their earliest memory: counted first, then confirmed."""
    op = operator_of(request)
    space = done.field("space")
    place = PERSONAL if space == PERSONAL_CHOICE else space
    back = url(request, "memories") + "?" + urlencode({"space": space or PERSONAL_CHOICE})
    if done.field("confirm") != "yes":
        report = op.dedupe(place, dry_run=True)
        return page(request, "dedupe.html", section="memories", report=report, space=space, back=back)
    report = op.dedupe(place)
    return redirect(request, back, report.summary())


def space_plots(request: Request, space: str) -> dict:
    """The space page's plots: written per day by AI, recalls per day with the empty ones."""
    service = service_of(request)
    written, recalls = service.operator.space_days(space, days=DAYS)
    today = service.clock().date()
    answered = [
        type(d)(d.day, {"answered": d.counts["recalls"] - d.counts["empty"], "empty": d.counts["empty"]})
        for d in recalls
    ]
    total = sum(d.counts["recalls"] for d in recalls)
    empty = sum(d.counts["empty"] for d in recalls)
    return {
        "written_plot": stacked_bars(written, today=today, last=DAYS, title=f"memories written per day in {space}"),
        "recalls_plot": stacked_bars(
            answered, today=today, last=DAYS, title=f"recalls per day from {space}", series=["answered", "empty"]
        ),
        "recalls_total": total,
        "empty_share": None if not total else round(100 * empty / total),
        "written_total": sum(sum(d.counts.values()) for d in written),
    }
