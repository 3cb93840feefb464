"""Recall's filter over memories' data: parsed and checked once (``parse_filter``), matched
against a memory's data (``DataFilter.matches``), and turned into the ids a partition search
may score (``allowed_ids``), so that the filter runs after validity and before relevance.

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
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from indexing.partitions.store import VectorStore
from indexing.rows import Hit
from server.errors import InvalidInput
from server.inputs import MAX_FILTER_BYTES, MAX_FILTER_FIELDS, MAX_FILTER_VALUES, size
from server.memories import MemoryBook
from server.memories.data import Data, compact, loaded
from server.spaces import partition_key

FIELD = "filter"
EQUALITY = ("$eq", "$ne")
RANGES = ("$gt", "$gte", "$lt", "$lte")
OPERATORS = (*EQUALITY, *RANGES, "$in", "$exists")
_MISSING = object()
MAX_NARROWING = 16  # values of an $in written as LIKE patterns; past it, the rows are matched here


@dataclass(frozen=True)
class Condition:
    """One field's test: ``op`` on the value at ``field`` (a key, or a dotted path)."""

    field: str
    op: str
    value: Any

    def holds(self, data: Data) -> bool:
        found = _at(data, self.field)
        if self.op == "$exists":
            return (found is not _MISSING) == self.value
        if self.op == "$ne":
            return found is _MISSING or not _equal(found, self.value)
        if found is _MISSING:
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

    def narrowing(self) -> list[list[str]]:
        """LIKE patterns on a row's stored data that every matching row satisfies (one of each
        group), so the catalog hands over fewer rows to match here; a superset, never the
        answer. Written only where the stored text must hold a piece of the filter: a string
        that equals (and reads as no time: an instant may be written in other ways), a key that
        exists. Numbers (1 = 1.0) and ranges narrow nothing."""
        groups: list[list[str]] = []
        for c in self.conditions:
            if c.op == "$exists" and c.value and "." not in c.field:
                groups.append([f"%{_escaped(compact({c.field: 0})[1:-2])}%"])
            elif c.op == "$eq" and _plain_text(c.value):
                groups.append([f"%{_escaped(compact([c.value])[1:-1])}%"])
            elif c.op == "$in" and c.value and len(c.value) <= MAX_NARROWING and all(map(_plain_text, c.value)):
                groups.append([f"%{_escaped(compact([v])[1:-1])}%" for v in c.value])
        return groups


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
    elif op in RANGES and not (_number(value) or _instant(value) is not None):
        raise InvalidInput(
            f"{where}: {op} compares numbers or ISO 8601 times with a timezone, got {json.dumps(value)[:80]}",
            field=FIELD,
        )
    return Condition(name, op, value)


def allowed_ids(rows: Iterable[tuple[str, str, str | None]], data_filter: DataFilter) -> dict[str, list[str]]:
    """Of catalog rows (partition, id, data column), the ids whose data matches, by partition."""
    allowed: dict[str, list[str]] = {}
    for partition, id_, column in rows:
        if data_filter.matches(loaded(column)):
            allowed.setdefault(partition, []).append(id_)
    return allowed


def _at(data: Data, field: str) -> Any:
    if field in data:
        return data[field]
    value: Any = data
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _plain_text(value: object) -> bool:
    return isinstance(value, str) and _instant(value) is None


def _escaped(text: str) -> str:
    """``text`` inside a LIKE pattern with ESCAPE '\\': its own wildcards taken literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _instant(value: object) -> datetime | None:
    """``value`` as an instant, when it is a string in ISO 8601 with a timezone."""
    if not isinstance(value, str) or len(value) < 16 or not value[:4].isdigit():
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None and moment.utcoffset() is not None else None


def _equal(found: object, wanted: object) -> bool:
    if _number(found) and _number(wanted):
        return found == wanted
    if isinstance(found, bool) or isinstance(wanted, bool):
        return type(found) is type(wanted) and found == wanted
    if isinstance(found, str) and isinstance(wanted, str):
        if found == wanted:
            return True
        a, b = _instant(found), _instant(wanted)
        return a is not None and b is not None and a == b
    return type(found) is type(wanted) and found == wanted


def _in_range(op: str, found: object, bound: object) -> bool:
    a: Any
    b: Any
    if _number(bound):
        if not _number(found):
            return False
        a, b = found, bound
    else:
        a, b = _instant(found), _instant(bound)
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
    partition's search may score (validity is the search's to apply, at the recall's time)."""
    rows = book.with_data(keys, also_none=data_filter.matches_none, like=data_filter.narrowing())
    return allowed_ids(rows, data_filter)


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
    how many valid ones the filter left out."""
    space_of = {partition_key(s): s for s in spaces}
    rows = book.newest_current(
        list(space_of), at, also_none=data_filter.matches_none, as_of=as_of, like=data_filter.narrowing()
    )
    hits: list[tuple[Hit, str | None]] = []
    left_out = 0
    for key, id_, column, created_at, valid_from, valid_until in rows:
        if not data_filter.matches(loaded(column)):
            left_out += 1
            continue
        if len(hits) == count:
            continue
        text = store.text(key, id_)
        if text is None:  # purged by a forget meanwhile: the catalog's check drops it too
            continue
        hits.append((Hit(id_, 0.0, text, created_at, valid_from, valid_until), space_of[key]))
    return hits, left_out
