"""Recall's filter over memories' data: parsed and checked once (``parse_filter``), matched
against a memory's data (``DataFilter.matches``: the semantics), and answered through the
catalog's index over data (``server.memories.data_index``): the ids a partition search may score
(``filter_reach``), or, with no query, the newest that match (``server.memories.newest``). The filter
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
from dataclasses import dataclass
from typing import Any

from server.errors import InvalidInput
from server.inputs import MAX_FILTER_BYTES, MAX_FILTER_FIELDS, MAX_FILTER_VALUES, size
from server.memories import MemoryBook
from server.memories.data import MISSING, Data, at_path, compact, instant, is_number, loaded
from server.memories.data_index import joined, joined_capped, keyed, matching_sql

FIELD = "filter"
EQUALITY = ("$eq", "$ne")
RANGES = ("$gt", "$gte", "$lt", "$lte")
OPERATORS = (*EQUALITY, *RANGES, "$in", "$exists")
SMALL_SET = 2048  # a filter's set read whole when no larger; a larger one matches often enough to walk for


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


def larger_than(catalog: Any, chosen: str, params: tuple[Any, ...], bound: int) -> bool:
    """Whether the set ``chosen`` holds more than ``bound`` memories (counted no further)."""
    row = catalog.one(
        f"SELECT count(*) FROM (SELECT 1 FROM ({chosen}) AS chosen LIMIT ?) AS capped", (*params, bound + 1)
    )
    return int(row[0]) > bound
