"""Forgetting for good: a memory's text and vector leave its partition, and its id stays in the
catalog, known as forgotten (an id once used never names another memory).

A forget is crash-safe by an intent the catalog keeps (``forget``); whoever finds one finishes
it (``finish_forgets``): the forget itself, the next service to open, or the next forget once
the intent is ``STALE_FORGET`` old. ``drop_space`` forgets a whole space's partition at once;
``forget_where`` forgets what a selection holds (the operator's forget by filter).
``MemoryBook`` (``server.memories``) is the door to these, as to every other statement on the
memories table.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from indexing import failpoints
from indexing.partitions.store import VectorStore
from server.catalog import Catalog, Tx
from server.clock import to_micros
from server.memories.data import stored
from server.memories.data_index import field_rows
from server.memories.listing import Selection
from server.models import Memory
from server.spaces import partition_key

log = logging.getLogger("esfis.store")

STALE_FORGET = timedelta(minutes=1)  # a forget's intent this old belongs to a dead process


def forget(
    catalog: Catalog, store: VectorStore, memory: Memory, at: datetime, *, also: Callable[[Tx], None] | None = None
) -> None:
    """Remove the text and vector for good; keep the id, known as forgotten. ``also`` runs
    in the catalog's transaction.

    Crash-safe in three steps. (1) One transaction marks the memory forgotten (its digest,
    key and labels cleared, the counts moved) and records the intent (``forgetting``): from
    that commit on, nothing reads it as current. (2) The text and vector are purged from
    the partition. (3) The catalog is scrubbed (``Catalog.scrub``), so neither the WAL nor a
    page keeps the row as it was, and the intent is removed. A process killed after (1) leaves the intent:
    the next service to open finishes it (``finish_forgets``), as does the next forget once
    it is ``STALE_FORGET`` old (a live forget finishes its own in well under that).
    """
    key = partition_key(memory.space)
    with catalog.transaction() as tx:
        if also is not None:
            also(tx)
        row = tx.one("SELECT forgotten_at, superseded_by FROM memories WHERE id = ?", (memory.id,))
        if row is None:
            return
        if row["forgotten_at"] is None:
            tx.execute(
                "UPDATE memories SET forgotten_at = ?, digest = NULL, key = NULL, labels = '[]', "
                "from_spaces = '[]', data = NULL WHERE id = ?",
                (to_micros(at), memory.id),
            )
            tx.execute("DELETE FROM import_keys WHERE memory_id = ?", (memory.id,))
            tx.execute(
                "UPDATE partitions SET live = live - 1, superseded = superseded - ? WHERE key = ?",
                (1 if row["superseded_by"] is not None else 0, key),
            )
            tx.execute(
                "INSERT INTO forgetting (memory_id, partition, since) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (memory.id, key, time.time_ns() // 1000),
            )
        elif tx.one("SELECT 1 FROM forgetting WHERE memory_id = ?", (memory.id,)) is None:
            return  # forgotten and finished already (a forget beside this one)
        # else: another forget of it is under way; finish it here too, so that this one
        # also returns only once the text is gone.
    failpoints.hit("forget:after-intent")
    finish_forgets(catalog, store, only=[memory.id], stale=STALE_FORGET, cleared=cleared_by(memory))


def cleared_by(memory: Memory) -> list[bytes]:
    """What a forget of ``memory`` clears that a page of the catalog may still hold a copy of
    (``Catalog.scrub``): its digest (the row's, the index's first 16 digits, a reference's),
    its key, its text (a held write's, approved into it), its data as stored, and the paths and
    strings of its data's index (``server.memories.data_index``: a dotted path is in no stored form)."""
    values = [memory.digest.removeprefix("sha256:")] if memory.digest else []
    values += [v for v in (memory.key, memory.text, stored(memory.data)) if v]
    values += [v for path, _, _, txt, _ in field_rows(memory.data) for v in (path, txt) if v]
    return [v.encode() for v in values]


def finish_forgets(
    catalog: Catalog,
    store: VectorStore,
    *,
    only: list[str] | None = None,
    stale: timedelta | None = None,
    cleared: list[bytes] | None = None,
) -> int:
    """Finish forgets under way: purge their texts, scrub the catalog, remove their intents.
    With ``only``, those memories', plus, with ``stale``, any older than that (a dead
    process's); with neither, all. ``cleared``: what the forgets of ``only`` cleared; for any
    other, it is not known, and the scrub rebuilds the catalog whole. Returns how many were
    finished (fewer, when the scrub could not complete: they stay, for the next). Purging
    twice is harmless, so a forget that another process is finishing meanwhile is safe to
    finish here too."""
    rows = catalog.all("SELECT memory_id, partition, since FROM forgetting")
    if only is not None:
        wanted = set(only)
        horizon = None if stale is None else time.time_ns() // 1000 - int(stale.total_seconds() * 1e6)
        rows = [r for r in rows if r["memory_id"] in wanted or (horizon is not None and r["since"] < horizon)]
    if not rows:
        return 0
    by_partition: dict[str, list[str]] = {}
    for r in rows:
        by_partition.setdefault(r["partition"], []).append(r["memory_id"])
    for key, ids in by_partition.items():
        store.purge(key, ids)
    failpoints.hit("forget:after-purge")
    known = cleared is not None and only is not None and {r["memory_id"] for r in rows} <= set(only)
    if not catalog.scrub(cleared if known else None):
        log.warning("catalog busy: %d forget(s) finish on a later forget or open", len(rows))
        return 0
    failpoints.hit("forget:after-checkpoint")
    ids = [r["memory_id"] for r in rows]
    with catalog.transaction() as tx:
        tx.execute(f"DELETE FROM forgetting WHERE memory_id IN (SELECT value FROM {tx.sql.values})", (json.dumps(ids),))
    return len(ids)


def drop_space(catalog: Catalog, store: VectorStore, space: str, at: datetime) -> int:
    """Purge a space's partition; its ids stay known as forgotten."""
    key = partition_key(space)
    store.drop(key)
    with catalog.transaction() as tx:
        removed = tx.execute(
            "UPDATE memories SET forgotten_at = ?, digest = NULL, key = NULL, labels = '[]', from_spaces = '[]', "
            "data = NULL WHERE partition = ? AND forgotten_at IS NULL",
            (to_micros(at), key),
        ).rowcount
        tx.execute("DELETE FROM import_keys WHERE partition = ?", (key,))
        tx.execute("DELETE FROM partitions WHERE key = ?", (key,))
    if removed:
        catalog.scrub(None)  # every digest of the space: the rebuild is cheaper than looking
    return removed


FORGET_BATCH = 2000  # memories a forget by filter marks in one transaction: other writers pass between


def forget_where(catalog: Catalog, store: VectorStore, selection: Selection, at: datetime) -> int:
    """Forget for good every memory ``selection`` holds at ``at``; how many.

    In bounded steps: each transaction marks at most ``FORGET_BATCH`` of them forgotten and
    records an intent for each, chosen by the selection's own conditions (the ids of a step are
    read in its own transaction, under the write lock, and every statement still says the
    selection's conditions: nothing outside it is touched). Other writers take their turn between
    steps, so a forget over a million memories never holds the catalog for its whole length. From
    a step's commit on, nothing reads its memories as current. Then the texts are purged,
    partition by partition, and the catalog scrubbed, as ``finish_forgets`` does for any forget.
    A process stopped half way leaves intents, which the next service to open finishes
    (``recover``), and memories not yet marked, which the same forget run again marks: it is
    resumable, and the confirmed forget completes either way."""
    now = to_micros(at)
    where, params = selection.clauses(catalog, now)
    chosen = " AND ".join(where)
    since = time.time_ns() // 1000
    forgotten = 0
    for key in selection.partitions:
        while True:
            with catalog.transaction() as tx:
                marked = _mark_step(tx, key, chosen, params, now=now, since=since)
                if marked:
                    _scrub_references(tx)
            forgotten += marked
            failpoints.hit("forget-where:after-step")
            if marked < FORGET_BATCH:
                break
    failpoints.hit("forget-where:after-intents")
    if forgotten:
        finish_forgets(catalog, store)  # their digests are not known here: the scrub rebuilds whole
    return forgotten


def _mark_step(tx: Tx, key: str, chosen: str, params: list, *, now: int, since: int) -> int:
    """One step of ``forget_where`` in partition ``key``: up to ``FORGET_BATCH`` of the
    selection's memories marked forgotten, with their intents and counts; how many."""
    rows = tx.all(
        f"SELECT id, superseded_by FROM memories WHERE partition = ? AND {chosen} ORDER BY id LIMIT ?",
        (key, *params, FORGET_BATCH),
    )
    if not rows:
        return 0
    ids = json.dumps([r["id"] for r in rows])
    step = f"id IN (SELECT value FROM {tx.sql.values}) AND partition = ? AND {chosen}"
    tx.execute(
        f"INSERT INTO forgetting (memory_id, partition, since) SELECT id, partition, ? FROM memories WHERE {step} "
        "ON CONFLICT DO NOTHING",
        (since, ids, key, *params),
    )
    tx.execute(
        f"DELETE FROM import_keys WHERE memory_id IN (SELECT id FROM memories WHERE {step})", (ids, key, *params)
    )
    tx.execute(
        "UPDATE memories SET forgotten_at = ?, digest = NULL, key = NULL, labels = '[]', from_spaces = '[]', "
        f"data = NULL WHERE {step}",
        (now, ids, key, *params),
    )
    superseded = sum(1 for r in rows if r["superseded_by"] is not None)
    tx.execute(
        "UPDATE partitions SET live = live - ?, superseded = superseded - ? WHERE key = ?",
        (len(rows), superseded, key),
    )
    return len(rows)


def _scrub_references(tx: Tx) -> None:
    """References that name a memory being forgotten keep its place, not its digest (as
    ``server.barrier.contexts.Contexts.scrub`` does for one)."""
    rows = tx.all("SELECT ref, items FROM contexts")
    named = {item["id"] for r in rows for item in json.loads(r["items"])}
    if not named:
        return
    going = {
        r["memory_id"]
        for r in tx.all(
            f"SELECT memory_id FROM forgetting WHERE memory_id IN (SELECT value FROM {tx.sql.values})",
            (json.dumps(sorted(named)),),
        )
    }
    for r in rows:
        items = json.loads(r["items"])
        if any(item["id"] in going for item in items):
            for item in items:
                if item["id"] in going:
                    item["labels"]["digest"] = None
            tx.execute("UPDATE contexts SET items = ? WHERE ref = ?", (json.dumps(items), r["ref"]))
