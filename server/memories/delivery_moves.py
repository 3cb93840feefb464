"""A recall's delivery items, moved into the table indexed by memory in batches.

A memory's page lists the deliveries that included it, so ``delivery_items`` keeps an index by
memory id. Kept up item by item, that index was most of a recall's commit: each of a recall's
ten to twenty items lands on a random page of it, and SQLite writes every dirtied page whole at
each commit. So a recall's items go to ``recent_delivery_items`` first, whose indexes grow only
at their ends, and move into ``delivery_items`` here, many deliveries in one transaction: the
index's pages are dirtied once for many items, off the request's path.

Nothing reads either table alone: every read goes through the view ``all_delivery_items``
(both, ``UNION ALL``), so a delivery is whole and visible from its commit on, moved or not. A
move copies a batch and deletes it in one transaction, which holds the catalog's one write lock
as every write does: two processes moving at once take turns (the second finds the rows gone),
and a recall commits before or after a move, never between its two statements.

Who moves: any process that records deliveries, in a thread of its own after every
``MOVE_EVERY`` of them (a server, ``esfis mcp``, a library), and the server's upkeep round
(``server.facade.upkeep``), which moves whatever is left however few.
"""

from __future__ import annotations

import logging
import threading

from server.catalog import Catalog
from server.faults import said

__all__ = ["MOVE_EVERY", "MOVE_MOST", "DeliveryMoves"]

MOVE_EVERY = 64  # deliveries recorded by one process between its moves: a short hold of the lock
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
        In SQL alone, so the writer's lock is held for the rows' copy and nothing else. Not
        flushed to the disk first: a power cut takes the move back whole, never a row."""
        with self.catalog.transaction(durable=False) as tx:
            first = tx.one("SELECT min(delivery_id) AS first FROM recent_delivery_items")
            if first is None or first["first"] is None:
                return 0
            bound = int(first["first"]) + self.most
            # Every write transaction holds the catalog's one write lock (SQLite's, PostgreSQL's
            # advisory lock), so no recall commits between the copy and the delete.
            moved = tx.execute(
                "INSERT INTO delivery_items (delivery_id, memory_id, rank, score, outcome) "
                "SELECT delivery_id, memory_id, rank, score, outcome FROM recent_delivery_items "
                "WHERE delivery_id < ? ORDER BY delivery_id, rank",
                (bound,),
            ).rowcount
            tx.execute("DELETE FROM recent_delivery_items WHERE delivery_id < ?", (bound,))
            return int(moved)

    def _move_in_background(self) -> None:
        try:
            self.move_all()
        except Exception as exc:  # a full disk, a catalog away: the items stay recent, read as before
            said(_log, "moving recent delivery items did not finish; the next move tries again", exc)
        finally:
            with self._lock:
                self._moving = False
