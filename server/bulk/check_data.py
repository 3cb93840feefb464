"""``esfis check``'s look at the catalog's index over memories' data (``server.memories.data_index``),
and its mend.

A recall's filter is answered through that index, so where it disagrees with a memory's data a
filter leaves out a memory it matches, or takes one it does not. The index agrees when each
memory's rows in ``memory_fields`` are exactly what its data gives (``field_rows``), a memory
with no data (or forgotten) has none, and no row names a memory the partition does not hold.

Safe beside running servers: a write puts a memory's data and its rows in one transaction, and a
forget's trigger takes the rows in the forget's; each chunk of a partition's memories is read
with its rows in one statement (one snapshot, where the two always agree unless something is
wrong), as are the rows that name no memory. A partition is read ``CHUNK`` memories at a time,
so a large one is never held whole. The mend reads each memory's data again inside the
transaction that indexes it again. A catalog whose index was never built
(one from before it; the next open builds it whole) is not looked at.
"""

from __future__ import annotations

import json
from collections import defaultdict

from server.catalog import Catalog
from server.memories.data import loaded
from server.memories.data_index import BUILT, FieldRow, field_rows, write_fields

CHUNK = 2000  # memories read in one statement: a partition of millions is never held whole

# A chunk of a partition's memories, oldest first by (created_at, rowid) from a key on, each row
# of theirs in the index beside the memory's data (NULL once forgotten): one statement, so one
# snapshot for each memory and its rows.
_CHUNK = (
    "SELECT m.id, m.created_at, m.row_at, CASE WHEN m.forgotten_at IS NULL THEN m.data END AS data, "
    "f.path, f.kind, f.num, f.txt, f.instant, f.created_at AS dated FROM ("
    "SELECT rowid AS row_at, id, partition, created_at, data, forgotten_at FROM memories "
    "WHERE partition = ? AND (created_at > ? OR (created_at = ? AND rowid > ?)) "
    "ORDER BY created_at, rowid LIMIT ?) AS m "
    "LEFT JOIN memory_fields f ON f.memory_id = m.id AND f.partition = m.partition"
)
# Index rows that name no memory of their partition.
_STRAYS = (
    "SELECT DISTINCT f.memory_id FROM memory_fields f WHERE f.partition = ? AND NOT EXISTS "
    "(SELECT 1 FROM memories m WHERE m.id = f.memory_id AND m.partition = f.partition)"
)


def misindexed(catalog: Catalog) -> dict[str, tuple[str, ...]]:
    """The memories whose index rows disagree with their data, by partition (ids sorted)."""
    if catalog.one("SELECT value FROM meta WHERE key = ?", (BUILT,)) is None:
        return {}
    keys = catalog.all(
        "SELECT DISTINCT partition FROM memory_fields UNION "
        "SELECT DISTINCT partition FROM memories WHERE data IS NOT NULL"
    )
    found: dict[str, tuple[str, ...]] = {}
    for (key,) in sorted(tuple(r) for r in keys):
        wrong = _misindexed_in(catalog, key, CHUNK) | {r[0] for r in catalog.all(_STRAYS, (key,))}
        if wrong:
            found[key] = tuple(sorted(wrong))
    return found


def _misindexed_in(catalog: Catalog, key: str, chunk: int) -> set[str]:
    wrong: set[str] = set()
    after: tuple[int, int] = (-1, -1)
    while True:
        data: dict[str, str | None] = {}
        held: dict[str, set[FieldRow]] = defaultdict(set)  # a memory has one row a path (the key)
        rows = catalog.all(_CHUNK, (key, after[0], after[0], after[1], chunk))
        for id_, created_at, row_at, column, path, kind, num, txt, instant, dated in rows:
            data[id_] = column
            after = max(after, (int(created_at), int(row_at)))
            if path is not None:
                held[id_].add((path, kind, None if num is None else float(num), txt, instant))
                if dated != created_at:  # a row out of its place in the newest-first order
                    wrong.add(id_)
        wrong.update(id_ for id_, column in data.items() if set(field_rows(loaded(column))) != held.get(id_, set()))
        if len(data) < chunk:
            return wrong


def reindex(catalog: Catalog, wrong: dict[str, tuple[str, ...]]) -> None:
    """Index again the data of the memories ``wrong`` names: their rows dropped, and their data's
    rows written, read in the same transaction (none for a memory gone, forgotten or without data)."""
    with catalog.transaction() as tx:
        for key, ids in wrong.items():
            listed = json.dumps(list(ids))
            tx.execute(
                f"DELETE FROM memory_fields WHERE partition = ? AND memory_id IN (SELECT value FROM {tx.sql.values})",
                (key, listed),
            )
            rows = tx.all(
                "SELECT partition, id, created_at, data FROM memories WHERE partition = ? "
                f"AND id IN (SELECT value FROM {tx.sql.values}) AND data IS NOT NULL AND forgotten_at IS NULL",
                (key, listed),
            )
            write_fields(tx, [(r[0], r[1], r[2], r[3]) for r in rows])
