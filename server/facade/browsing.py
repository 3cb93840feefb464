"""What an agent may read, listed a page at a time: the spaces it reads from where it stands, and
the memories in them, newest first (``GET /v1/browse/spaces``, ``POST /v1/browse/memories``).

The spaces are the caller's scope (``server.facade.reach``): its own space and the registered
spaces below it, narrowed by the token's subtree and allowed by policy; personal memories are a
flag beside them (``personal``: the scope holds them). A space outside the scope is never named.

The memories are the current ones (as recall's validity) of those spaces, read by keyset pages
from the catalog (``server.memories.listing``: no partition outside the scope is ever opened),
optionally matched by recall's filter over data (``server.memories.data_filter``). A memory an
agent lists is **read** by it, exactly as a recall's results are: the page is recorded in the
delivery log (ids and ranks, never texts; to the log, a page is a recall with no query), and
the run carries the labels of what it listed (the same step and the same transaction as a
recall's, committed before the answer leaves). Listing spaces delivers no memory: the run is
entered (an ended run, or a step outside its seal, is refused) and carries nothing from it.

Both pages are keyset pages: a space page's cursor is the last space it named (names in order),
a memory page's the last memory's place (time written, catalog row). A page with a filter reads
at most ``SCANNED`` memories: it may come back short, even empty, with a ``next_cursor`` to go on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import server.facade.reach as reach
from server.errors import InvalidInput, InvalidSpaceName, OutOfReach
from server.facade.recall import delivered
from server.facade.shown import shown
from server.memories import listing
from server.memories.data_filter import DataFilter, parse_filter
from server.models import Caller, DeliveryItem, Memory
from server.spaces import contains, partition_key, validate_space_name
from server.spaces.scope import Scope

if TYPE_CHECKING:
    from server.facade.parts import Parts

DEFAULT_PAGE = 50  # spaces or memories on a page unless asked
SCANNED = 2000  # memories one filtered page reads at most before it answers what it found


@dataclass(frozen=True)
class SpacePage:
    """A page of the spaces a caller reads, by name; ``personal``: it reads personal memories."""

    personal: bool
    spaces: list[str]
    next_cursor: str | None  # None: the last page


@dataclass(frozen=True)
class MemoryPage:
    """A page of the memories a caller reads, newest first, each with its text."""

    memories: list[Memory]
    next_cursor: str | None  # None: the last page


def spaces(
    parts: Parts, caller: Caller, *, within: str | None = None, cursor: str | None = None, limit: int = DEFAULT_PAGE
) -> SpacePage:
    """The spaces ``caller`` reads (with ``within``: that space and those below it), by name."""
    limit = listing.check_page_size(limit)
    after = _space_cursor(cursor)
    within = _within(within)
    scope = reach.scope_of(parts, caller)
    chosen = _chosen(scope, within, below=True)
    parts.gates.enter(caller)  # an ended run, or a step outside its seal, is refused here too
    names = [s for s in chosen if s is not None and (after is None or s > after)]
    page = names[:limit]
    more = len(names) > limit
    return SpacePage(within is None and scope.sees(None), page, page[-1] if more else None)


def memories(
    parts: Parts,
    caller: Caller,
    *,
    within: str | None = None,
    below: bool = True,
    where: object = None,
    cursor: str | None = None,
    limit: int = DEFAULT_PAGE,
) -> MemoryPage:
    """A page of the current memories ``caller`` reads, newest first: everywhere it reads, or in
    ``within`` (and, with ``below``, the spaces under it); ``where``: recall's filter over data.
    What goes out is recorded as delivered to the run before it is returned."""
    limit = listing.check_page_size(limit)
    listing.parse_cursor(cursor)  # a bad cursor is refused before anything is read
    data_filter = parse_filter(where)
    within = _within(within)
    if not isinstance(below, bool):
        raise InvalidInput("below must be true or false", field="below")
    scope = reach.scope_of(parts, caller)
    chosen = _chosen(scope, within, below=below)
    if len(chosen) > listing.MAX_PARTITIONS:
        raise InvalidInput(
            f"this caller reads more than {listing.MAX_PARTITIONS} spaces: name one lower down (within)",
            field="within",
        )
    run = parts.gates.enter(caller)
    now = parts.clock()
    selection = listing.Selection(partitions=tuple(partition_key(s) for s in chosen), state="current")
    found, next_cursor, left_out = _read(parts, selection, data_filter, cursor=cursor, limit=limit)
    counts, total = parts.memories.counts([partition_key(s) for s in scope.reached])
    cut = {
        "space": total - sum(counts.get(partition_key(s), (0, 0))[0] for s in scope.reached),
        "policy": sum(counts.get(partition_key(s), (0, 0))[0] for s, _ in scope.denied),
    }
    if within is not None:  # reached, and left out by the caller's own choice of a space
        cut["space"] += sum(counts.get(partition_key(s), (0, 0))[0] for s in scope.allowed if s not in chosen)
    if data_filter is not None:
        cut["filter"] = left_out
    items = [DeliveryItem(m.id, rank, 0.0, "delivered") for rank, m in enumerate(found, start=1)]
    # As a recall's (``server.facade.recall.delivered``): in the log before the answer leaves.
    delivered(parts, caller, run, found, query="", limit=limit, at=now, searched=list(chosen), items=items, cut=cut)
    return MemoryPage([shown(scope, m) for m in found], next_cursor)


def _read(
    parts: Parts, selection: listing.Selection, data_filter: DataFilter | None, *, cursor: str | None, limit: int
) -> tuple[list[Memory], str | None, int]:
    """Up to ``limit`` memories of ``selection`` after ``cursor`` that ``data_filter`` matches,
    each with its text; the cursor after the last one read; how many the filter left out."""
    found: list[Memory] = []
    left_out = 0
    scanned = 0
    size = limit if data_filter is None else listing.MAX_PAGE
    while True:
        page = listing.page(parts.catalog, selection, cursor=cursor, limit=size, now=parts.clock())
        for i, item in enumerate(page.memories):
            scanned += 1
            cursor = listing.cursor_of(item)
            if data_filter is not None and not data_filter.matches(item.memory.data):
                left_out += 1
            else:
                memory = parts.memories.with_text(item.memory)
                if not memory.forgotten:  # forgotten since the catalog was read: gone
                    found.append(memory)
            more = i + 1 < len(page.memories) or page.next_cursor is not None
            if len(found) == limit or scanned >= SCANNED:
                return found, cursor if more else None, left_out
        if page.next_cursor is None:
            return found, None, left_out


def _chosen(scope: Scope, within: str | None, *, below: bool) -> list[str | None]:
    """The spaces (None: personal) a listing reads: the scope's, or ``within``'s part of it.
    A ``within`` the caller may not read answers alike whether it exists or not: outside its
    reach, or denied by a policy with nothing readable below it (an empty answer would tell a
    denied AI that the space is there)."""
    if within is None:
        return sorted(scope.allowed, key=lambda s: (s is not None, s or ""))
    inside: list[str | None] = [
        s for s in scope.allowed if s is not None and (s == within or (below and contains(within, s)))
    ]
    if within not in scope.reached or not inside:
        raise OutOfReach(f"space {within!r} is not reachable from here")
    return sorted(inside, key=lambda s: s or "")


def _within(within: object) -> str | None:
    if within is None or within == "":
        return None
    try:
        return validate_space_name(within, field="within")
    except InvalidSpaceName as refused:  # the rule, said of the field that broke it
        raise InvalidSpaceName(f"within: {refused.message}", field="within") from None


def _space_cursor(cursor: object) -> str | None:
    if cursor is None or cursor == "":
        return None
    try:
        return validate_space_name(cursor, field="cursor")
    except InvalidInput:
        raise InvalidInput("cursor must be one a page of spaces gave (its next_cursor)", field="cursor") from None


__all__ = ["DEFAULT_PAGE", "MemoryPage", "SpacePage", "memories", "spaces"]
