"""Recall's filter over memories' data: parsed and checked once (``parse_filter``), matched
against a memory's data (``DataFilter.matches``: the semantics), and answered through the
catalog's index over data (``server.memories.data_index``): the ids a partition search may score
(``filter_reach``), or, with no query, the newest that match (``newest_matching``). The filter
runs after validity and before relevance.

The syntax is Mongo's, as LangGraph's stores take it: ``{"field": value}`` is equality;
``{"field": {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": v}}``, ``{"field": {"$in": [..]}}`` and
``{"field": {"$exists": true|false}}``; every field must hold (AND). A field names a key of the
data; ``a.b`` a key inside an object (a key that itself holds a dot is found first, as written).

Comparison: numbers compare as numbers (a boolean is no number); two strings that both read as
ISO 8601 times with a timezone compare as instants; any other value is equal only to the same
JSON value. A range operator takes a number or such a time, else the filter is refused. ``$ne``
holds where the field is missing, as in Mongo and LangGraph's in-memory store.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from indexing.partitions.store import VectorStore
from indexing.rows import Hit
from server.clock import to_micros
from server.errors import InvalidInput
from server.inputs import MAX_FILTER_BYTES, MAX_FILTER_FIELDS, MAX_FILTER_VALUES, size
from server.memories import MemoryBook
from server.memories.data import MISSING, Data, at_path, compact, instant, is_number, loaded
from server.memories.data_index import joined, joined_capped, keyed, matching_sql, probes
from server.spaces import partition_key

FIELD = "filter"
EQUALITY = ("$eq", "$ne")
RANGES = ("$gt", "$gte", "$lt", "$lte")
OPERATORS = (*EQUALITY, *RANGES, "$in", "$exists")
WALK = 256  # the newest memories of a partition a filter with no query tests one by one first
SMALL_SET = 2048  # a filter's set read whole when no larger; a larger one matches often enough to walk for
DEEP_WALK = 16384  # ... the newest this many, before its set is read whole after all


@dataclass(frozen=True)
class Condition:
    """One field's test: ``op`` on the value at ``field`` (a key, or a dotted path)."""

    field: str
    op: str
    value: Any

    def holds(self, data: Data) -> bool:
        found = at_path(data, self.field)
        if self.op == "$exists":
            return (found is not MISSING) == self.value
        if self.op == "$ne":
            return found is MISSING or not _equal(found, self.value)
        if found is MISSING:
            return False
        if self.op == "$eq":
            return _equal(found, self.value)
        if self.op == "$in":
            return any(_equal(found, v) for v in self.value)
        return _in_range(self.op, found, self.value)


@dataclass(frozen=True)
class DataFilter:
    """A checked filter: every condition must hold."""

    conditions: tuple[Condition, ...]

    def matches(self, data: Data) -> bool:
        return all(c.holds(data) for c in self.conditions)

    @property
    def matches_none(self) -> bool:
        """Whether a memory with no data matches (then rows without data are candidates too)."""
        return self.matches({})

    @property
    def triples(self) -> list[tuple[str, str, Any]]:
        return [(c.field, c.op, c.value) for c in self.conditions]


def parse_filter(raw: object) -> DataFilter | None:
    """The filter ``raw`` (None or {} for none), or ``InvalidInput`` naming what is wrong."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InvalidInput(f"filter must be a JSON object of field: condition, got {type(raw).__name__}", field=FIELD)
    try:
        written = compact(raw)
    except (TypeError, ValueError):
        raise InvalidInput("filter is not a JSON object (a value JSON cannot hold)", field=FIELD) from None
    if len(written.encode("utf-8")) > MAX_FILTER_BYTES:
        raise InvalidInput(f"filter is larger than {size(MAX_FILTER_BYTES)} as compact JSON", field=FIELD)
    if len(raw) > MAX_FILTER_FIELDS:
        raise InvalidInput(f"filter tests {len(raw)} fields; the limit is {MAX_FILTER_FIELDS}", field=FIELD)
    conditions: list[Condition] = []
    for name, test in raw.items():
        if not isinstance(name, str) or not name or name.startswith("$"):
            raise InvalidInput(
                f"filter field {name!r} is not a field: name a key of data (a.b inside one); "
                "operators go inside a field's condition",
                field=FIELD,
            )
        if isinstance(test, dict) and any(isinstance(k, str) and k.startswith("$") for k in test):
            conditions += [_condition(name, op, value) for op, value in test.items()]
        else:
            conditions.append(_condition(name, "$eq", test))
    return DataFilter(tuple(conditions)) if conditions else None


def _condition(name: str, op: object, value: object) -> Condition:
    where = f"filter field {name!r}"
    if op not in OPERATORS:
        raise InvalidInput(
            f"{where}: unknown operator {op!r}; the operators are {', '.join(OPERATORS)}"
            + (" (a condition mixing operators and plain keys is not one)" if not str(op).startswith("$") else ""),
            field=FIELD,
        )
    assert isinstance(op, str)
    if op == "$exists":
        if not isinstance(value, bool):
            raise InvalidInput(f"{where}: $exists takes true or false, got {value!r}", field=FIELD)
    elif op == "$in":
        if not isinstance(value, list):
            raise InvalidInput(f"{where}: $in takes an array of values", field=FIELD)
        if len(value) > MAX_FILTER_VALUES:
            raise InvalidInput(f"{where}: $in lists {len(value)} values; the limit is {MAX_FILTER_VALUES}", field=FIELD)
    elif op in RANGES and not (is_number(value) or instant(value) is not None):
        raise InvalidInput(
            f"{where}: {op} compares numbers or ISO 8601 times with a timezone, got {json.dumps(value)[:80]}",
            field=FIELD,
        )
    return Condition(name, op, value)


def _equal(found: object, wanted: object) -> bool:
    if is_number(found) and is_number(wanted):
        return found == wanted
    if isinstance(found, bool) or isinstance(wanted, bool):
        return type(found) is type(wanted) and found == wanted
    if isinstance(found, str) and isinstance(wanted, str):
        if found == wanted:
            return True
        a, b = instant(found), instant(wanted)
        return a is not None and b is not None and a == b
    return type(found) is type(wanted) and found == wanted


def _in_range(op: str, found: object, bound: object) -> bool:
    a: Any
    b: Any
    if is_number(bound):
        if not is_number(found):
            return False
        a, b = found, bound
    else:
        a, b = instant(found), instant(bound)
        if a is None or b is None:
            return False
    if op == "$gt":
        return bool(a > b)
    if op == "$gte":
        return bool(a >= b)
    if op == "$lt":
        return bool(a < b)
    return bool(a <= b)


def filter_reach(book: MemoryBook, keys: list[str], data_filter: DataFilter) -> dict[str, list[str]]:
    """The ids of the partitions ``keys`` whose data ``data_filter`` matches, by partition: what a
    partition's search may score (validity is the search's to apply, at the recall's time; a
    forgotten memory has no fields left to match). One indexed statement; the loose rows it
    takes (``server.memories.data_index``) are matched here."""
    return reach_within(book, keys, data_filter)[0]


def reach_within(
    book: MemoryBook, keys: list[str], data_filter: DataFilter, bounds: dict[str, int] | None = None
) -> tuple[dict[str, list[str]], set[str]]:
    """``filter_reach``, a partition named in ``bounds`` read only up to its bound: one whose
    indexed set holds more is left out of the ids and named apart (too many to read whole)."""
    if not keys:
        return {}, set()
    catalog = book.catalog
    bounds = bounds or {}
    chosen, params, loose, loose_params = matching_sql(data_filter.triples, catalog.sql)
    allowed: dict[str, list[str]] = {}
    over: set[str] = set()
    if chosen is not None:
        whole = [k for k in keys if k not in bounds]
        if whole:
            for partition, ids in catalog.all(joined(chosen, catalog.sql), keyed(params, whole)):
                allowed[partition] = ids.split(",")
        for key in keys:
            if key in bounds:  # one statement each: the bound is the partition's own
                row = catalog.one(joined_capped(chosen, catalog.sql), (*keyed(params, [key]), bounds[key] + 1))
                ids = row[0].split(",") if row is not None and row[0] else []
                if len(ids) > bounds[key]:
                    over.add(key)
                elif ids:
                    allowed[key] = ids
    if loose:
        suspects = {r[1]: r[0] for r in catalog.all(loose, keyed(loose_params, keys)) if r[0] not in over}
        failing = _failing(book, set(suspects), data_filter)
        allowed = {k: [i for i in ids if i not in suspects] for k, ids in allowed.items()}
        for id_, partition in suspects.items():
            if id_ not in failing:
                allowed.setdefault(partition, []).append(id_)
    return allowed, over


def _failing(book: MemoryBook, ids: set[str], data_filter: DataFilter) -> set[str]:
    """Of ``ids``, those whose data ``data_filter`` does not match (read from the catalog)."""
    if not ids:
        return set()
    rows = book.catalog.all(
        f"SELECT id, data FROM memories WHERE id IN (SELECT value FROM {book.catalog.sql.values})",
        (json.dumps(sorted(ids)),),
    )
    return {r[0] for r in rows if not data_filter.matches(loaded(r[1]))}


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
    """A recall with a filter and no query: the newest ``count`` memories of ``spaces`` valid at
    ``at`` whose data matches, newest first, as hits of score 0 (no query to be close to); and
    how many valid ones the filter refused on the way: those newer than a partition's last hit
    among the ``WALK`` newest it tested one by one (the rest were never read: counting every
    memory a filter leaves out would cost a read of them all)."""
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


def _newest_in(
    book: MemoryBook, key: str, data_filter: DataFilter, micros: int, as_of: bool, count: int
) -> tuple[list[tuple[Any, ...]], int]:
    """The newest ``count`` memories of partition ``key`` valid at ``micros`` that match, and how
    many valid ones were refused before the last of them: first among its newest ``WALK``, each
    tested by index probes (a broad filter stops there); else, for a set over ``SMALL_SET``,
    among its newest ``DEEP_WALK``; else from the filter's indexed set, newest first (its cost
    is the set's: a narrow filter's, or one whose matches are all old)."""
    catalog = book.catalog
    columns = "m.partition, m.id, m.data, m.created_at, m.valid_from, m.valid_until, m.row_at"
    valid = (
        f"m.forgotten_at IS NULL {'' if as_of else 'AND m.superseded_by IS NULL '}AND m.valid_from <= ? "
        f"AND (m.valid_until IS NULL OR m.valid_until > ?){'' if data_filter.matches_none else ' AND m.data IS NOT NULL'}"
    )
    # Newest first by the index memories_by_written (partition, created_at, rowid): an import's
    # rows share their time, and a tie broken by id sorted the whole batch.
    order = "ORDER BY m.created_at DESC, m.row_at DESC"
    test, params = probes(data_filter.triples)
    inner = (
        "(SELECT rowid AS row_at, partition, id, data, created_at, valid_from, valid_until, forgotten_at, "
        "superseded_by FROM memories WHERE partition = ? ORDER BY created_at DESC, rowid DESC LIMIT ?) m"
    )
    walked = catalog.all(
        f"SELECT {columns}, CASE WHEN {test} THEN 1 ELSE 0 END AS hit FROM {inner} WHERE {valid} {order}",
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
    chosen, chosen_params, loose, loose_params = matching_sql(data_filter.triples, catalog.sql)
    suspects = len(catalog.all(loose, keyed(loose_params, [key]))) if loose else 0
    if chosen is not None and larger_than(catalog, chosen, keyed(chosen_params, [key]), SMALL_SET):
        # Over SMALL_SET matches: at least one in (live / SMALL_SET) memories, so the next
        # ``count`` lie among the newest few thousand while they are spread over time.
        deep = catalog.all(
            f"SELECT {columns} FROM {inner} WHERE {valid} AND {test} {order} LIMIT ?",
            (key, DEEP_WALK, micros, micros, *params, count + suspects),
        )
        deep_found = [tuple(r) for r in deep if data_filter.matches(loaded(r[2]))][:count]
        if len(deep_found) == count:
            return deep_found, refused
    sets = [s for s in (chosen, loose) if s]
    # CROSS JOIN: SQLite then reads the set first, as written (left to itself, it walked the
    # whole partition newest first, testing each memory against the set).
    rows = catalog.all(
        f"SELECT {columns} FROM ({' UNION '.join(sets)}) AS chosen CROSS JOIN (SELECT rowid AS row_at, * FROM memories) m "
        f"WHERE m.id = chosen.memory_id AND m.partition = ? AND {valid} {order} LIMIT ?",
        (*keyed((chosen_params if chosen else []) + loose_params, [key]), key, micros, micros, count + suspects),
    )
    return [tuple(r) for r in rows if data_filter.matches(loaded(r[2]))][:count], refused


def larger_than(catalog: Any, chosen: str, params: tuple[Any, ...], bound: int) -> bool:
    """Whether the set ``chosen`` holds more than ``bound`` memories (counted no further)."""
    row = catalog.one(
        f"SELECT count(*) FROM (SELECT 1 FROM ({chosen}) AS chosen LIMIT ?) AS capped", (*params, bound + 1)
    )
    return int(row[0]) > bound
