"""The delivery log: every recall leaves ids, scores and reasons, never memory texts.

``explain`` builds an operator's ``--why`` at the moment it is asked and writes nothing.
"""

from __future__ import annotations

import builtins
import json
from datetime import datetime
from typing import Literal

import numpy as np

from indexing.partitions.store import VectorStore
from server.catalog import Catalog, Tx
from server.clock import from_micros, to_micros
from server.errors import DeliveryNotFound
from server.memories import MemoryBook
from server.memories.delivery_moves import DeliveryMoves
from server.models import Caller, Delivery, DeliveryItem, OtherSpaceMatch, Why, WhyItem
from server.spaces import contains, partition_key, space_of_key

WHY_NAMED = 5


class DeliveryLog:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.moves = DeliveryMoves(catalog)  # the items' way into the table indexed by memory

    def record(
        self,
        tx: Tx,
        caller: Caller,
        *,
        query: str,
        limit: int,
        at: datetime,
        searched: list[str | None],
        items: list[DeliveryItem],
        cut: dict[str, int],
    ) -> int:
        """Record one recall inside ``tx`` (the run's step goes in the same transaction)."""
        # all(), not one(): SQLite finishes an INSERT … RETURNING only once its rows are read.
        returned = tx.all(
            "INSERT INTO deliveries (at, ai, space, transport, run_id, query, limit_, reached, cut, token_scope) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                to_micros(at),
                caller.ai,
                caller.space,
                caller.transport,
                caller.run_id,
                query,
                limit,
                json.dumps([partition_key(s) for s in searched]),
                json.dumps(cut, sort_keys=True),
                caller.scope,
            ),
        )
        delivery_id = int(returned[0]["id"])
        if items:  # one statement whatever the number of items: the rows travel as one JSON array
            item = tx.sql.item
            tx.execute(  # not delivery_items: its index by memory is kept up in batches (delivery_moves)
                "INSERT INTO recent_delivery_items (delivery_id, memory_id, rank, score, outcome) "
                f"SELECT ?, {item(0)}, {item(1, 'INTEGER')}, {item(2, 'DOUBLE PRECISION')}, {item(3)} FROM {tx.sql.rows}",
                (delivery_id, json.dumps([[i.memory_id, int(i.rank), float(i.score), i.outcome] for i in items])),
            )
        self.moves.noted()
        return delivery_id

    def get(self, delivery_id: int) -> Delivery:
        row = self.catalog.one("SELECT * FROM deliveries WHERE id = ?", (delivery_id,))
        if row is None:
            raise DeliveryNotFound(f"no delivery {delivery_id}")
        items = self.catalog.all(
            "SELECT memory_id, rank, score, outcome FROM all_delivery_items WHERE delivery_id = ? ORDER BY rank",
            (delivery_id,),
        )
        return _delivery(row, tuple(DeliveryItem(i["memory_id"], i["rank"], i["score"], i["outcome"]) for i in items))

    def list(self, *, ai: str | None = None, space: str | None = None, last: int = 20) -> builtins.list[Delivery]:
        where, params = [], []
        if ai is not None:
            where.append("ai = ?")
            params.append(ai)
        if space is not None:
            where.append("space = ?")
            params.append(space)
        sql = "SELECT * FROM deliveries"
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self.catalog.all(sql + " ORDER BY id DESC LIMIT ?", (*params, last))
        return [self.get(r["id"]) for r in reversed(rows)]

    def page(
        self,
        *,
        ai: str | None = None,
        space: str | None = None,
        run: str | None = None,
        offset: int = 0,
        limit: int = 25,
    ) -> tuple[builtins.list[Delivery], int]:
        """Newest first: ``limit`` deliveries after ``offset``, and how many match in all."""
        where, params = [], []
        for column, value in (("ai", ai), ("space", space), ("run_id", run)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        clause = " WHERE " + " AND ".join(where) if where else ""
        total = self.catalog.one("SELECT count(*) AS n FROM deliveries" + clause, tuple(params))
        rows = self.catalog.all(
            f"SELECT id FROM deliveries{clause} ORDER BY id DESC LIMIT ? OFFSET ?", (*params, limit, offset)
        )
        return [self.get(r["id"]) for r in rows], int(total["n"]) if total else 0


def explain(
    delivery: Delivery,
    *,
    book: MemoryBook,
    store: VectorStore,
    all_spaces: builtins.list[str],
    query_vector: np.ndarray,
    now: datetime,
) -> Why:
    """What went in, what was cut, and which memories of other spaces would have answered.

    The other spaces are scored now against the stored query, for the operator's eyes only. A
    memory "would have answered" when it scores at least as well as the last one delivered (or
    at all, when fewer than ``limit`` went out).
    """
    items = []
    for item in delivery.items:
        memory = book.load(item.memory_id)
        items.append(WhyItem(item, memory.space if memory else None, memory.text if memory else None))
    delivered = [i.item.score for i in items if i.item.outcome == "delivered"]
    bar = min(delivered) if len(delivered) >= delivery.limit else -np.inf
    searched = set(delivery.searched)
    others: builtins.list[OtherSpaceMatch] = []
    micros = to_micros(now)
    written = set(store.partitions())  # one listing, not a check per space (on S3, each is one)
    for space in [None, *all_spaces]:
        key = partition_key(space)
        if space in searched or key not in written:
            continue
        in_reach = (space is None and delivery.scope is None) or (
            space is not None
            and delivery.space is not None
            and contains(delivery.space, space)
            and (delivery.scope is None or contains(delivery.scope, space))
        )
        reason: Literal["policy", "space"] = "policy" if in_reach else "space"
        for hit in store.search(key, query_vector, delivery.limit, now=micros).hits:
            if hit.score >= bar and book.current_ids([hit.id], now):
                others.append(OtherSpaceMatch(hit.id, space, round(hit.score, 6), hit.text, reason))
    others.sort(key=lambda m: m.score, reverse=True)
    return Why(delivery, tuple(items), tuple(others[:WHY_NAMED]), max(len(others) - WHY_NAMED, 0))


def _delivery(row, items: tuple[DeliveryItem, ...]) -> Delivery:
    return Delivery(
        id=row["id"],
        at=from_micros(row["at"]),
        ai=row["ai"],
        space=row["space"],
        transport=row["transport"],
        run_id=row["run_id"],
        query=row["query"],
        limit=row["limit_"],
        searched=tuple(space_of_key(k) for k in json.loads(row["reached"])),
        cut=json.loads(row["cut"]),
        items=items,
        scope=row["token_scope"],
    )
