"""The operator's memories: what the agents wrote, browsed, searched, corrected and forgotten
by the person who owns them (Settings › Memories, ``GET /v1/memories``, ``esfis memories``).

Every function here acts as the operator and trusts its caller, as ``Operator`` does: the
interfaces that reach it are the operator's (a signed-in page, an operator token, the CLI).
What it reads is chosen in the catalog first (``server.memories.listing``: a page, a count, a
day's counts) and only the memories shown have their text read out of their partitions.

The operator's search is a recall over the partitions the operator chose, recorded in the
delivery log as the operator's (AI ``operator``, transport ``operator``) and never as a step
of any agent's run. A correction is a replace written by the AI ``operator``: the new version
supersedes the old and keeps its origin marks (labels travel with data; a person who rewrote a
Slack message's fact still wrote a Slack message's fact). A forget is the purge every interface
promises, as is a forget by filter (``server.memories.forgetting.forget_where``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

import server.facade.recall as recalling
from server.clock import from_micros, parse_time, to_micros
from server.errors import InvalidInput, MemoryNotFound
from server.labels import check_source
from server.memories import forgetting, listing
from server.memories.input import NewMemory, check_id, check_text, new_id
from server.memories.listing import Day, Listed, Page, Selection
from server.models import MAX_LIMIT, PERSONAL, Caller, Memory, Place
from server.spaces import partition_key, space_of_key, validate_space_name
from server.spaces.policies import validate_ai
from server.spaces.scope import Scope

if TYPE_CHECKING:
    from server.facade.parts import Parts

OPERATOR_AI = "operator"
OPERATOR = Caller(ai=OPERATOR_AI, space=None, transport="operator")


@dataclass(frozen=True)
class Filter:
    """What the operator asks for: a space (``PERSONAL`` for personal memories), with or without
    the spaces below, and any of: an AI, an origin mark, written since / before, a state."""

    space: str | Place
    below: bool = False
    ai: str | None = None
    origin: str | None = None
    since: str | datetime | None = None
    before: str | datetime | None = None
    state: str | None = None


@dataclass(frozen=True)
class Preview:
    """What a forget by filter would forget: how many, and the newest catalog row it may touch
    (the confirmation hands it back, so nothing written after the preview is forgotten)."""

    count: int
    up_to: int


@dataclass(frozen=True)
class Detail:
    memory: Memory  # with its text
    supersedes: str | None  # the memory it superseded
    deliveries: list[dict]  # the newest that included it: delivery id, rank, score, outcome, at, ai


@dataclass(frozen=True)
class Found:
    """One row of the operator's search: the memory, its fused score and plain cosine."""

    memory: Memory
    score: float
    cosine: float


def selection(parts: Parts, f: Filter, *, up_to: int | None = None) -> Selection:
    """The catalog selection of a filter: every input checked, each error naming its field."""
    if f.space is PERSONAL:
        partitions: tuple[str, ...] = (partition_key(None),)
    elif isinstance(f.space, str):
        validate_space_name(f.space)
        parts.registry.require(f.space)
        names = parts.registry.subtree(f.space) if f.below else [f.space]
        if len(names) > listing.MAX_PARTITIONS:
            raise InvalidInput(f"{f.space} has more than {listing.MAX_PARTITIONS} spaces below it", field="space")
        partitions = tuple(partition_key(n) for n in names)
    else:
        raise InvalidInput("space is a space's name or PERSONAL", field="space")
    now = parts.clock()
    return Selection(
        partitions=partitions,
        ai=None if f.ai is None else validate_ai(f.ai),
        origin=None if f.origin is None else check_source(f.origin, field="origin"),
        written_since=_micros(f.since, now, "since"),
        written_before=_micros(f.before, now, "before"),
        state=listing.check_state(f.state),
        up_to=up_to,
    )


def page(parts: Parts, f: Filter, *, cursor: str | None = None, limit: int = 50) -> Page:
    """A page of memories newest first, each with its text."""
    chosen = selection(parts, f)
    found = listing.page(parts.catalog, chosen, cursor=cursor, limit=listing.check_page_size(limit), now=parts.clock())
    shown = [replace(item, memory=parts.memories.with_text(item.memory)) for item in found.memories]
    return Page([item for item in shown if not item.memory.forgotten], found.next_cursor)


def preview(parts: Parts, f: Filter) -> Preview:
    up_to = listing.newest_row(parts.catalog)
    return Preview(listing.count(parts.catalog, selection(parts, f, up_to=up_to), now=parts.clock()), up_to)


def forget_where(parts: Parts, f: Filter, *, up_to: int) -> int:
    """Forget what a preview counted: the same filter, nothing newer than its ``up_to``."""
    if isinstance(up_to, bool) or not isinstance(up_to, int) or up_to < 0:
        raise InvalidInput("up_to must be the preview's (a whole number)", field="up_to")
    return forgetting.forget_where(parts.catalog, parts.store, selection(parts, f, up_to=up_to), parts.clock())


def detail(parts: Parts, id_: str) -> Detail:
    memory = _memory(parts, id_)
    rows = listing.deliveries_of(parts.catalog, memory.id)
    return Detail(memory, listing.supersedes(parts.catalog, memory.id), [dict(_plain(r)) for r in rows])


def search(parts: Parts, query: str, f: Filter, *, limit: int = 10) -> tuple[list[Found], int]:
    """A recall as the operator inside the filter's spaces (its other filters do not apply: a
    recall ranks what is current), recorded in the delivery log as the operator's."""
    query = check_text(query, field="query")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}", field="limit")
    chosen = selection(parts, Filter(space=f.space, below=f.below))
    spaces = tuple(space_of_key(k) for k in chosen.partitions)
    scope = Scope(OPERATOR, spaces, spaces, (), parts.registry.policies())
    asked = recalling.ask(parts.clock(), query, limit=limit, as_of=None, where=None)
    now = asked.now
    vector = parts.embed_query(query)
    outcome = recalling.answer(parts.memories, scope, asked, lambda: vector)

    def bookkeeping(tx) -> int:
        return parts.deliveries.record(
            tx, OPERATOR, query=query, limit=limit, at=now, searched=list(spaces), items=outcome.items, cut=outcome.cut
        )

    delivery_id = parts.commits.run(bookkeeping)
    found = []
    for m in outcome.memories:
        stored = parts.store.vector(partition_key(m.space), m.id)
        cosine = float(np.dot(stored, vector)) if stored is not None else float("nan")
        memory = parts.memories.meta(m.id)
        if memory is not None:
            found.append(Found(replace(memory, text=m.text), m.score, round(cosine, 6)))
    return found, delivery_id


def correct(parts: Parts, id_: str, text: str) -> Memory:
    """Replace a memory's text: the new version supersedes it, written by the AI ``operator``."""
    old = _memory(parts, id_)
    text = check_text(text)
    if old.superseded_by is not None:
        raise InvalidInput(f"{old.id} is superseded already (by {old.superseded_by}): correct the current one")
    now = parts.clock()
    memory = NewMemory(
        id=new_id(),
        space=old.space,
        text=text,
        vector=parts.embed_documents([text])[0],
        ai=OPERATOR_AI,
        created_at=now,
        valid_from=now,
        valid_until=None,
        labels=old.origin,
        from_spaces=old.from_spaces,
    )
    parts.memories.write([memory], supersedes=(old.id, now))
    written = parts.memories.load(memory.id)
    assert written is not None
    return written


def forget(parts: Parts, id_: str) -> None:
    memory = _memory(parts, id_)

    def scrub(tx) -> None:
        parts.contexts.scrub(tx, memory.id)

    parts.memories.forget(memory, parts.clock(), also=scrub)


def days(parts: Parts, space: str | Place, *, days: int = 30) -> tuple[list[Day], list[Day]]:
    """A space's last ``days`` days (UTC): memories written per day by AI, and recalls per day
    from callers standing in it with how many came back empty. Counts only, never a text."""
    chosen = selection(parts, Filter(space=space))
    today = parts.clock().replace(hour=0, minute=0, second=0, microsecond=0)
    since = today - timedelta(days=days - 1)
    place = None if space is PERSONAL else space
    assert not isinstance(place, Place)
    return (
        listing.written_per_day(parts.catalog, chosen.partitions, since=since),
        listing.recalls_per_day(parts.catalog, (place,), since=since),
    )


def _memory(parts: Parts, id_: str) -> Memory:
    check_id(id_)
    memory = parts.memories.load(id_)
    if memory is None or memory.forgotten:
        raise MemoryNotFound(f"no memory {id_}")
    return memory


def _micros(value: str | datetime | None, now: datetime, field: str) -> int | None:
    """A time to filter by: ISO 8601, or a duration read as that long ago (``7d``: a week ago)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and (ago := _AGO.match(value.strip())):
        return to_micros(now - timedelta(**{_UNITS[ago.group(2)]: int(ago.group(1))}))
    return to_micros(parse_time(value, now=now, field=field))


_AGO = re.compile(r"^(\d{1,6})\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _plain(row) -> dict:
    plain = {k: row[k] for k in ("delivery_id", "rank", "score", "outcome", "ai", "transport")}
    return plain | {"at": from_micros(row["at"])}


__all__ = ["OPERATOR_AI", "Day", "Detail", "Filter", "Found", "Listed", "Page", "Preview"]
