"""``esfis check --repair``: what a look found (``server.bulk.check_look``), mended by the code
paths that already mend each thing, and nothing mended that cannot be.

- **Lost memories** are forgotten through the forget machinery (``MemoryBook.forget``: marked
  forgotten with their digest, key, labels and data cleared, the counts moved, references
  scrubbed as the operator's forget does). Their texts and vectors are gone, so no repair can
  bring them back; forgotten, they are never served (``get`` answers not found, recall and
  export never had a row to give), and a later import of the same text is not taken for a copy
  of a memory that has none. The check names their ids for a restore from a backup.
- **Orphans** are purged by sweep's own purge (``server.bulk.journal.purge_orphans``), which
  asks the catalog once more just before; only rows older than the look's age bound were
  named, so no write in flight loses its vectors.
- **Forgotten texts** still in a partition are purged (``VectorStore.purge``: a second purge is
  harmless).
- **What a killed write left** is settled by the store's own writer: any purge takes the
  partition's write lock and settles a fold first, a killed promotion, cuts a tail's cut end
  off and removes temporary files. Where no purge of real rows runs, one of an id no memory can
  have does (``settle_id``).
- **Images** that cannot be opened are removed before anything else (a purge maps the image);
  those and images that hold rows gone are built again from the table, under the partition's
  write lock, as every build is. Images of partitions that are gone are removed
  (``VectorStore.remove_stale_images``).
- **Journals of dead processes** are swept (``server.bulk.journal.sweep``), and **forgets a
  dead process left** finished (``MemoryBook.finish_forgets``).
- **Counts** are recounted from the catalog's rows, each in a transaction that first holds the
  count's row: a write that commits meanwhile adds its own after, never onto a stale count.
- **An unreadable partition** is left exactly as it is.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Protocol

from indexing.partitions.store import VectorStore
from server.barrier.contexts import ContextBook
from server.bulk.check_data import reindex
from server.bulk.check_look import READ_ERRORS, TOTALS, CountDrift, Damage, PartitionDamage, said
from server.bulk.journal import batch_lock, purge_orphans, sweep
from server.catalog import Catalog, Tx
from server.clock import Clock
from server.memories import MemoryBook
from server.memories.forgetting import STALE_FORGET
from server.memories.journal import JOURNALS

log = logging.getLogger("esfis")


class CheckedParts(Protocol):
    """What a check reads and mends: the façade's ``Parts`` are one, and so is what
    ``server.facade.opening.open_and_check`` opens without the model (``HomeParts``)."""

    @property
    def home(self) -> Path: ...
    @property
    def catalog(self) -> Catalog: ...
    @property
    def store(self) -> VectorStore: ...
    @property
    def memories(self) -> MemoryBook: ...
    @property
    def contexts(self) -> ContextBook: ...
    @property
    def clock(self) -> Clock: ...


def settle_id() -> str:
    """An id no memory has: a purge of it changes no row, and its writer settles what a killed
    write left."""
    return f"esfis-check-settle-{secrets.token_hex(8)}"


def mend(parts: CheckedParts, damage: Damage) -> None:
    """Mend what ``damage`` found that can be mended. A step that fails (a disk that cannot
    take the rewrite, a file that fails to read) is logged and left: the look after the repair
    says what is still wrong."""
    store, catalog = parts.store, parts.catalog
    if damage.journals:
        folder = parts.home / JOURNALS
        _trying("the sweep of dead processes' journals", lambda: _sweep(folder, catalog, store))
    if damage.forgets:
        _trying(
            "finishing the forgets dead processes left",
            lambda: parts.memories.finish_forgets(only=[], stale=STALE_FORGET),
        )
    for partition in damage.partitions:
        if partition.unreadable is None:
            _trying(f"the repair of partition {partition.key}", partial(_mend_partition, parts, partition))
    if damage.stale_images:
        _trying("removing images of partitions gone", store.remove_stale_images)
    if damage.misindexed:
        _trying("indexing memories' data again", partial(reindex, catalog, dict(damage.misindexed)))
    if damage.counts:
        drifted = [drift for drift in damage.counts if drift.key != TOTALS]
        _trying("the recount", partial(recount, catalog, drifted))
        _trying("the recount of the total", partial(recount_total, catalog))


def _trying(step: str, action: Callable[[], object]) -> None:
    try:
        action()
    except READ_ERRORS as exc:
        log.warning("esfis check --repair: %s did not finish (%s)", step, said(exc))


def _sweep(folder: Path, catalog: Catalog, store: VectorStore) -> None:
    with batch_lock(folder):
        sweep(folder, catalog, store)


def _mend_partition(parts: CheckedParts, damage: PartitionDamage) -> None:
    key, store = damage.key, parts.store
    if damage.image_broken is not None:
        _remove_image(store, key)  # before any purge: a purge of the table maps the image
    purged = False  # whether a purge ran, whose writer settled what a killed write left
    # On S3 a purge of a partition with no table at all fails (``purging._purge_small`` asks for
    # a small file, which a remote store never has): such a partition's lost memories are left,
    # and said to be, rather than forgotten half-way with an intent no open could finish.
    forgettable = store.exists(key) or not store.location.remote
    for id_ in damage.lost if forgettable else ():
        memory = parts.memories.meta(id_)
        if memory is not None and not memory.forgotten:
            parts.memories.forget(memory, parts.clock(), also=_scrubbing(parts.contexts, id_))
            purged = True
    if damage.orphans:
        purged = purge_orphans({key: list(damage.orphans)}, parts.catalog, store) > 0 or purged
    if damage.forgotten:
        store.purge(key, list(damage.forgotten))
        purged = True
    if damage.leftovers and not purged:
        store.purge(key, [settle_id()])
    if damage.image_broken is not None or damage.image_gone:
        rebuild_image(store, key)


def _scrubbing(contexts: ContextBook, id_: str) -> Callable[[Tx], None]:
    def scrub(tx: Tx) -> None:
        contexts.scrub(tx, id_)  # references keep its place, not its digest (as the operator's forget)

    return scrub


def _remove_image(store: VectorStore, key: str) -> None:
    with store.locks.exclusive(key):
        store.images.remove(key)
        store.live.drop(key)


def rebuild_image(store: VectorStore, key: str) -> None:
    """Build the partition's image again from its table (removed when the partition is no
    longer large, or no longer a table), under its write lock as every build."""
    with store.locks.exclusive(key):
        store.images.remove(key)
        if store.files.has_table(key):
            store.images.build(key, previous=None)
        store.live.drop(key)


def recount(catalog: Catalog, drifts: list[CountDrift]) -> None:
    """Set each drifted partition's counts to what the catalog's rows give."""
    for drift in drifts:
        with catalog.transaction() as tx:
            tx.execute("INSERT INTO partitions (key, live) VALUES (?, 0) ON CONFLICT (key) DO NOTHING", (drift.key,))
            # Hold the row first: a write that moves the count meanwhile waits, and adds its own
            # onto this one once it commits; its memories, committed before, are counted here.
            tx.execute("UPDATE partitions SET live = live WHERE key = ?", (drift.key,))
            row = tx.one(
                "SELECT count(*) AS n, count(superseded_by) AS superseded FROM memories "
                "WHERE partition = ? AND forgotten_at IS NULL",
                (drift.key,),
            )
            tx.execute(
                "UPDATE partitions SET live = ?, superseded = ? WHERE key = ?",
                (int(row["n"]), int(row["superseded"]), drift.key),
            )


def recount_total(catalog: Catalog) -> None:
    """Set the total of live memories to the partitions' sum (kept by triggers since)."""
    with catalog.transaction() as tx:
        tx.execute("UPDATE totals SET live = live WHERE one = 1")
        row = tx.one("SELECT coalesce(sum(live), 0) AS n FROM partitions")
        tx.execute("UPDATE totals SET live = ? WHERE one = 1", (int(row["n"]),))
