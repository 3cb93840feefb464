"""The vector store: one LanceDB table per partition, opened only when a caller reaches it.

``VectorStore`` is the one class callers use: it writes (append, end validity, purge, drop),
searches, and moves whole partitions (stream, create). What it holds, each a concept of its
own::

    layout.py       what lies under the root, and the names of a partition's files
    manifest.py     the model the store records, and the refusal of any other
    locks.py        who may touch a partition when: threads, processes, machines
    image_cache.py  this machine's mapped images of large partitions
    compaction.py   the routine compaction, and a purge's rewrite
    partition.py    a partition in memory, kept current by the writes (LivePartition)
    engine.py       Lance's session and numpy's BLAS, set up once per process

A read is served from the partition's ``LivePartition``, loaded once and edited in place by
this process's writes; a write by another process bumps the partition's version
(``coordination.py``), and the next read loads it again.

``stats`` counts, per partition, how often it was opened, how many vectors were scored and how
many lexical postings were read (``stats.py``): the instrumentation that lets a test prove an
Acme recall never touched Globex.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from indexing import failpoints
from indexing.errors import BadVector
from indexing.identity import NO_PROMPTS, ModelIdentity, Prompts
from indexing.partitions import compaction, image, small_file
from indexing.partitions import tail as tail_file
from indexing.partitions.coordination import Coordination, LocalCoordination, same_table
from indexing.partitions.engine import lance_session, search_on_one_thread
from indexing.partitions.image_cache import ImageCache
from indexing.partitions.layout import (
    IN_USE,
    Layout,
    check_row_ids,
    create_table,
    key_of,
    rows_table,
    schema,
    table_name,
)
from indexing.partitions.location import Location, open_dataset
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
        self._live: dict[str, LivePartition] = {}  # an entry guarded by locks.thread(its key)
        self._tables: set[str] = set()  # partitions known to be tables (a remote existence check is a listing)

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

    def _dataset(self, key: str) -> Any:
        """The partition's Lance dataset at its latest version, or None if it has no table."""
        if not self.location.remote and not self.location.table_exists(table_name(key)):
            return None  # one stat, not Lance's listing
        return open_dataset(self.layout.uri(key), session=self.session)

    def _small(self, key: str) -> pa.Table | None:
        """A small partition's rows (``small_file.py``), or None if it has no file."""
        small = self.layout.small_path(key)
        return None if small is None else small_file.read(small)

    def _is_table(self, key: str) -> bool:
        """Under the write lock: whether the partition is a LanceDB table (not its small file),
        settling a promotion that a kill cut short (``small_file.py``)."""
        if key in self._tables:
            return True
        small = self.layout.small_path(key)
        if small is None:
            found = self.exists(key)
            if found:
                self._tables.add(key)  # on S3, one listing per partition, not one per write
            return found
        if not self.location.table_exists(table_name(key)):
            return False
        if small.exists() or small_file.temp_of(small).exists():
            if open_dataset(self.layout.uri(key), session=self.session) is None:
                self.location.remove_table(table_name(key))  # killed before its commit: the file holds all
                return False
            small_file.remove(small)  # killed after its commit: the table holds every row
        self._tables.add(key)
        return True

    def _open_table(self, key: str) -> Any:
        """The partition's dataset at its latest version, or None if it was never written."""
        self.stats.opened[key] += 1
        return self._dataset(key)

    @contextmanager
    def _writing(self, key: str) -> Iterator[Write]:
        """Hold the partition's write lock (this machine's, then the turn among machines) and
        bump its version after the write; then, still under this machine's lock, bring the
        in-memory partition along and run an image build the write put off. The body sets
        ``tail_only`` when all it did was append to the tail (``tail.refresh``)."""
        with self.locks.exclusive(key), self.images.deferring(key):
            with self.locks.turn(key) as write:
                self._settle_fold(key)
                yield write
            part = self._live.get(key)
            if part is not None:
                if part.token == write.before:
                    part.token = write.after  # it already holds our own change
                else:
                    self._live.pop(key, None)  # someone else wrote: reload later
            if self.images.build_deferred(key):  # this machine's image, built once the turn is free
                self._live.pop(key, None)

    def _append(self, key: str, table: pa.Table) -> Any:
        """Append rows (under the partition's write lock, so two processes never both create
        it): to its small file while the rows fit, else to its table, which the write that
        outgrows the file creates with every row. The table written, or None for the file."""
        self.stats.opened[key] += 1
        self.stats.appended[key] += 1
        small = self.layout.small_path(key)
        if small is not None and not self._is_table(key):
            rows = small_file.joined(small_file.read(small), table)
            data = small_file.encoded(rows)
            if data is not None:
                small_file.write(small, data)
                return None
            written = self._write_table(key, rows, mode="create")
            self._tables.add(key)
            failpoints.hit("promote:after-table")
            small_file.remove(small)  # a kill before this: the next writer removes it
            return written
        if self._is_table(key):
            return self._append_to_table(key, table)
        written = self._write_table(key, table, mode="create")
        self._tables.add(key)
        return written

    def _append_to_table(self, key: str, table: pa.Table) -> Any:
        """Rows for a table: into its tail while it has room, else folded in with the tail's
        (``tail.py``); a batch too large for a tail goes straight in. The table written, or
        None for the tail."""
        tail = self.layout.tail_path(key)
        if tail is None or table.num_rows > tail_file.TAIL_ROWS:
            return self._write_table(key, table, mode="append")
        return tail_file.append(tail, table, lambda rows, fold: self._write_table(key, rows, mode="append", fold=fold))

    def _settle_fold(self, key: str) -> None:
        """Under the write lock, before anything else: a fold a kill cut short (``tail.py``)."""
        tail = self.layout.tail_path(key)
        if tail is not None:
            tail_file.settle(tail, lambda: self._dataset(key))

    def _write_table(self, key: str, table: pa.Table, *, mode: str, fold: str | None = None) -> Any:
        import lance

        table_schema = schema(self.dimension, secrets.token_hex(8) if mode == "create" else None)
        written = lance.write_dataset(
            table.replace_schema_metadata(table_schema.metadata),
            self.layout.uri(key),
            schema=table_schema,
            mode=mode,
            session=self.session,
            transaction_properties={tail_file.FOLD_ID: fold} if fold else None,
        )
        return written

    # -- the in-memory partitions -----------------------------------------------------------

    def live_partition(self, key: str) -> LivePartition:
        """The partition in memory, reloaded from LanceDB if another process wrote since.

        The load takes no lock: a purge in another process may then delete the files of the
        version it opened (a reload happens right after another process wrote, so that is
        just when the next purge may run). A failed load is tried once more holding the
        partition's lock shared: the write under way finishes first, and none starts until
        the load is done. A second failure is a real one and is raised. Readers take the lock
        only then, so a stream of loads never keeps a writer waiting.
        """
        with self.locks.thread(key):
            token = self.coordination.version(key)
            part = self._live.get(key)
            if part is not None and (part.token == token or self._refreshed(key, part, token)):
                return part
            try:
                part = self._load(key, token)
            except Exception:
                with self.locks.reading(key):
                    part = self._load(key, self.coordination.version(key))
            self._live[key] = part
            return part

    def _refreshed(self, key: str, part: LivePartition, token: str) -> bool:
        """Whether the partition held is brought up to ``token`` by its tail alone: every write
        since only appended to the tail (``same_table``, ``tail.refresh``)."""
        tail = self.layout.tail_path(key)
        if tail is None or not same_table(part.token, token):
            return False
        if not tail_file.refresh(tail, part, lambda: self.coordination.version(key) == token):
            return False
        part.token = token
        self.stats.refreshed[key] += 1
        return True

    def _load(self, key: str, token: str) -> LivePartition:
        # Never written: on a disk, one stat says so; remotely that is a listing, and a
        # partition without a version was never written (or holds only a dead write's rows).
        if (not token) if self.location.remote else not self.location.table_exists(table_name(key)):
            return self._load_small(key, token)
        tail = self.layout.tail_path(key)
        newest, tail_id = (None, None) if tail is None else tail_file.seen(tail)  # read before the table
        part = self._load_table(key, token)
        if newest is not None:
            kept = [not part.holds(id_) for id_ in newest.column("id").to_pylist()]
            part.append_arrow(newest.filter(pa.array(kept, type=pa.bool_())))
        part.tail_id = tail_id
        return part

    def _load_table(self, key: str, token: str) -> LivePartition:
        mapped = self.images.current(key)
        if mapped is None:
            table = self._open_table(key)
            self.stats.loaded[key] += 1
            if table is None:  # a promotion under way: the small file still holds every row
                return self._load_small(key, token)
            arrow = table.to_table()
            if not self.images.large(arrow.num_rows):
                return LivePartition.from_arrow(arrow, self.dimension, token)
            del arrow
            mapped = self.images.build_missing(key)
        self.stats.opened[key] += 1
        self.stats.loaded[key] += 1
        gone, since = image.changes(mapped, self.images.latest(key))
        if self.images.rebuild_if_purged(key, mapped=mapped, gone=gone, since=since):
            del mapped
            return self._load_table(key, token)
        return LivePartition.over(mapped, gone=gone, since=since, dimension=self.dimension, token=token)

    def _load_small(self, key: str, token: str) -> LivePartition:
        """A small partition (every row in memory), or an empty one if never written."""
        self.stats.opened[key] += 1
        self.stats.loaded[key] += 1
        held = self._small(key)
        if held is None:
            return LivePartition(dimension=self.dimension, token=token)
        return LivePartition.from_arrow(held, self.dimension, token)

    # -- reads ------------------------------------------------------------------------------

    def search(self, key: str, query: np.ndarray, k: int, *, now: int, text: str | None = None) -> PartitionResult:
        """The ``k`` best rows valid at ``now``: by cosine, fused with BM25 when ``text`` is given."""
        search_on_one_thread()  # on the first search, not at start: most commands never search
        with self.locks.thread(key):  # a write in another thread may be growing the partition
            result = self.live_partition(key).search(query, k, now=now, text=text)
            self.stats.scored[key] += result.scored
            self.stats.postings[key] += result.postings
        return result

    def partitions(self) -> list[str]:
        """Every partition that has a table, read from the tables themselves (not the catalog)."""
        return self.layout.partitions()

    def text(self, key: str, id_: str) -> str | None:
        return self.live_partition(key).text_of(id_)

    def vector(self, key: str, id_: str) -> np.ndarray | None:
        return self.live_partition(key).vector_of(id_)

    def row_ids(self, key: str) -> list[str]:
        return self.live_partition(key).live_ids()

    def ids_written_before(self, key: str, micros: int) -> list[str]:
        """The ids of a partition's rows written before ``micros``, from its table."""
        tail = self.layout.tail_path(key)
        newest = None if tail is None else tail_file.pending(tail)
        dataset = self._dataset(key)
        if dataset is None:
            held = self._small(key)
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
            self._tables.add(key)
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
            lance_table = self._append(key, table)
            write.tail_only = lance_table is None and self._is_table(key)
            part = self._live.get(key)
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
                table = self._open_table(key)
                if table is not None:
                    compaction.compact(table)

    def _compact_if_due(self, key: str, table: Any) -> None:
        """Inside a write: the routine compaction when due, and the image refreshed after it."""
        if self.compaction.due(key):
            compaction.compact(table)
            self.images.refresh(key, force=False)
            self._live.pop(key, None)

    def end_validity(self, key: str, id_: str, valid_until: int) -> None:
        """Close a row's validity interval (supersede or expire)."""
        check_row_ids([id_])
        with self._writing(key):
            if not self._is_table(key):
                held = self._small(key)
                if held is not None:
                    small_file.write(self._small_path(key), small_file.ended(held, id_, valid_until))
                    self._end_in_memory(key, id_, valid_until)
                return
            tail = self.layout.tail_path(key)
            held = None if tail is None else tail_file.read(tail)
            if tail is not None and tail_file.holds(held, [id_]):
                tail_file.write(tail, small_file.ended(held, id_, valid_until))
                self._end_in_memory(key, id_, valid_until)
                return
            table = self._open_table(key)
            if table is None:
                return
            table.update({"valid_until": str(int(valid_until))}, where=f"id = '{id_}'")
            self._end_in_memory(key, id_, valid_until)
            self.compaction.wrote(key)
            self._compact_if_due(key, table)

    def purge(self, key: str, ids: list[str]) -> None:
        """Delete rows and rewrite the partition so no file under the store holds them.

        A delete only marks rows; the text stays in its data file and in old versions. Every
        fragment with a deletion is rewritten, then every old version is removed. The predicate
        names ids only, because LanceDB writes it verbatim into its transaction files.
        """
        check_row_ids(ids)
        if not ids:
            return
        with self._writing(key):
            if not self._is_table(key):
                self._purge_small(key, ids)
                return
            ids = self._purge_tail(key, ids)
            table = self._open_table(key) if ids else None
            if table is None:
                return
            quoted = ", ".join(f"'{i}'" for i in ids)
            table.delete(f"id IN ({quoted})")
            failpoints.hit("purge:after-delete")
            compaction.rewrite(lambda: self.images.latest(key))  # opens it in the store's session
            # The image holds texts too: rebuilt before the forget returns, every time (a
            # retried forget finds the rows already deleted and still rebuilds it).
            self.images.refresh(key, force=True)
            failpoints.hit("purge:after-image")
            part = self._live.get(key)
            if part is not None:
                part.remove(ids)
                if part.base is not None:
                    self._live.pop(key, None)  # map the rebuilt image on the next search

    def _end_in_memory(self, key: str, id_: str, valid_until: int) -> None:
        part = self._live.get(key)
        if part is not None:
            part.end(id_, valid_until)

    def _purge_small(self, key: str, ids: list[str]) -> None:
        """A small partition's purge: the file rewritten without the rows (the rename frees the
        old one), and a killed write's temporary file removed."""
        small = self._small_path(key)
        held = small_file.read(small)
        if held is not None:  # a kill before the rename leaves the rows in the old file
            small_file.write(small, small_file.without(held, ids), failpoint="purge:after-delete")
        small_file.remove_temp(small)
        part = self._live.get(key)
        if part is not None:
            part.remove(ids)

    def _purge_tail(self, key: str, ids: list[str]) -> list[str]:
        """A table's purge, first in its tail (``tail.purge``); the ids left for the table."""
        tail = self.layout.tail_path(key)
        if tail is None:
            return ids
        here = tail_file.purge(tail, ids)
        part = self._live.get(key)
        if here and part is not None:
            part.remove(here)
        purged = set(here)
        return [id_ for id_ in ids if id_ not in purged]

    def _small_path(self, key: str) -> Path:
        small = self.layout.small_path(key)
        assert small is not None, "a remote store has no small partitions"
        return small

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
            self._tables.discard(key)
            self.images.remove(key)
            self._live.pop(key, None)
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
        dataset = self._open_table(key)
        if dataset is None or not self.images.large(dataset.count_rows()):
            return
        with self._writing(key):
            table = self._open_table(key)
            if table is None:
                return
            compaction.compact(table)
            self.images.refresh(key, force=False)
            self._live.pop(key, None)  # the next search maps the new image

    def remove_stale_images(self) -> int:
        """Remove this machine's images of tables that no longer exist (dropped by another
        machine of a shared store); returns how many."""
        removed = self.images.remove_stale()
        for key in removed:
            self._live.pop(key, None)
        return len(removed)
