"""A recall with a filter over data and no query: the newest memories that match, newest first
(``newest_matching``). There is nothing to score, so the answer is a read, cheapest first:

- **the walk**: the partition's ``WALK`` newest memories, each tested by index probes (a broad
  filter's matches are among them);
- **the index's newest**: one condition of single values (an equality, ``$in``) read newest first
  from the catalog's index over data, whose rows carry their memory's time (schema 16), and only
  those candidates tested whole: a narrow filter's newest read without reading the rest of its
  set (``_newest_by_value``);
- **the deep walk**: for a set over ``SMALL_SET`` whose newest the index could not give (they
  share one time, an import's), the ``DEEP_WALK`` newest memories;
- **the set**: the filter's indexed set read whole, newest first (its cost is the set's).

Each gives the same answer: the newest ``count`` valid memories that match, by (created_at,
rowid) as the memories page orders them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from indexing.partitions.store import VectorStore
from indexing.rows import Hit
from server.clock import to_micros
from server.memories import MemoryBook
from server.memories import data_filter as filters
from server.memories.data import loaded
from server.memories.data_filter import DataFilter, larger_than
from server.memories.data_index import Compiled, compiled_all, keyed, matching_sql, probes
from server.spaces import partition_key

WALK = 256  # the newest memories of a partition a filter with no query tests one by one first
DEEP_WALK = 16384  # ... the newest this many, for a set over SMALL_SET, before it is read whole
FIRST_READ = 64  # a condition's newest matches read from the index first, four times more each time
MOST_READ = 1024  # ... up to this many, then the set is read as before

_COLUMNS = "m.partition, m.id, m.data, m.created_at, m.valid_from, m.valid_until, m.row_at"
# Newest first by the index memories_by_written (partition, created_at, rowid): an import's rows
# share their time, and a tie broken by id sorted the whole batch.
_ORDER = "ORDER BY m.created_at DESC, m.row_at DESC"
_FIELDS = "rowid AS row_at, partition, id, data, created_at, valid_from, valid_until, forgotten_at, superseded_by"


def newest_matching(
    book: MemoryBook,
    store: VectorStore,
    spaces: Sequence[str | None],
    data_filter: DataFilter,
    *,
    at: datetime,
    as_of: bool,
    count: int,
) -> tuple[list[tuple[Hit, str | None]], int]:
    """The newest ``count`` memories of ``spaces`` valid at ``at`` whose data matches, newest
    first, as hits of score 0 (no query to be close to); and how many valid ones the filter
    refused on the way: those newer than a partition's last hit among the ``WALK`` newest it
    tested one by one (the rest were never read: counting every memory a filter leaves out would
    cost a read of them all)."""
    space_of = {partition_key(s): s for s in spaces}
    rows: list[tuple[Any, ...]] = []
    refused = 0
    for key in space_of:
        found, left = _newest_in(book, key, data_filter, to_micros(at), as_of, count)
        rows += found
        refused += left
    rows.sort(key=lambda r: (r[3], r[6]), reverse=True)
    hits: list[tuple[Hit, str | None]] = []
    for key, id_, _, created_at, valid_from, valid_until, _ in rows:
        if len(hits) == count:
            break
        text = store.text(key, id_)
        if text is None:  # purged by a forget meanwhile: the catalog's check drops it too
            continue
        hits.append((Hit(id_, 0.0, text, created_at, valid_from, valid_until), space_of[key]))
    return hits, refused


def _valid(data_filter: DataFilter, as_of: bool) -> str:
    """A memory ``m`` valid at the two parameters' time (and holding data, where a match needs it)."""
    return (
        f"m.forgotten_at IS NULL {'' if as_of else 'AND m.superseded_by IS NULL '}AND m.valid_from <= ? "
        f"AND (m.valid_until IS NULL OR m.valid_until > ?){'' if data_filter.matches_none else ' AND m.data IS NOT NULL'}"
    )


def _matching(rows: Sequence[Any], data_filter: DataFilter) -> list[tuple[Any, ...]]:
    """Of rows ending with the probes' verdict, those the filter matches (a loose value decided
    on the data), without the verdict."""
    return [tuple(r)[:7] for r in rows if r[7] and data_filter.matches(loaded(r[2]))]


def _newest_in(
    book: MemoryBook, key: str, data_filter: DataFilter, micros: int, as_of: bool, count: int
) -> tuple[list[tuple[Any, ...]], int]:
    """The newest ``count`` memories of partition ``key`` valid at ``micros`` that match, and how
    many valid ones were refused before the last of them (see the module for the order of reads)."""
    catalog = book.catalog
    valid = _valid(data_filter, as_of)
    test, params = probes(data_filter.triples)
    inner = f"(SELECT {_FIELDS} FROM memories WHERE partition = ? ORDER BY created_at DESC, rowid DESC LIMIT ?) m"
    walked = catalog.all(
        f"SELECT {_COLUMNS}, CASE WHEN {test} THEN 1 ELSE 0 END AS hit FROM {inner} WHERE {valid} {_ORDER}",
        (*params, key, WALK, micros, micros),
    )
    found: list[tuple[Any, ...]] = []
    refused = 0
    for r in walked:
        if r[7] and data_filter.matches(loaded(r[2])):
            found.append(tuple(r)[:7])
            if len(found) == count:
                return found, refused
        else:
            refused += 1
    by_value = _newest_by_value(book, key, data_filter, valid, micros, count)
    if by_value is not None:
        return by_value, refused
    chosen, chosen_params, loose, loose_params = matching_sql(data_filter.triples, catalog.sql)
    suspects = len(catalog.all(loose, keyed(loose_params, [key]))) if loose else 0
    if chosen is not None and larger_than(catalog, chosen, keyed(chosen_params, [key]), filters.SMALL_SET):
        # Over SMALL_SET matches: at least one in (live / SMALL_SET) memories, so the next
        # ``count`` lie among the newest few thousand while they are spread over time.
        deep = catalog.all(
            f"SELECT {_COLUMNS} FROM {inner} WHERE {valid} AND {test} {_ORDER} LIMIT ?",
            (key, DEEP_WALK, micros, micros, *params, count + suspects),
        )
        deep_found = [tuple(r) for r in deep if data_filter.matches(loaded(r[2]))][:count]
        if len(deep_found) == count:
            return deep_found, refused
    sets = [s for s in (chosen, loose) if s]
    # CROSS JOIN: SQLite then reads the set first, as written (left to itself, it walked the
    # whole partition newest first, testing each memory against the set).
    rows = catalog.all(
        f"SELECT {_COLUMNS} FROM ({' UNION '.join(sets)}) AS chosen CROSS JOIN (SELECT rowid AS row_at, * FROM memories) m "
        f"WHERE m.id = chosen.memory_id AND m.partition = ? AND {valid} {_ORDER} LIMIT ?",
        (*keyed((chosen_params if chosen else []) + loose_params, [key]), key, micros, micros, count + suspects),
    )
    return [tuple(r) for r in rows if data_filter.matches(loaded(r[2]))][:count], refused


def _streamed(data_filter: DataFilter) -> Compiled | None:
    """The condition whose matches are read newest first: a positive one of single values, each
    read in time order from its index. None without one: a range's stretch would be sorted whole
    at each read (a broad one costs more than the walks), and ``$exists`` reads every row at its
    path; the walks and the set answer those."""
    positive = (c for c in compiled_all(data_filter.triples) if not c.negated)
    return next((c for c in positive if all(t.single or t.loose for t in c.terms)), None)


def _newest_by_value(
    book: MemoryBook, key: str, data_filter: DataFilter, valid: str, micros: int, count: int
) -> list[tuple[Any, ...]] | None:
    """The newest ``count`` matches read through one condition's index rows, newest first: each
    of its terms (its exact values and the loose rows at its path, a superset of its matches)
    gives its ``n`` newest by the memory's time; the rows newer than every cut term's last are
    all the condition's rows above that time, so once ``count`` of them match whole they are the
    partition's newest. None when ``MOST_READ`` a term did not find them, or a row of the
    condition lacks its time (the set is read as before)."""
    streamed = _streamed(data_filter)
    if streamed is None:
        return None
    catalog = book.catalog
    test, params = probes(data_filter.triples)
    n = FIRST_READ
    while n <= MOST_READ:
        # Each term's newest n, and one of its rows without a time if any (an older server's
        # write: SQLite sorts it last, so the newest would not show it).
        selects = [
            f"SELECT memory_id, created_at, {i} AS term FROM (SELECT memory_id, created_at FROM memory_fields "
            f"WHERE partition = ? AND path = ? AND {t.sql} AND created_at IS NULL LIMIT 1) AS undated{i} UNION ALL "
            f"SELECT memory_id, created_at, {i} AS term FROM (SELECT memory_id, created_at FROM memory_fields "
            f"WHERE partition = ? AND path = ? AND {t.sql} ORDER BY created_at DESC LIMIT ?) AS term{i}"
            for i, t in enumerate(streamed.terms)
        ]
        read = catalog.all(
            " UNION ALL ".join(selects),
            tuple(p for t in streamed.terms for p in (key, streamed.path, *t.params, key, streamed.path, *t.params, n)),
        )
        if any(r[1] is None for r in read):
            return None  # the set is read as before
        by_term: dict[int, list[int]] = {}
        for _, created_at, term in read:
            by_term.setdefault(int(term), []).append(int(created_at))
        cut = [min(times) for times in by_term.values() if len(times) >= n]  # a term with more left
        above = max(cut, default=None)
        ids = sorted({r[0] for r in read if above is None or int(r[1]) > above})
        found: list[tuple[Any, ...]] = []
        if ids:
            # CROSS JOIN: each candidate looked up by its id (an IN let SQLite walk the partition).
            rows = catalog.all(
                f"SELECT {_COLUMNS}, CASE WHEN {test} THEN 1 ELSE 0 END AS hit FROM (SELECT value AS listed "
                f"FROM {catalog.sql.values}) AS candidates CROSS JOIN (SELECT {_FIELDS} FROM memories) m "
                f"WHERE m.id = candidates.listed AND m.partition = ? AND {valid} {_ORDER}",
                (*params, json.dumps(ids), key, micros, micros),
            )
            found = _matching(rows, data_filter)
        if len(found) >= count or above is None:
            return found[:count]
        n *= 4
    return None
