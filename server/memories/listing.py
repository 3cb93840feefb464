"""The operator's view of the memories themselves: a selection of them (spaces, AI, origin mark,
time written, state), read newest first a page at a time, counted, and a space's days.

Pages are keyset pages: a cursor names the last memory shown by (time written, catalog row),
and the next page reads on from there with the index ``memories_by_written`` (partition, time
written; schema 10), so page 2,000 of a space of a million memories costs what page 1 does and
nothing is read twice. A selection over several partitions (a space and the spaces below) reads
at most a page from each and merges them: no partition is ever read whole. Only the rows shown
have their text read out of their partition.

A selection is also what a forget by filter forgets (``server.memories.forgetting.forget_where``):
the preview counts it and fixes the newest row it may touch (``up_to``), so what is confirmed is
what was counted, and a memory written after the preview is never touched.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from server.barrier.labels import Labels
from server.catalog import Catalog, Row
from server.clock import from_micros, to_micros
from server.errors import InvalidInput
from server.memories.data import Data, loaded
from server.models import Memory

State = Literal["current", "superseded", "expired"]
STATES: tuple[State, ...] = ("current", "superseded", "expired")
MAX_PAGE = 200  # memories on one page, at most
MAX_PARTITIONS = 1000  # partitions one selection may span (a space and the spaces below)
DAY = 86_400_000_000  # micros


@dataclass(frozen=True)
class Selection:
    """Which memories: not forgotten, in ``partitions``, and each filter given. Times are micros."""

    partitions: tuple[str, ...]
    ai: str | None = None
    origin: str | None = None  # one origin mark, as ``source:slack``
    written_since: int | None = None  # created_at >= this
    written_before: int | None = None  # created_at < this
    state: State | None = None
    up_to: int | None = None  # the newest catalog row it may hold (a preview's, fixed)

    def clauses(self, catalog: Catalog, now: int) -> tuple[list[str], list[Any]]:
        """SQL conditions (ANDed) and their parameters, the partition excepted."""
        where: list[str] = ["forgotten_at IS NULL"]
        params: list[Any] = []
        if self.ai is not None:
            where.append("ai = ?")
            params.append(self.ai)
        if self.origin is not None:
            where.append(f"{catalog.sql.find}(labels, ?) > 0")
            params.append(json.dumps(self.origin))  # with its quotes: a whole mark, never a part of one
        if self.written_since is not None:
            where.append("created_at >= ?")
            params.append(self.written_since)
        if self.written_before is not None:
            where.append("created_at < ?")
            params.append(self.written_before)
        if self.up_to is not None:
            where.append("rowid <= ?")
            params.append(self.up_to)
        if self.state == "current":
            where.append("superseded_by IS NULL AND valid_from <= ? AND (valid_until IS NULL OR valid_until > ?)")
            params += [now, now]
        elif self.state == "superseded":
            where.append("superseded_by IS NOT NULL")
        elif self.state == "expired":
            where.append("superseded_by IS NULL AND valid_until IS NOT NULL AND valid_until <= ?")
            params.append(now)
        return where, params


@dataclass(frozen=True)
class Listed:
    """A memory as a page lists it: the catalog's row (text read separately) and its row's place."""

    memory: Memory
    rowid: int
    supersedes: str | None


@dataclass(frozen=True)
class Page:
    memories: list[Listed]
    next_cursor: str | None  # None: this is the last page


@dataclass(frozen=True)
class Day:
    day: str  # YYYY-MM-DD, UTC
    counts: dict[str, int] = field(default_factory=dict)  # by AI (written) or by outcome (recalls)


def cursor_of(listed: Listed) -> str:
    return f"{to_micros(listed.memory.created_at)}.{listed.rowid}"


def parse_cursor(cursor: str | None) -> tuple[int, int] | None:
    """A page's cursor, as ``cursor_of`` made it; anything else is a clear error."""
    if cursor is None or cursor == "":
        return None
    micros, _, rowid = cursor.partition(".")
    if not (micros.isdigit() and rowid.isdigit() and len(micros) <= 19 and len(rowid) <= 19):
        raise InvalidInput("cursor must be one a page of memories gave (its next_cursor)", field="cursor")
    return int(micros), int(rowid)


def check_page_size(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_PAGE}, got {limit!r}", field="limit")
    return limit


def check_state(state: object) -> State | None:
    if state is None or state == "" or state == "all":
        return None
    if state not in STATES:
        raise InvalidInput(f"state must be one of {', '.join(STATES)} (or all), got {str(state)[:20]!r}", field="state")
    return state


def page(catalog: Catalog, selection: Selection, *, cursor: str | None, limit: int, now: datetime) -> Page:
    """One page of the selection, newest first (time written, then the catalog's row)."""
    after = parse_cursor(cursor)
    where, params = selection.clauses(catalog, to_micros(now))
    if after is not None:
        where.append("(created_at < ? OR (created_at = ? AND rowid < ?))")
        params += [after[0], after[0], after[1]]
    sql = (
        f"SELECT *, rowid AS row_at FROM memories WHERE partition = ? AND {' AND '.join(where)} "
        "ORDER BY created_at DESC, rowid DESC LIMIT ?"
    )
    runs = [catalog.all(sql, (key, *params, limit + 1)) for key in selection.partitions]
    newest = heapq.merge(*runs, key=lambda r: (r["created_at"], r["row_at"]), reverse=True)
    rows = [r for _, r in zip(range(limit + 1), newest, strict=False)]
    listed = [_listed(r) for r in rows[:limit]]
    return Page(listed, cursor_of(listed[-1]) if len(rows) > limit else None)


def count(catalog: Catalog, selection: Selection, *, now: datetime) -> int:
    """How many memories the selection holds now."""
    where, params = selection.clauses(catalog, to_micros(now))
    sql = f"SELECT count(*) AS n FROM memories WHERE partition = ? AND {' AND '.join(where)}"
    return sum(int(catalog.one(sql, (key, *params))["n"]) for key in selection.partitions)


def newest_row(catalog: Catalog) -> int:
    """The newest catalog row now: a preview fixes it, so its confirmation touches nothing newer."""
    row = catalog.one("SELECT max(rowid) AS n FROM memories")
    return int(row["n"] or 0)


def supersedes(catalog: Catalog, memory_id: str) -> str | None:
    """The memory this one superseded, if any."""
    row = catalog.one("SELECT supersedes FROM memories WHERE id = ?", (memory_id,))
    return None if row is None else row["supersedes"]


def deliveries_of(catalog: Catalog, memory_id: str, *, last: int = 50) -> list[Row]:
    """The newest deliveries that included a memory or cut it by limit: ids, ranks, scores (no text)."""
    return catalog.all(
        "SELECT i.delivery_id, i.rank, i.score, i.outcome, d.at, d.ai, d.transport FROM all_delivery_items i "
        "JOIN deliveries d ON d.id = i.delivery_id WHERE i.memory_id = ? ORDER BY i.delivery_id DESC LIMIT ?",
        (memory_id, last),
    )


def written_per_day(catalog: Catalog, partitions: tuple[str, ...], *, since: datetime) -> list[Day]:
    """Memories written per day (UTC) since ``since``, by AI: forgotten ones left out."""
    start = to_micros(since)
    by_day: dict[int, dict[str, int]] = {}
    for key in partitions:
        for r in catalog.all(
            "SELECT ai, (created_at - ?) / ? AS d, count(*) AS n FROM memories "
            "WHERE partition = ? AND created_at >= ? AND forgotten_at IS NULL GROUP BY 1, 2",
            (start, DAY, key, start),
        ):
            counts = by_day.setdefault(int(r["d"]), {})
            counts[r["ai"]] = counts.get(r["ai"], 0) + int(r["n"])
    return _days(by_day, since)


def recalls_per_day(catalog: Catalog, spaces: tuple[str | None, ...], *, since: datetime) -> list[Day]:
    """Recalls per day (UTC) by callers standing in ``spaces``, and how many came back empty."""
    start = to_micros(since)
    by_day: dict[int, dict[str, int]] = {}
    for space in spaces:
        where = "d.space IS NULL" if space is None else "d.space = ?"
        params: tuple = () if space is None else (space,)
        for r in catalog.all(
            "SELECT (d.at - ?) / ? AS day, count(*) AS n, sum(CASE WHEN EXISTS (SELECT 1 FROM all_delivery_items i "
            "WHERE i.delivery_id = d.id AND i.outcome = 'delivered') THEN 0 ELSE 1 END) AS empty "
            f"FROM deliveries d WHERE {where} AND d.at >= ? GROUP BY 1",
            (start, DAY, *params, start),
        ):
            counts = by_day.setdefault(int(r["day"]), {"recalls": 0, "empty": 0})
            counts["recalls"] += int(r["n"])
            counts["empty"] += int(r["empty"] or 0)
    return _days(by_day, since)


def _days(by_day: dict[int, dict[str, int]], since: datetime) -> list[Day]:
    start = to_micros(since)
    return [Day(from_micros(start + d * DAY).strftime("%Y-%m-%d"), by_day[d]) for d in sorted(by_day)]


def _listed(row: Row) -> Listed:
    return Listed(memory_of(row), int(row["row_at"]), row["supersedes"])


def memory_of(row: Row) -> Memory:
    """A memory from its catalog row (every column), without its text."""
    return Memory(
        id=row["id"],
        space=row["space"],
        text=None,
        ai=row["ai"],
        created_at=from_micros(row["created_at"]),
        valid_from=from_micros(row["valid_from"]),
        valid_until=from_micros(row["valid_until"]),
        superseded_by=row["superseded_by"],
        digest=row["digest"],
        origin=tuple(json.loads(row["labels"])),
        key=row["key"],
        forgotten=row["forgotten_at"] is not None,
        from_spaces=tuple(json.loads(row["from_spaces"])),
        run_id=row["run_id"],
        data=loaded(row["data"]),
    )


def current_rows(
    catalog: Catalog, ids: list[str], now: datetime, *, as_of: bool = False
) -> tuple[dict[str, Labels], dict[str, Data]]:
    """Of ``ids``, those current at ``now`` (with ``as_of``, valid then: superseded since
    included, forgotten never) with their labels, and the data of those that carry any, in one
    read (``MemoryBook.current_with_data``: a recall's last word on validity)."""
    if not ids:
        return {}, {}
    micros = to_micros(now)
    # The ids as one JSON array: one statement text whatever their number (PostgreSQL
    # prepares a statement it has seen often; a list of marks made a new text per length).
    rows = catalog.all(
        "SELECT id, space, labels, digest, run_id, from_spaces, data FROM memories "
        f"WHERE id IN (SELECT value FROM {catalog.sql.values}) "
        f"AND forgotten_at IS NULL {'' if as_of else 'AND superseded_by IS NULL '}AND valid_from <= ? "
        "AND (valid_until IS NULL OR valid_until > ?)",
        (json.dumps(ids), micros, micros),
    )
    labels = {
        r["id"]: Labels(r["space"], _marks(r["labels"]), r["digest"], r["run_id"], _marks(r["from_spaces"]))
        for r in rows
    }
    return labels, {r["id"]: loaded(r["data"]) for r in rows if r["data"] is not None}


def _marks(stored: str) -> tuple[str, ...]:
    # Most memories carry no marks: skip the JSON parser for them (it ran twice per hit).
    return () if stored == "[]" else tuple(json.loads(stored))
