"""Keeping the trail bounded: runs that are over are pruned after the service's ``trail_days``
(``Settings.trail_days``, ``ESFIS_TRAIL_DAYS`` at the interfaces; ``TRAIL_DAYS`` by default).

What is over, at a cutoff of N days ago:
- a run ended (by an operator, or by this upkeep) before the cutoff;
- a run token's run that expired before the cutoff;
- a CLI command's own run (kind ``once``) opened before the cutoff.

First, a session run (an MCP process, a CLI ``--run``) with no step since the cutoff is *ended*
here, never pruned alive: a step it took later would be refused, so that no run ever comes
back carrying less than it carried (an idle MCP server cannot shed what it read by waiting).

Kept: a run over whose steps name a grant or an approval, while a memory it wrote still exists
(not forgotten): the trail must still explain why that memory lies where it does. Runs still
going keep their row and what they carry; only their steps older than the cutoff go, except
writes and the steps that name a grant or an approval. Run tokens whose run is pruned go with
it, as do signed-out web sessions past their expiry.

The other records an agent's calls leave go at the same age (``prune_records``), so that no
table an agent token adds rows to grows without end: deliveries (and their items) recorded
before the cutoff, context references made before it, and held calls decided before it whose
run is gone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from server.catalog import Catalog, Tx
from server.clock import to_micros
from server.errors import InvalidInput
from server.settings import TRAIL_DAYS

BATCH = 500  # runs per transaction: the catalog's write lock is never held for long
_VOUCHED = "(grant_id IS NOT NULL OR kind IN ('approval_requested', 'approved', 'declined'))"


@dataclass(frozen=True)
class Pruned:
    ended: int  # idle sessions ended
    runs: int
    steps: int
    tokens: int
    records: int = 0  # deliveries, context references and decided held calls (``prune_records``)


def prune_trail(catalog: Catalog, now: datetime, *, days: int = TRAIL_DAYS) -> Pruned:
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 36_500:
        raise InvalidInput("the trail's age must be a whole number of days from 1 to 36500", field="days")
    cutoff = to_micros(now - timedelta(days=days))
    at = to_micros(now)
    with catalog.transaction() as tx:
        ended = tx.execute(
            "UPDATE runs SET ended_at = ?, ended_by = 'upkeep' WHERE kind = 'session' AND ended_at IS NULL "
            "AND opened_at < ? AND NOT EXISTS (SELECT 1 FROM run_steps s WHERE s.run = runs.id AND s.at >= ?)",
            (at, cutoff, cutoff),
        ).rowcount
    runs = steps = 0
    after = ""  # run ids in order, a batch at a time
    while True:
        with catalog.transaction() as tx:
            over = [
                r["id"]
                for r in tx.all(
                    "SELECT id FROM runs WHERE id > ? AND (ended_at < ? OR expires_at < ? OR (kind = 'once' AND opened_at < ?)) "
                    "ORDER BY id LIMIT ?",
                    (after, cutoff, cutoff, cutoff, BATCH),
                )
            ]
            if not over:
                break
            after = over[-1]
            kept = _kept(tx, over)
            gone = json.dumps([r for r in over if r not in kept])
            steps += tx.execute(
                f"DELETE FROM run_steps WHERE run IN (SELECT value FROM {tx.sql.values})", (gone,)
            ).rowcount
            tx.execute(f"DELETE FROM run_labels WHERE run IN (SELECT value FROM {tx.sql.values})", (gone,))
            runs += tx.execute(f"DELETE FROM runs WHERE id IN (SELECT value FROM {tx.sql.values})", (gone,)).rowcount
        if len(over) < BATCH:
            break
    with catalog.transaction() as tx:
        steps += tx.execute(
            f"DELETE FROM run_steps WHERE at < ? AND kind <> 'write' AND NOT {_VOUCHED} "
            "AND run IN (SELECT id FROM runs WHERE ended_at IS NULL)",
            (cutoff,),
        ).rowcount
        tokens = tx.execute(
            "DELETE FROM tokens WHERE run_id IS NOT NULL AND (expires_at < ? OR revoked_at < ?) "
            "AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = tokens.run_id)",
            (cutoff, cutoff),
        ).rowcount
        tx.execute("DELETE FROM ended_sessions WHERE expires < ?", (int(now.timestamp()),))
    return Pruned(ended, runs, steps, tokens, prune_records(catalog, cutoff))


def prune_records(catalog: Catalog, cutoff: int) -> int:
    """Deliveries recorded before ``cutoff`` (microseconds) with their items, a batch of ids at
    a time; context references made before it; held calls decided before it whose run is gone
    (their texts went at the decision). Returns how many rows went, items not counted."""
    gone = 0
    while True:
        with catalog.transaction() as tx:
            ids = [
                r["id"] for r in tx.all("SELECT id FROM deliveries WHERE at < ? ORDER BY id LIMIT ?", (cutoff, BATCH))
            ]
            if not ids:
                break
            batch = json.dumps(ids)
            for items in ("delivery_items", "recent_delivery_items"):  # moved or not yet (delivery_moves)
                tx.execute(
                    f"DELETE FROM {items} WHERE delivery_id IN (SELECT CAST(value AS BIGINT) FROM {tx.sql.values})",
                    (batch,),
                )
            gone += tx.execute(
                f"DELETE FROM deliveries WHERE id IN (SELECT CAST(value AS BIGINT) FROM {tx.sql.values})", (batch,)
            ).rowcount
        if len(ids) < BATCH:
            break
    with catalog.transaction() as tx:
        gone += tx.execute("DELETE FROM contexts WHERE created_at < ?", (cutoff,)).rowcount
        gone += tx.execute(
            "DELETE FROM approvals WHERE status <> 'pending' AND decided_at < ? "
            "AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = approvals.run_id)",
            (cutoff,),
        ).rowcount
    return gone


def _kept(tx: Tx, runs: list[str]) -> set[str]:
    """Of ``runs``, those whose trail must stay: a step names a grant or an approval, and a
    memory the run wrote still exists."""
    ids = json.dumps(runs)
    vouched = [
        r["run"]
        for r in tx.all(
            f"SELECT DISTINCT run FROM run_steps WHERE run IN (SELECT value FROM {tx.sql.values}) AND {_VOUCHED}",
            (ids,),
        )
    ]
    if not vouched:
        return set()
    rows = tx.all(
        f"SELECT DISTINCT run_id FROM memories WHERE run_id IN (SELECT value FROM {tx.sql.values}) "
        "AND forgotten_at IS NULL",
        (json.dumps(vouched),),
    )
    return {r["run_id"] for r in rows}
