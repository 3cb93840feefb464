"""Mending the index over data (``server.memories.data_index``) after the writes of a server of
an older release, left running over a home this release has upgraded (an agent's ``esfis mcp``
started before the upgrade): it cannot know the schema moved and writes as it knew how. One from
before the index writes no rows for its memories' data, so a filter misses them; one from before
schema 16 writes rows without their memory's time, so the no-query read falls back to the set.
A server's upkeep runs both (``server.facade.upkeep``); ``esfis check --repair`` mends the same
at once. Each finds its rows outside any write transaction (a scan of the table), then writes a
batch a transaction.
"""

from __future__ import annotations

import json

from server.catalog import Catalog
from server.catalog.shared import FIELDS_DATED
from server.memories.data_index import write_fields

MEND_BATCH = 5000  # memories mended a transaction: the write lock is never held for long


def date_undated(catalog: Catalog, *, batch: int | None = None) -> int:
    """Give each index row written without its memory's time (by a server of a release before
    schema 16, still running over an upgraded home) that time; how many rows it dated. The rows
    are found outside any write transaction (a scan of the table), then dated a batch at a time."""
    batch = batch or MEND_BATCH
    dated = 0
    while True:
        ids = [
            r[0]
            for r in catalog.all(
                "SELECT DISTINCT f.memory_id FROM memory_fields f JOIN memories m ON m.id = f.memory_id "
                "WHERE f.created_at IS NULL LIMIT ?",
                (batch,),
            )
        ]
        if not ids:
            return dated
        with catalog.transaction() as tx:
            dated += tx.execute(
                f"{FIELDS_DATED} AND memory_id IN (SELECT value FROM {tx.sql.values})", (json.dumps(ids),)
            ).rowcount
        if len(ids) < batch:
            return dated


_UNINDEXED = (
    "data IS NOT NULL AND forgotten_at IS NULL "  # data is NULL for none: any other has a row
    "AND NOT EXISTS (SELECT 1 FROM memory_fields f WHERE f.memory_id = memories.id)"
)


def index_unindexed(catalog: Catalog, *, batch: int | None = None) -> int:
    """Index the data of each memory that carries data and has no row in the index (written by a
    server of a release before the index, still running over an upgraded home); how many. Found
    outside any write transaction, in id order, then written a batch a transaction, each memory
    read again inside it (a newer writer may have indexed it meanwhile)."""
    batch = batch or MEND_BATCH
    indexed, after = 0, ""
    while True:
        ids = [
            r[0]
            for r in catalog.all(
                f"SELECT id FROM memories WHERE id > ? AND {_UNINDEXED} ORDER BY id LIMIT ?", (after, batch)
            )
        ]
        if not ids:
            return indexed
        after = ids[-1]
        with catalog.transaction() as tx:
            rows = tx.all(
                "SELECT partition, id, created_at, data FROM memories "
                f"WHERE id IN (SELECT value FROM {tx.sql.values}) AND {_UNINDEXED}",
                (json.dumps(ids),),
            )
            write_fields(tx, [(r[0], r[1], r[2], r[3]) for r in rows])
        indexed += len(rows)
        if len(ids) < batch:
            return indexed
