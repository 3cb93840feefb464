"""A recall's delivery items, moved into the table indexed by memory in batches.

A memory's page lists the deliveries that included it, so ``delivery_items`` keeps an index by
memory id. Kept up item by item, that index was most of a recall's commit: each of a recall's
ten to twenty items lands on a random page of it, and SQLite writes every dirtied page whole at
each commit. So a recall's items go to ``recent_delivery_items`` first, whose indexes grow only
at their ends, and move into ``delivery_items`` here, many deliveries in one transaction: the
index's pages are dirtied once for many items, off the request's path.

Nothing reads either table alone: every read goes through the view ``all_delivery_items``
(both, ``UNION ALL``), so a delivery is whole and visible from its commit on, moved or not. A
move takes its rows with ``DELETE … RETURNING`` and writes them in the same transaction: two
processes moving at once never write a row twice (PostgreSQL's second ``DELETE`` waits on the
rows the first took, then finds them gone), and a recall still committing is left for the next.

Who moves: any process that records deliveries, in a thread of its own after every
``MOVE_EVERY`` of them (a server, ``esfis mcp``, a library), and the server's upkeep round
(``server.facade.upkeep``), which moves whatever is left however few.
"""

from __future__ import annotations

import json
import logging
import threading

from server.catalog import Catalog

__all__ = ["MOVE_EVERY", "MOVE_MOST", "DeliveryMoves"]

MOVE_EVERY = 256  # deliveries recorded by one process between its moves
MOVE_MOST = 1024  # deliveries moved by one transaction: the writer's lock is held for one batch

_log = logging.getLogger("esfis.deliveries")


class DeliveryMoves:
    """Moves ``recent_delivery_items`` into ``delivery_items`` (the module says why and when)."""

    def __init__(self, catalog: Catalog, *, every: int = MOVE_EVERY, most: int = MOVE_MOST) -> None:
        self.catalog = catalog
        self.every = every
        self.most = most
        self._recorded = 0
        self._lock = threading.Lock()
        self._moving = False

    def noted(self) -> None:
        """One delivery recorded by this process: every ``every``, the recent items move in a
        thread of their own (the recording transaction never waits for it)."""
        with self._lock:
            self._recorded += 1
            if self._recorded < self.every or self._moving:
                return
            self._recorded = 0
            self._moving = True
        threading.Thread(target=self._move_in_background, name="esfis-delivery-moves", daemon=True).start()

    def move_all(self) -> int:
        """Every recent delivery's items moved, a batch per transaction; how many items moved."""
        moved = 0
        while True:
            batch = self.move()
            moved += batch
            if batch == 0:
                return moved

    def move(self) -> int:
        """The oldest ``most`` recent deliveries' items moved, in one transaction; how many items.
        Not flushed to the disk first: a power cut takes the move back whole, never a row."""
        with self.catalog.transaction(durable=False) as tx:
            first = tx.one("SELECT min(delivery_id) AS first FROM recent_delivery_items")
            if first is None or first["first"] is None:
                return 0
            rows = tx.all(
                "DELETE FROM recent_delivery_items WHERE delivery_id < ? "
                "RETURNING delivery_id, memory_id, rank, score, outcome",
                (int(first["first"]) + self.most,),
            )
            if not rows:
                return 0
            ordered = sorted(
                (
                    [int(r["delivery_id"]), r["memory_id"], int(r["rank"]), float(r["score"]), r["outcome"]]
                    for r in rows
                ),
                key=lambda r: (r[0], r[2]),
            )
            item = tx.sql.item
            tx.execute(
                "INSERT INTO delivery_items (delivery_id, memory_id, rank, score, outcome) "
                f"SELECT {item(0, 'BIGINT')}, {item(1)}, {item(2, 'INTEGER')}, {item(3, 'DOUBLE PRECISION')}, "
                f"{item(4)} FROM {tx.sql.rows}",
                (json.dumps(ordered),),
            )
            return len(ordered)

    def _move_in_background(self) -> None:
        try:
            self.move_all()
        except Exception:  # a full disk, a catalog away: the items stay recent, read as before
            _log.warning("moving recent delivery items did not finish; the next move tries again", exc_info=True)
        finally:
            with self._lock:
                self._moving = False
