"""The vector store: one LanceDB table per partition, opened only when a caller reaches it.

``VectorStore`` is the one class callers use: it writes (append, end validity, purge, drop),
searches, and moves whole partitions (stream, create). What it holds, each a concept of its
own::

    layout.py       what lies under the root, and the names of a partition's files
    files.py        which of a partition's files holds it now (small file, table, tail),
                    and the append that writes to the right one
    loading.py      this process's partitions in memory, loaded once and kept current
    manifest.py     the model the store records, and the refusal of any other
    locks.py        who may touch a partition when: threads, processes, machines
    image_cache.py  this machine's mapped images of large partitions
    compaction.py   the routine compaction, and a purge's rewrite
    purging.py      a purge: rows out of every file that held them
    partition.py    a partition in memory, kept current by the writes (LivePartition)
    engine.py       Lance's session and numpy's BLAS, set up once per process

A read is served from the partition's ``LivePartition``, loaded once and edited in place by
this process's writes; a write by another process bumps the partition's version
(``coordination.py``), and the next read takes what it appended to the tail, or loads the
partition again (``loading.py``).

``stats`` counts, per partition, how often it was opened, how many vectors were scored and how
many lexical postings were read (``stats.py``): the instrumentation that lets a test prove an
Acme recall never touched Globex.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from indexing.errors import BadVector
from indexing.identity import NO_PROMPTS, ModelIdentity, Prompts
from indexing.partitions import compaction, purging, small_file
from indexing.partitions import tail as tail_file
from indexing.partitions.coordination import Coordination, LocalCoordination
from indexing.partitions.engine import lance_session, search_on_one_thread
from indexing.partitions.files import PartitionFiles
from indexing.partitions.image_cache import ImageCache
from indexing.partitions.layout import (
    IN_USE,
    Layout,
    check_row_ids,
    create_table,
    key_of,
    rows_table,
    table_name,
)
from indexing.partitions.loading import LivePartitions
from indexing.partitions.location import Location
from indexing.partitions.locks import PartitionLocks, Write, share_store
from indexing.partitions.manifest import check_manifest
from indexing.partitions.partition import LivePartition
from indexing.partitions.stats import IndexStats
from indexing.rows import PartitionResult, Row, RowBatch

# The layout's names, read by backup, restore and reindex through the store's door.
__all__ = ["IN_USE", "IndexStats", "Layout", "Location", "VectorStore", "key_of", "table_name"]


class VectorStore:
    """Partitions by key; search, append, end validity, purge."""

    def __init__(
        self,
        root: Path | str,
        *,
        model: str,
        dimension: int,
        prompts: Prompts = NO_PROMPTS,
        local: Path | None = None,
        coordination: Coordination | None = None,
    ) -> None:
        """``root``: a folder, or ``s3://bucket/prefix`` with ``local`` this machine's folder.
        ``prompts``: what the model puts before queries and documents; a store opens only under
        the model, dimension and prompts it recorded first.
        ``coordination``: how processes learn of each other's writes; by default a token file
        per partition, which only processes of this machine see."""
        self.location = Location.of(root, local)
        self.layout = Layout(self.location)
        self.root = self.location.local
        self.model = model
        self.dimension = dimension
        self.identity = ModelIdentity(model, dimension, prompts)
        self.location.prepare()
        self._in_use = share_store(self.layout)
        check_manifest(self.location, self.identity)
        self.coordination = coordination or LocalCoordination(self.root, table_name)
        self.stats = IndexStats()
        self.locks = PartitionLocks(self.layout, self.coordination)
        self.images = ImageCache(
            self.layout, self.locks, dimension=dimension, session=lambda: self.session, built=self.stats.built
        )
        self.compaction = compaction.Compaction()
        self._session: Any = None  # a lance.Session once a search needs one
        self.files = PartitionFiles(self.layout, dimension=dimension, session=lambda: self.session, stats=self.stats)
        self.live = LivePartitions(
            self.files, self.images, coordination=self.coordination, locks=self.locks, stats=self.stats
        )

    def close(self) -> None:
        if self._in_use is not None:
            self._in_use.close()
            self._in_use = None

    # -- plumbing ---------------------------------------------------------------------------

    @property
    def session(self) -> Any:
        """The Lance session every dataset of this store opens in, made on first use."""
        if self._session is None:
            self._session = lance_session()
        return self._session

    @property
    def small_rows(self) -> int:
        """The most rows a partition holds as a small file (``small_file.py``); 0 on S3."""
        return 0 if self.location.remote else small_file.SMALL_ROWS

    def exists(self, key: str) -> bool:
        return self.layout.exists(key)

    @contextmanager
    def _writing(self, key: str) -> Iterator[Write]:
        """Hold the partition's write lock (this machine's, then the turn among machines) and
        bump its version after the write; then, still under this machine's lock, bring the
        in-memory partition along and run an image build the write put off. The body sets
        ``tail_only`` when all it did was append to the tail (``tail.refresh``)."""
        with self.locks.exclusive(key), self.images.deferring(key):
            with self.locks.turn(key) as write:
                try:
                    self.files.settle_fold(key)
                    yield write
                finally:
                    self.files.write_ended(key)
            self.live.after_write(key, write)
            if self.images.build_deferred(key):  # this machine's image, built once the turn is free
                self.live.drop(key)

    # -- reads ------------------------------------------------------------------------------

    def live_partition(self, key: str) -> LivePartition:
        """The partition in memory, current with every write (``LivePartitions.current``)."""
        return self.live.current(key)

    def search(
        self,
        key: str,
        query: np.ndarray,
        k: int,
        *,
        now: int,
        text: str | None = None,
        allow: Collection[str] | None = None,
    ) -> PartitionResult:
        """The ``k`` best rows valid at ``now``: by cosine, fused with BM25 when ``text`` is given;
        with ``allow``, among the rows of those ids only (every one of them scored exactly)."""
        search_on_one_thread()  # on the first search, not at start: most commands never search
        with self.locks.thread(key):  # a write in another thread may be growing the partition
            result = self.live.current(key).search(query, k, now=now, text=text, allow=allow)
            self.stats.scored[key] += result.scored
            self.stats.postings[key] += result.postings
        return result

    def search_sharing(
        self, key: str, query: np.ndarray, k: int, *, now: int, text: str, share: float, most: int
    ) -> PartitionResult:
        """The ``k`` best rows by cosine among those valid at ``now`` that share at least ``share``
        of ``text``'s terms (``LivePartition.search_sharing``)."""
        search_on_one_thread()
        with self.locks.thread(key):
            result = self.live.current(key).search_sharing(query, k, now=now, text=text, share=share, most=most)
            self.stats.scored[key] += result.scored
        return result

    def partitions(self) -> list[str]:
        """Every partition that has a table, read from the tables themselves (not the catalog)."""
        return self.layout.partitions()

    def text(self, key: str, id_: str) -> str | None:
        return self.live.current(key).text_of(id_)

    def vector(self, key: str, id_: str) -> np.ndarray | None:
        return self.live.current(key).vector_of(id_)

    def vectors(self, key: str, ids: Sequence[str]) -> list[np.ndarray | None]:
        """Rows' vectors, the partition brought up to date once for all of them."""
        part = self.live.current(key)
        return [part.vector_of(id_) for id_ in ids]

    def row_ids(self, key: str) -> list[str]:
        return self.live.current(key).live_ids()

    def ids_written_before(self, key: str, micros: int) -> list[str]:
        """The ids of a partition's rows written before ``micros``, from its table."""
        tail = self.layout.tail_path(key)
        newest = None if tail is None else tail_file.pending(tail)
        dataset = self.files.dataset(key)
        if dataset is None:
            held = self.files.small(key)
            return [] if held is None else small_file.written_before(held, micros)
        ids = dataset.to_table(columns=["id"], filter=f"created_at < {int(micros)}").column("id").to_pylist()
        if newest is not None:
            seen = set(ids)
            ids += [id_ for id_ in small_file.written_before(newest, micros) if id_ not in seen]
        return ids

    # -- whole partitions (backup, restore, export) -----------------------------------------

    def held_still(self, key: str) -> AbstractContextManager[None]:
        """Hold the partition still: no write, and no purge of old versions, until the block
        ends (``PartitionLocks.held_still``)."""
        return self.locks.held_still(key)

    def stream(self, key: str, *, batch_size: int = 8192, with_vectors: bool = True) -> Iterator[pa.RecordBatch]:
        """The partition's rows at one version (the latest when the stream starts), in batches:
        id, text, created_at, valid_from, valid_until (and vector). A purge of old versions in
        another process may delete files under a stream that holds no lock: the caller retries
        under ``held_still``. Nothing for a partition never written."""
        columns = ["id", "text", "created_at", "valid_from", "valid_until"] + (["vector"] if with_vectors else [])
        yield from self.layout.batches(key, columns, batch_size=batch_size, session=self.session)

    def create_from(self, key: str, batches: Iterator[pa.RecordBatch]) -> int:
        """Create the partition's table from a stream of rows (the ``stream`` columns, vector
        included) in one commit, under the write lock; returns the rows written. Refuses a
        partition that already has a table."""
        with self._writing(key):
            if self.exists(key):
                raise ValueError(f"partition {key} already has a table")
            written = create_table(self.layout.uri(key), batches, dimension=self.dimension, session=self.session)
            self.files.created(key)
        return written

    # -- writes -----------------------------------------------------------------------------

    def check_vectors(self, vectors: np.ndarray) -> np.ndarray:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dimension:
            raise BadVector(f"vectors must have {self.dimension} dimensions, got {vectors.shape[-1]}")
        if not np.isfinite(vectors).all():
            raise BadVector("vectors must hold finite numbers only")
        return vectors

    def add(self, key: str, rows: list[Row] | RowBatch, *, compact: bool = True) -> None:
        """Append rows to a partition (created on its first write). ``compact=False`` leaves
        the routine compaction to a later ``compact_if_due``: a bulk import writes vectors
        while its catalog transaction is open, and a compaction can take seconds."""
        batch = rows if isinstance(rows, RowBatch) else RowBatch.of(rows) if rows else None
        if batch is None or not len(batch):
            return
        check_row_ids(batch.ids)
        vectors = self.check_vectors(batch.vectors)
        self._add_table(key, batch, rows_table(batch, vectors), compact=compact)

    def add_many(self, batches: Sequence[tuple[str, RowBatch]]) -> None:
        """Append rows to several partitions, one after another, each under its own write lock
        (an import's thin spaces), without the routine compaction (as ``add(compact=False)``).
        The rows are checked and made one Arrow table at once, and each partition writes its
        slice of it: a thin spread costs its partitions' writes, not a table built per space.
        A failure stops there: the partitions before it hold their rows."""
        batches = [(key, batch) for key, batch in batches if len(batch)]
        if not batches:
            return
        whole = RowBatch(
            ids=[id_ for _, batch in batches for id_ in batch.ids],
            texts=[text for _, batch in batches for text in batch.texts],
            vectors=np.concatenate([batch.vectors for _, batch in batches]),
            created_at=np.concatenate([batch.created_at for _, batch in batches]),
            valid_from=np.concatenate([batch.valid_from for _, batch in batches]),
            valid_until=np.concatenate([batch.valid_until for _, batch in batches]),
        )
        check_row_ids(whole.ids)
        table = rows_table(whole, self.check_vectors(whole.vectors))
        start = 0
        for key, batch in batches:
            self._add_table(key, batch, table.slice(start, len(batch)), compact=False)
            start += len(batch)

    def _add_table(self, key: str, batch: RowBatch, table: pa.Table, *, compact: bool) -> None:
        with self._writing(key) as write:
            appended = self.files.append(key, table)
            write.tail_only = appended.tail_only
            lance_table = appended.table
            part = self.live.held(key)
            if part is not None:
                part.append(batch)
            if lance_table is not None:
                self.compaction.wrote(key)
                if compact:
                    self._compact_if_due(key, lance_table)

    def compact_if_due(self, key: str) -> None:
        """Run the routine compaction if enough writes piled up since the last one."""
        if self.compaction.due(key):
            with self._writing(key):
                table = self.files.open_table(key)
                if table is not None:
                    compaction.compact(table)

    def _compact_if_due(self, key: str, table: Any) -> None:
        """Inside a write: the routine compaction when due, and the image refreshed after it."""
        if self.compaction.due(key):
            compaction.compact_in_write(key, table, refresh=lambda: self.images.refresh(key, force=False))
            self.live.drop(key)

    def end_validity(self, key: str, id_: str, valid_until: int) -> None:
        """Close a row's validity interval (supersede or expire)."""
        check_row_ids([id_])
        with self._writing(key):
            if not self.files.is_table(key):
                held = self.files.small(key)
                if held is not None:
                    small_file.write(self.files.small_path(key), small_file.ended(held, id_, valid_until))
                    self._end_in_memory(key, id_, valid_until)
                return
            tail = self.layout.tail_path(key)
            held = None if tail is None else tail_file.read(tail)
            if tail is not None and tail_file.holds(held, [id_]):
                tail_file.write(tail, small_file.ended(held, id_, valid_until))
                self._end_in_memory(key, id_, valid_until)
                return
            table = self.files.open_table(key)
            if table is None:
                return
            table.update({"valid_until": str(int(valid_until))}, where=f"id = '{id_}'")
            self._end_in_memory(key, id_, valid_until)
            self.compaction.wrote(key)
            self._compact_if_due(key, table)

    def purge(self, key: str, ids: list[str], *, only_if_held: bool = False) -> None:
        """Delete rows and rewrite the partition so no file under the store holds them
        (``purging.py``); ``only_if_held``: a refused write's undo (the table is rewritten only
        if it holds one of them)."""
        check_row_ids(ids)
        if not ids:
            return
        with self._writing(key):
            purging.purge(key, ids, files=self.files, images=self.images, live=self.live, only_if_held=only_if_held)
            if not only_if_held:  # a forget; a refused write's undo removes rows never acknowledged
                self.live.forgotten(key)

    def _end_in_memory(self, key: str, id_: str, valid_until: int) -> None:
        part = self.live.held(key)
        if part is not None:
            part.end(id_, valid_until)

    def drop(self, key: str) -> None:
        """Remove a whole partition from disk."""
        with self._writing(key):
            self.location.remove_table(table_name(key))
            small = self.layout.small_path(key)
            if small is not None:
                small_file.remove(small)
            tail = self.layout.tail_path(key)
            if tail is not None:
                tail_file.remove(tail)
            self.files.dropped(key)
            self.images.remove(key)
            self.live.removed(key)
        with suppress(FileNotFoundError):
            os.unlink(self.layout.lock_path(key))

    # -- images -----------------------------------------------------------------------------

    def settle(self, key: str, *, rows: int | None = None) -> None:
        """After a bulk write: compact the partition and build its image if it is large and the
        image is missing or behind (the importer calls this once per partition it wrote).
        A small partition is left to the routine compaction. ``rows``: the partition's rows when
        the caller knows them (it created the partition); a small one is then not opened."""
        if rows is not None and not self.images.large(rows):
            return
        dataset = self.files.open_table(key)
        if dataset is None or not self.images.large(dataset.count_rows()):
            return
        with self._writing(key):
            table = self.files.open_table(key)
            if table is None:
                return
            compaction.compact(table)
            self.images.refresh(key, force=False)
            self.live.drop(key)  # the next search maps the new image

    def remove_stale_images(self) -> int:
        """Remove this machine's images of tables that no longer exist (dropped by another
        machine of a shared store); returns how many."""
        removed = self.images.remove_stale()
        for key in removed:
            self.live.drop(key)
        return len(removed)
