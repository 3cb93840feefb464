"""Memories on disk: text and vector in the partition's LanceDB table, the rest in the catalog.

This package stores and loads, and owns every statement on the catalog's memories table; it
decides nothing about who may. Writes go journal, vectors, then the catalog: a crash between
the vectors and the commit leaves orphan rows that no catalog entry names; recall drops
anything the catalog does not hold as current, and the journal names them for the next sweep
to purge (``server.memories.journal``). Forgets are crash-safe by an intent
(``server.memories.forgetting``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from concurrent.futures import Executor, wait
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta
from typing import Protocol

import orjson

from indexing import failpoints
from indexing.partitions.store import VectorStore
from indexing.rows import OPEN_END, RowBatch
from server.barrier.labels import Labels
from server.catalog import Catalog, Tx
from server.clock import to_micros
from server.errors import AlreadySuperseded, CatalogUnavailable
from server.faults import DiskRoom
from server.memories import forgetting
from server.memories.data import Data
from server.memories.data_index import build_if_missing, write_fields
from server.memories.input import MemoryBatch, NewMemory
from server.memories.journal import WriteJournal
from server.memories.listing import current_rows, memory_of
from server.memories.presence import Presence
from server.memories.undo import Undo
from server.models import Memory
from server.spaces import partition_key

log = logging.getLogger("esfis.store")


class Journal(Protocol):
    """Where a write names its ids before its vectors (``server.memories.journal.WriteJournal``)."""

    def writing(self, partition: str, ids: list[str]) -> AbstractContextManager[None]: ...


class MemoryBook:
    def __init__(
        self, catalog: Catalog, store: VectorStore, journal: Journal | None = None, *, room: DiskRoom | None = None
    ) -> None:
        """``journal``: None where the caller journals its writes itself (an import). ``room``:
        asked before every write of new memories (``server.faults``): a full disk refuses the
        write before anything of it is written."""
        self.catalog = catalog
        self.store = store
        self.journal = journal
        self.room = room
        self.undo = Undo(catalog, store, journal if isinstance(journal, WriteJournal) else None)
        self.presence = Presence(catalog)  # what the catalog holds already: an import's checks
        build_if_missing(catalog)  # a catalog made before the data's index: filled once

    def load(self, id_: str) -> Memory | None:
        memory = self.meta(id_)
        return None if memory is None else self.with_text(memory)

    def meta(self, id_: str) -> Memory | None:
        """The catalog's row, without the text: no partition is opened."""
        row = self.catalog.one("SELECT * FROM memories WHERE id = ?", (id_,))
        return None if row is None else memory_of(row)

    def with_text(self, memory: Memory) -> Memory:
        """The memory with its text from its partition (forgotten when the partition has none)."""
        if memory.forgotten:
            return memory
        text = self.store.text(partition_key(memory.space), memory.id)
        return dataclasses.replace(memory, text=text, forgotten=text is None)

    def write(
        self,
        memories: list[NewMemory],
        *,
        supersedes: tuple[str, datetime] | None = None,
        also: Callable[[Tx], None] | None = None,
    ) -> None:
        """Store new memories of one space; optionally supersede one old memory atomically.
        ``also`` runs in the same catalog transaction (the run's trail of the write)."""
        if not memories:
            return
        assert len({partition_key(m.space) for m in memories}) == 1
        assert len({(m.ai, m.created_at) for m in memories}) == 1
        self.write_batch(MemoryBatch.of(memories), supersedes=supersedes, also=also)

    def write_batch(
        self,
        batch: MemoryBatch,
        *,
        supersedes: tuple[str, datetime] | None = None,
        vectors_in: Executor | None = None,
        also: Callable[[Tx], None] | None = None,
    ) -> None:
        """Store new memories of one space. With ``vectors_in`` (a thread), the vectors are
        written while the catalog rows are inserted; the catalog still commits only after the
        vectors are on disk, so a crash never leaves a catalog entry without its vector."""
        if not len(batch):
            return
        if self.room is not None:
            self.room.check()
        self.undo.settle()
        key = partition_key(batch.space)
        with nullcontext() if self.journal is None else self.journal.writing(key, batch.ids):
            failpoints.hit("write:after-journal")
            self._write_batch(key, batch, supersedes=supersedes, vectors_in=vectors_in, also=also)

    def write_many(
        self, batches: list[MemoryBatch], *, vectors_in: Executor, also: Callable[[Tx], None] | None = None
    ) -> None:
        """New memories of several spaces at once (an import's batch, however thin its spread):
        each partition's vectors written on ``vectors_in``'s threads side by side (each under
        its own partition's lock), and one catalog transaction for all of them, committed only
        once every partition's vectors are on disk. A failure commits none, and purges what was
        written. The caller's journal names every id first (the importer's). ``also`` runs
        first in the transaction (an import's new spaces), with rows or without."""
        batches = [b for b in batches if len(b)]
        if batches and self.room is not None:
            self.room.check()
        if not batches:
            if also is not None:
                with self.catalog.transaction() as tx:
                    also(tx)
            return
        keys = [partition_key(b.space) for b in batches]
        # A space of many rows gets a thread of its own (a LanceDB append, mostly outside the
        # GIL); the few rows of thin spaces go in one run on one thread, file after file: their
        # writes are short Python, and threads contending for them cost more than they save.
        thin = [(k, b) for k, b in zip(keys, batches) if len(b) <= self.store.small_rows]
        runs = [[(k, b)] for k, b in zip(keys, batches) if len(b) > self.store.small_rows] + ([thin] if thin else [])
        adding = [vectors_in.submit(self._add_run, run) for run in runs]
        try:
            with self.catalog.transaction() as tx:
                if also is not None:
                    also(tx)
                self._insert_many(tx, list(zip(keys, batches)))
                for done in adding:
                    done.result()
                failpoints.hit("write:after-vectors")
        except BaseException as exc:
            wait(adding)
            if isinstance(exc, CatalogUnavailable):
                # The commit's outcome is not known (``server.memories.undo``): the rows stay for
                # the import's journal, whose sweep asks the catalog, or ``esfis check --repair``.
                raise
            for key, batch in zip(keys, batches):
                try:
                    self.store.purge(key, batch.ids, only_if_held=True)
                except Exception:  # orphans stay harmless: recall ignores rows the catalog does not name
                    pass
            raise
        failpoints.hit("write:after-commit")
        for key in keys:
            if self.store.compaction.due(key):
                vectors_in.submit(self._compact, key)

    def _add_run(self, run: list[tuple[str, MemoryBatch]]) -> None:
        self.store.add_many([(key, batch.rows()) for key, batch in run])

    def _write_batch(
        self,
        key: str,
        batch: MemoryBatch,
        *,
        supersedes: tuple[str, datetime] | None,
        vectors_in: Executor | None,
        also: Callable[[Tx], None] | None,
    ) -> None:
        if vectors_in is None:
            try:
                self.store.add(key, batch.rows())
            except BaseException as exc:  # a full disk mid-append: what it cut short goes
                self.undo.refused(key, batch.ids, exc)
                if self.room is not None:
                    self.room.met(exc)
                raise
            failpoints.hit("write:after-vectors")
        else:
            adding = vectors_in.submit(self.store.add, key, batch.rows(), compact=False)
        try:
            with self.catalog.transaction() as tx:
                if supersedes is not None:
                    self._claim(tx, supersedes[0], batch.ids[0], supersedes[1])
                self._insert(tx, key, batch, supersedes[0] if supersedes else None)
                if also is not None:
                    also(tx)
                if vectors_in is not None:
                    adding.result()
                    failpoints.hit("write:after-vectors")
        except BaseException as exc:
            if vectors_in is not None:
                wait([adding])
            self.undo.refused(key, batch.ids, exc)  # purged, or kept while the commit's outcome is unknown
            if self.room is not None:
                self.room.met(exc)
            raise
        if self.room is not None:
            self.room.fitted()
        failpoints.hit("write:after-commit")
        if vectors_in is not None:
            # After the commit, in the vectors' thread: a compaction can take seconds, and the
            # next batch's catalog rows can go in meanwhile (its vectors queue behind it).
            vectors_in.submit(self._compact, key)
        if supersedes is not None:
            self._end_in_partition(*supersedes)

    def _end_in_partition(self, old_id: str, at: datetime) -> None:
        """After a replace's commit: the old row's validity closed in its partition too. The
        catalog is the truth a recall checks every candidate against; the partition's copy only
        keeps a superseded row out of the top k, so a disk that refuses this refuses nothing
        acknowledged (``esfis check --repair`` closes it later)."""
        old = self.catalog.one("SELECT partition FROM memories WHERE id = ?", (old_id,))
        if old is None:
            return
        try:
            self.store.end_validity(old["partition"], old_id, to_micros(at))
        except OSError:
            log.warning("partition %s: a superseded row's validity stays open there for now", old["partition"])

    def write_restored(self, key: str, rows: RowBatch, meta: list[tuple]) -> None:
        """Store memories as an export recorded them (``server.bulk.export``): their own ids, writers,
        times and labels. ``meta`` per row: (id, space, ai, created_at, valid_from, valid_until,
        digest, labels, run_id, from_spaces, data), times in microseconds, labels and data JSON
        (data None for none). Same order
        as every write: journal, vectors, then the catalog in one transaction."""
        with nullcontext() if self.journal is None else self.journal.writing(key, rows.ids):
            try:
                self.store.add(key, rows)
            except BaseException as exc:  # a full disk mid-append: what it cut short goes
                self.undo.refused(key, rows.ids, exc)
                raise
            try:
                with self.catalog.transaction() as tx:
                    tx.executemany(
                        "INSERT INTO memories (id, partition, space, ai, created_at, valid_from, valid_until, "
                        "digest, labels, run_id, from_spaces, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [(m[0], key, *m[1:]) for m in meta],
                    )
                    write_fields(tx, [(key, m[0], m[3], m[10]) for m in meta])
                    tx.execute(
                        "INSERT INTO partitions (key, live) VALUES (?, ?) "
                        "ON CONFLICT (key) DO UPDATE SET live = partitions.live + excluded.live",
                        (key, len(meta)),
                    )
            except BaseException as exc:
                self.undo.refused(key, rows.ids, exc)  # purged, or kept while the commit's outcome is unknown
                raise

    def _compact(self, key: str) -> None:
        try:
            self.store.compact_if_due(key)
        except Exception:  # routine upkeep: the table is whole without it, and the next one retries
            log.warning("compaction of partition %s failed", key, exc_info=True)

    def fold(self, copy: str, *, into: str, at: datetime) -> None:
        """Supersede ``copy`` by ``into``, an earlier memory of the same fact and partition
        (``server.memories.folding``): one transaction, then the copy's row closed in its table."""
        with self.catalog.transaction() as tx:
            self._claim(tx, copy, into, at)
        row = self.catalog.one("SELECT partition FROM memories WHERE id = ?", (copy,))
        if row is not None:
            self.store.end_validity(row["partition"], copy, to_micros(at))

    def _claim(self, tx: Tx, old_id: str, new_id_: str, at: datetime) -> None:
        cursor = tx.execute(
            "UPDATE memories SET superseded_by = ?, valid_until = ? "
            "WHERE id = ? AND superseded_by IS NULL AND forgotten_at IS NULL",
            (new_id_, to_micros(at), old_id),
        )
        if cursor.rowcount != 1:
            raise AlreadySuperseded(f"memory {old_id} is already superseded")
        tx.execute(
            "UPDATE partitions SET superseded = superseded + 1 "
            "WHERE key = (SELECT partition FROM memories WHERE id = ?)",
            (old_id,),
        )

    def _insert(self, tx: Tx, key: str, batch: MemoryBatch, supersedes: str | None) -> None:
        self._insert_many(tx, [(key, batch)], supersedes)

    def _insert_many(self, tx: Tx, pairs: list[tuple[str, MemoryBatch]], supersedes: str | None = None) -> None:
        """The catalog rows of memories of one or more partitions, in three statements however
        many partitions: the memories, their import keys, the partitions' live counts.

        The rows travel as one JSON array per statement (json_extract on SQLite, not ->>, which
        needs 3.38: Ubuntu 22.04's is 3.37). executemany would step once per row, giving up the
        GIL each time and waiting to get it back: beside a busy Python thread (an import parsing
        its next batch) it fell to ~500 rows/s. One statement per partition cost an import of
        thin spaces three statements a space."""
        memories: list[tuple] = []
        keyed: list[tuple[str, str, str]] = []
        live: dict[str, int] = {}
        for key, batch in pairs:
            until = [None if u == OPEN_END else u for u in batch.valid_until.tolist()]
            from_spaces = batch.from_spaces or ["[]"] * len(batch)
            n = len(batch)
            data = batch.data or [None] * n
            memories += zip(
                batch.ids,
                [key] * n,
                [batch.space] * n,
                [batch.ai] * n,
                [int(batch.created_at)] * n,
                batch.valid_from.tolist(),
                until,
                batch.digests,
                batch.labels,
                batch.keys,
                batch.run_ids,
                from_spaces,
                data,
                strict=True,
            )
            keyed += [(key, k, i) for k, i in zip(batch.keys, batch.ids) if k is not None]
            live[key] = live.get(key, 0) + n
        item = tx.sql.item
        tx.execute(
            "INSERT INTO memories (id, partition, space, ai, created_at, valid_from, valid_until, "
            "supersedes, digest, labels, key, run_id, from_spaces, data) "
            f"SELECT {item(0)}, {item(1)}, {item(2)}, {item(3)}, {item(4, 'BIGINT')}, {item(5, 'BIGINT')}, "
            f"{item(6, 'BIGINT')}, ?, {item(7)}, {item(8)}, {item(9)}, {item(10)}, {item(11)}, {item(12)} "
            f"FROM {tx.sql.rows}",
            (supersedes, orjson.dumps(memories).decode()),  # orjson: 5x json's speed on a batch
        )
        write_fields(tx, [(m[1], m[0], m[4], m[12]) for m in memories])
        if keyed:
            # WHERE true: SQLite would read the ON of the upsert as a join's.
            tx.execute(
                f"INSERT INTO import_keys (partition, key, memory_id) SELECT {item(0)}, {item(1)}, {item(2)} "
                f"FROM {tx.sql.rows} WHERE true ON CONFLICT DO NOTHING",
                (orjson.dumps(keyed).decode(),),
            )
        tx.execute(
            f"INSERT INTO partitions (key, live) SELECT {item(0)}, {item(1, 'BIGINT')} FROM {tx.sql.rows} "
            "WHERE true ON CONFLICT (key) DO UPDATE SET live = partitions.live + excluded.live",
            (json.dumps(list(live.items())),),
        )

    # -- forgetting for good (``server.memories.forgetting``) ---------------------------------

    def forget(self, memory: Memory, at: datetime, *, also: Callable[[Tx], None] | None = None) -> None:
        """Remove the text and vector for good, crash-safe; keep the id, known as forgotten.
        ``also`` runs in the catalog's transaction that marks it."""
        forgetting.forget(self.catalog, self.store, memory, at, also=also)

    def finish_forgets(self, *, only: list[str] | None = None, stale: timedelta | None = None) -> int:
        """Finish forgets under way (all, or ``only`` these and those ``stale``); how many finished."""
        return forgetting.finish_forgets(self.catalog, self.store, only=only, stale=stale)

    def drop_space(self, space: str, at: datetime) -> int:
        """Purge a space's partition; its ids stay known as forgotten."""
        return forgetting.drop_space(self.catalog, self.store, space, at)

    # -- reading what the catalog holds -------------------------------------------------------

    def current_ids(self, ids: list[str], now: datetime) -> set[str]:
        """Of ``ids``, those the catalog holds as current at ``now`` (the final word on validity)."""
        return set(self.current_labels(ids, now))

    def current_labels(self, ids: list[str], now: datetime, *, as_of: bool = False) -> dict[str, Labels]:
        """Of ``ids``, those current at ``now``, with their labels (one read for both). With
        ``as_of``, those valid at ``now``, a past time: superseded since included (superseding
        ends a memory's validity then), forgotten never."""
        return self.current_with_data(ids, now, as_of=as_of)[0]

    def current_with_data(
        self, ids: list[str], now: datetime, *, as_of: bool = False
    ) -> tuple[dict[str, Labels], dict[str, Data]]:
        """``current_labels``, and the data of those that carry any, in the same one read (a
        recall's: a statement fewer on its path)."""
        return current_rows(self.catalog, ids, now, as_of=as_of)

    def counts(self, keys: list[str]) -> tuple[dict[str, tuple[int, int]], int]:
        """For ``keys``: (live memories, of which superseded); and the live total of all, in one
        read whatever the number of partitions (the total is kept by triggers, ``server.catalog``)."""
        rows = self.catalog.all(
            f"SELECT key, live, superseded FROM partitions WHERE key IN (SELECT value FROM {self.catalog.sql.values}) "
            "UNION ALL SELECT NULL, live, 0 FROM totals",
            (json.dumps(keys),),
        )
        total = sum(r["live"] for r in rows if r["key"] is None)
        return {r["key"]: (r["live"], r["superseded"]) for r in rows if r["key"] is not None}, int(total)
