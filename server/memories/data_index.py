"""The catalog's index over memories' data (``memory_fields``), and recall's filter answered
through it (``server.memories.data_filter`` says what a filter means; this says how the catalog
finds it without reading every row that carries data).

One row per field a memory's data holds, as a filter's field names it: every path through its
objects, joined by dots, with the value ``at_path`` finds there (so a literal dotted key wins,
as in the filter). Each value is held in the one form a filter compares it in: a number (kind
``n``, ``num``), a boolean (``b``, ``num`` 0 or 1), null (``z``), a string (``s``, ``txt``), a
time with a timezone (``t``, ``instant``: microseconds since the epoch), an object or array
(``j``), or, where no column holds it exactly, ``x``: an integer a double cannot hold, a
string past ``TEXT_HELD`` characters, a time past the microseconds' range.

A condition is a set of ids the indexes give (``(partition, path, kind, num)``, ``(partition,
path, txt)``, ``(partition, path, instant)``, and the key for ``$exists``): equality and ``$in``
a union of index lookups, a range one index range, ``$ne`` and ``$exists: false`` the
partitions' memories less an indexed set; every condition must hold, so the sets intersect, in
one statement. Rows of kind ``j`` (for an equality with an object or array) and ``x`` are
*loose*: the index cannot say, so they are candidates, and ``DataFilter.matches`` decides them
in Python. That work is bounded by the rows holding such values at the filter's paths.

Written beside every memory in the transaction that writes it (``MemoryBook``), and removed
by a trigger when a forget clears a memory's data (``server.memories.forgetting``). A catalog
made before it is filled once from ``memories.data`` (``build_if_missing``). A server of an older
release left running over an upgraded home keeps writing as it knows how: one from before this
index writes no rows for its memories' data, one from before schema 16 writes rows without a
time. A server's upkeep mends both (``server.memories.data_mending``); meanwhile a filter
misses the first (``esfis check`` names them) and the no-query read leaves the second's terms
to the set (``server.memories.newest``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from server.catalog import Catalog, Dialect, Tx
from server.memories.data import MISSING, Data, at_path, instant, is_number, loaded

TEXT_HELD = 256  # characters of a string the index holds; a longer one is loose (kind x)
BUILT = "data_fields"  # the meta key set once memory_fields holds every memory's data
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_OPS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_WIDE = {">": ">=", "<": "<=", ">=": ">=", "<=": "<="}  # a loose bound: rounding may make it equal
_LOOSE_KINDS = "kind = 'x'"

Condition = tuple[str, str, Any]  # (field, op, value): a DataFilter's condition, as checked there
FieldRow = tuple[str, str, float | None, str | None, int | None]  # path, kind, num, txt, instant


def field_rows(data: Data) -> list[FieldRow]:
    """The index's rows for ``data``: a path's value where ``at_path`` finds one."""
    rows = []
    for path in dict.fromkeys(_paths(data, None)):
        value = at_path(data, path)
        if value is not MISSING:
            rows.append((path, *_held(value)))
    return rows


def _paths(value: Data, prefix: str | None) -> Iterator[str]:
    for key, inner in value.items():
        path = key if prefix is None else f"{prefix}.{key}"
        yield path
        if isinstance(inner, dict):
            yield from _paths(inner, path)


def _held(value: Any) -> tuple[str, float | None, str | None, int | None]:
    if isinstance(value, bool):
        return "b", float(value), None, None
    if value is None:
        return "z", None, None, None
    if isinstance(value, dict | list):
        return "j", None, None, None
    if is_number(value):
        exact = _double(value)
        return ("n", exact, None, None) if exact is not None else ("x", None, None, None)
    if isinstance(value, str):
        moment = instant(value)
        if moment is not None:
            micros = _micros(moment)
            return ("t", None, None, micros) if micros is not None else ("x", None, None, None)
        return ("s", None, value, None) if len(value) <= TEXT_HELD else ("x", None, None, None)
    return "x", None, None, None


def _double(value: float) -> float | None:
    """``value`` as a double when that is exact (a large integer may not be)."""
    try:
        held = float(value)
    except OverflowError:
        return None
    return held if held == value else None


def _micros(moment: datetime) -> int | None:
    try:
        return (moment - _EPOCH) // timedelta(microseconds=1)
    except OverflowError:
        return None


def write_fields(tx: Tx, memories: Iterable[tuple[str, str, int, str | None]]) -> None:
    """Index the data of ``memories`` (partition, id, created_at, data column), in one statement."""
    rows = [
        (partition, path, id_, kind, num, txt, micros, created_at)
        for partition, id_, created_at, column in memories
        if column is not None
        for path, kind, num, txt, micros in field_rows(loaded(column))
    ]
    if not rows:
        return
    item = tx.sql.item
    tx.execute(
        "INSERT INTO memory_fields (partition, path, memory_id, kind, num, txt, instant, created_at) "
        f"SELECT {item(0)}, {item(1)}, {item(2)}, {item(3)}, {item(4, 'DOUBLE PRECISION')}, {item(5)}, "
        f"{item(6, 'BIGINT')}, {item(7, 'BIGINT')} FROM {tx.sql.rows}",
        (orjson.dumps(rows).decode(),),
    )


def build_if_missing(catalog: Catalog, *, batch: int = 5000) -> int:
    """Fill memory_fields from memories.data, once per catalog (one made before the index, or
    restored from such a backup); how many memories it indexed."""
    if catalog.one("SELECT value FROM meta WHERE key = ?", (BUILT,)) is not None:
        return 0
    with catalog.transaction() as tx:
        if tx.one("SELECT value FROM meta WHERE key = ?", (BUILT,)) is not None:
            return 0  # another process built it meanwhile
        tx.execute("DELETE FROM memory_fields")
        rows = tx.all(
            "SELECT partition, id, created_at, data FROM memories WHERE data IS NOT NULL AND forgotten_at IS NULL"
        )
        for start in range(0, len(rows), batch):
            write_fields(tx, [(r[0], r[1], r[2], r[3]) for r in rows[start : start + batch]])
        tx.execute("INSERT INTO meta (key, value) VALUES (?, '1')", (BUILT,))
    return len(rows)


@dataclass(frozen=True)
class Term:
    """One indexed test on a row of memory_fields; ``loose``: a row it takes may still fail;
    ``single``: one value, whose rows its index holds in their memories' time order."""

    sql: str
    params: tuple[Any, ...]
    loose: bool = False
    single: bool = False


@dataclass(frozen=True)
class Compiled:
    """A condition as index terms: ``negated`` for ``$ne`` and ``$exists: false`` (the memories
    of the partitions less the rows the exact terms take)."""

    path: str
    terms: tuple[Term, ...]
    negated: bool

    @property
    def exact(self) -> list[Term]:
        return [t for t in self.terms if not t.loose]

    @property
    def loose(self) -> list[Term]:
        return [t for t in self.terms if t.loose]


def compiled(condition: Condition) -> Compiled:
    field, op, value = condition
    if op == "$exists":
        return Compiled(field, (Term("true", ()),), negated=not value)  # any row at the path
    x = Term(_LOOSE_KINDS, (), loose=True)
    if op in _OPS:
        return Compiled(field, (*_range(_OPS[op], value), x), negated=False)
    values = value if op == "$in" else [value]
    terms = [t for v in values for t in _equal(v)]
    return Compiled(field, (*terms, x), negated=op == "$ne")


def compiled_all(conditions: Sequence[Condition]) -> list[Compiled]:
    """Every condition compiled, the exact ranges on one field as one range (``$gte`` and
    ``$lt`` together read one stretch of the index, not two halves of it intersected)."""
    out: list[Compiled] = []
    ranges: dict[tuple[str, str], list[Term]] = {}
    for field, op, value in conditions:
        c = compiled((field, op, value))
        if op in _OPS and len(c.exact) == 1:
            column = c.exact[0].sql.split()[0]  # kind (a number) or instant
            ranges.setdefault((field, column), []).append(c.exact[0])
        else:
            out.append(c)
    for (field, _), terms in ranges.items():
        merged = Term(" AND ".join(t.sql for t in terms), tuple(p for t in terms for p in t.params))
        out.append(Compiled(field, (merged, Term(_LOOSE_KINDS, (), loose=True)), negated=False))
    return out


def _equal(value: Any) -> list[Term]:
    if isinstance(value, bool):
        return [Term("kind = 'b' AND num = ?", (float(value),), single=True)]
    if value is None:
        return [Term("kind = 'z'", ())]
    if isinstance(value, dict | list):
        return [Term("kind = 'j'", (), loose=True)]
    if is_number(value):
        exact = _double(value)
        if exact is not None:
            return [Term("kind = 'n' AND num = ?", (exact,), single=True)]
        return [Term("kind = 'n' AND num = ?", (_rounded(value),), loose=True)]
    if isinstance(value, str):
        moment = instant(value)
        if moment is not None:
            micros = _micros(moment)
            return (
                [Term("instant = ?", (micros,), single=True)]
                if micros is not None
                else [Term("kind = 't'", (), loose=True)]
            )
        return [Term("txt = ?", (value,), single=True)] if len(value) <= TEXT_HELD else []  # a longer one is kind x
    return []


def _range(op: str, bound: Any) -> list[Term]:
    if is_number(bound):
        exact = _double(bound)
        if exact is not None:
            return [Term(f"kind = 'n' AND num {op} ?", (exact,))]
        return [Term(f"kind = 'n' AND num {_WIDE[op]} ?", (_rounded(bound),), loose=True)]
    micros = _micros(instant(bound))  # type: ignore[arg-type]  # parse_filter took only these
    return [Term(f"instant {op} ?", (micros,))] if micros is not None else [Term("kind = 't'", (), loose=True)]


def _rounded(value: float) -> float:
    """The nearest double (rounding keeps order: a ≤ b gives rounded(a) ≤ rounded(b))."""
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def matching_sql(conditions: Sequence[Condition], sql: Dialect) -> tuple[str | None, list[Any], str, list[Any]]:
    """Two statements, each giving (partition, id) of memories of the partitions (a None
    parameter: ``keyed`` gives it the partitions' JSON array). The first (None when no memory
    can be in it): those whose data the exact terms match; the second: the loose rows of any
    condition, for ``DataFilter.matches`` to decide whole (a row of both: the second's say).
    The positive sets intersect; a negated one is taken out of that (or out of all the
    partitions' memories, when none is positive)."""
    keys = f"partition IN (SELECT value FROM {sql.values})"
    parts = compiled_all(conditions)
    positive = [c for c in parts if not c.negated]
    selects: list[str] = []
    params: list[Any] = []
    if not positive:
        selects.append(f"SELECT partition, id AS memory_id FROM memories WHERE {keys} AND forgotten_at IS NULL")
        params.append(None)
    for c in positive:
        select, more = _set(keys, c.path, c.exact)
        selects.append(select)
        params += more
    chain = " INTERSECT ".join(selects)
    excluded: list[str] = []
    for c in parts:
        if c.negated and c.exact:
            select, more = _set(keys, c.path, c.exact)
            excluded.append(f"memory_id NOT IN (SELECT memory_id FROM ({select}) AS out{len(excluded)})")
            params += more
    if excluded:  # NOT IN a set made once: EXCEPT sorted both sides, twice the cost at 100,000
        chain = f"SELECT partition, memory_id FROM ({chain}) AS kept WHERE {' AND '.join(excluded)}"
    loose = [_set(keys, c.path, c.loose) for c in parts if c.loose]
    loose_sql, loose_params = " UNION ".join(s for s, _ in loose), [p for _, more in loose for p in more]
    if any(not c.exact for c in positive):
        return None, [], loose_sql, loose_params  # a condition only loose rows can meet
    return chain, params, loose_sql, loose_params


def _set(keys: str, path: str, terms: Sequence[Term]) -> tuple[str, list[Any]]:
    """One condition's set: a lookup per term, so that each takes its own index (an OR of them
    made SQLite read every row at the path)."""
    if not terms:
        return "", []
    selects = [f"SELECT partition, memory_id FROM memory_fields WHERE {keys} AND path = ? AND {t.sql}" for t in terms]
    params = [p for t in terms for p in (None, path, *t.params)]
    if len(selects) == 1:
        return selects[0], params
    return f"SELECT partition, memory_id FROM ({' UNION '.join(selects)}) AS terms", params


def probes(conditions: Sequence[Condition]) -> tuple[str, list[Any]]:
    """The conditions as one test on a memory ``m`` (each an indexed probe by the key), for a
    walk of the newest memories: a superset, as ``matching_sql``'s."""
    clauses: list[str] = []
    params: list[Any] = []
    for c in compiled_all(conditions):
        terms = c.exact if c.negated else list(c.terms)
        if c.negated and not terms:
            continue
        test = " OR ".join(f"({t.sql})" for t in terms)
        clauses.append(
            f"{'NOT ' if c.negated else ''}EXISTS (SELECT 1 FROM memory_fields f WHERE f.partition = m.partition "
            f"AND f.path = ? AND f.memory_id = m.id AND ({test}))"
        )
        params += [c.path, *[p for t in terms for p in t.params]]
    return " AND ".join(clauses) or "1 = 1", params


def checking_sql(conditions: Sequence[Condition], sql: Dialect, key: str) -> tuple[str, list[Any]]:
    """One statement giving, of the ids its None parameter lists (a JSON array) in partition
    ``key``, those the exact terms take, each with its data where a loose row at a filter's path
    leaves the match to ``DataFilter.matches`` (else NULL: the index's answer is exact). Probes
    of the index by its key, a few per id, and no read of the memories themselves: for a
    search's candidates (rows of the partition, not forgotten), not for a set."""
    test, tested = probes(conditions)
    loose: list[str] = []
    params: list[Any] = []
    for c in compiled_all(conditions):
        if c.loose:
            either = " OR ".join(f"({t.sql})" for t in c.loose)
            loose.append(
                "EXISTS (SELECT 1 FROM memory_fields f WHERE f.partition = m.partition AND f.path = ? "
                f"AND f.memory_id = m.id AND ({either}))"
            )
            params += [c.path, *[p for t in c.loose for p in t.params]]
    data = f"CASE WHEN {' OR '.join(loose)} THEN (SELECT data FROM memories WHERE id = m.id) END" if loose else "NULL"
    statement = (
        f"SELECT m.id, {data} FROM (SELECT value AS id, CAST(? AS TEXT) AS partition FROM {sql.values}) AS m "
        f"WHERE {test}"
    )
    return statement, [*params, key, None, *tested]


def joined(chosen: str, sql: Dialect) -> str:
    """``chosen``'s ids as one comma-separated text per partition: a broad filter's tens of
    thousands of ids cross to Python as a few strings, not as a row each (half the cost of its
    read at 100,000 memories). Ids hold no comma (``server.memories.input``)."""
    return f"SELECT partition, {_aggregate(sql)} FROM ({chosen}) AS chosen GROUP BY partition"


def joined_capped(chosen: str, sql: Dialect) -> str:
    """``joined``'s text for one partition, of at most as many ids as its last parameter says
    (a set past its bound is not read whole: the caller learns it is larger, at that cost)."""
    return f"SELECT {_aggregate(sql)} FROM (SELECT memory_id FROM ({chosen}) AS chosen LIMIT ?) AS capped"


def _aggregate(sql: Dialect) -> str:
    return "group_concat(memory_id, ',')" if sql.values.startswith("json_each") else "string_agg(memory_id, ',')"


def keyed(params: list[Any], keys: list[str]) -> tuple[Any, ...]:
    """``params`` with each None (a partitions' placeholder) given the partitions' JSON array."""
    array = json.dumps(keys)
    return tuple(array if p is None else p for p in params)
