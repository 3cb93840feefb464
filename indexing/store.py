"""The vector store: one LanceDB table per partition, opened only when a caller reaches it.

Layout under the store's root (a local folder; ``indexing/location.py`` for S3, where the
tables lie under the prefix and the rest in this machine's folder)::

    store.json            the model every vector was made with: name, dimension, and its
                          prompts when it has any (``indexing/identity.py``)
    <table>.lance/        one LanceDB table per partition (the store of record)
    <table>.lock          an advisory lock per partition across processes: one writer at a
                          time (exclusive); a load that failed is retried under it (shared),
                          so a purge never deletes the files of a version being read
    <table>.gen           the partition's version, a token rewritten after every write, so
                          other processes know their in-memory image is stale (a file read
                          costs far less than a Lance version check); across machines the
                          version lives in the catalog instead (``indexing/coordination.py``)
    <table>.image/        a large partition's persisted, mapped image (``indexing/image.py``),
                          built when data is written: at the end of an import, when the rows
                          written since the last build pile up, and after every forget

``stats`` counts, per partition, how often it was opened, how many vectors were scored and how
many lexical postings were read: the instrumentation that lets a test prove an Acme recall never
touched Globex.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from indexing import failpoints, image
from indexing.ann import ANN_THRESHOLD
from indexing.coordination import Coordination, LocalCoordination
from indexing.errors import BadVector, StoreBusy, StoreMismatch
from indexing.identity import NO_PROMPTS, ModelIdentity, Prompts
from indexing.location import Location, open_dataset, read_manifest, write_manifest
from indexing.partition import OPEN_END, LivePartition, PartitionResult, Row, RowBatch

_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")
IN_USE = "in-use.lock"  # held shared by every open store of this folder, exclusive by a reindex
COMPACT_EVERY = 64  # writes between routine compactions of a partition
COMPACT_TARGET_ROWS = 65_536  # routine compaction leaves fragments this large alone
LANCE_CACHE_BYTES = 64 * 1024 * 1024  # each of Lance's index and metadata caches


def table_name(key: str) -> str:
    """A LanceDB table name for a partition key, injective and readable.

    Table names allow only ``[A-Za-z0-9_.-]``: every other character (and ``_`` itself) is
    written ``_xx`` in hex, so ``space:acme/platform`` becomes ``p.space_3aacme_2fplatform``.
    """
    return "p." + "".join(c if c in _PLAIN else "".join(f"_{b:02x}" for b in c.encode()) for c in key)


def key_of(name: str) -> str | None:
    """The partition key a table name was made from (``table_name``'s inverse); None for a
    table that is not a partition's."""
    if not name.startswith("p."):
        return None
    raw, rest = bytearray(), name[2:]
    i = 0
    while i < len(rest):
        if rest[i] == "_":
            raw.append(int(rest[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(rest[i].encode())
            i += 1
    return raw.decode()


@dataclass
class IndexStats:
    opened: Counter[str] = field(default_factory=Counter)
    loaded: Counter[str] = field(default_factory=Counter)
    scored: Counter[str] = field(default_factory=Counter)
    built: Counter[str] = field(default_factory=Counter)  # images built
    postings: Counter[str] = field(default_factory=Counter)  # lexical postings read

    def reset(self) -> None:
        self.built.clear()
        self.opened.clear()
        self.loaded.clear()
        self.scored.clear()
        self.postings.clear()


_blas_limited = False


def _holds_purged(mapped: image.Image, gone: np.ndarray, since: pa.Table) -> bool:
    """Whether the image holds rows the table no longer has at all: gone, and not written again
    since (a compaction or a closed validity rewrites a row; a purge deletes it)."""
    if not gone.any():
        return False
    if not since.num_rows:
        return True
    rewritten = np.array([i.encode() for i in since.column("id").to_pylist()])
    return not np.isin(mapped.ids[gone], rewritten).all()


def search_on_one_thread() -> None:
    """Run numpy's OpenBLAS on one thread in this process, once.

    OpenBLAS splits even a matrix-vector product over every core, and its waiting threads spin:
    on a busy two-core machine that turned a 5 ms search of a large partition into 100 ms at
    the 95th percentile. A search is bound by memory, not arithmetic, so one thread loses
    nothing. Only numpy's own OpenBLAS is limited (a torch embedder's library is not), and an
    image build runs in its own process, where k-means keeps every core.
    """
    global _blas_limited
    if _blas_limited:
        return
    _blas_limited = True
    try:
        from threadpoolctl import ThreadpoolController

        ThreadpoolController().select(internal_api="openblas").limit(limits=1)
    except Exception:  # a numpy on another BLAS: nothing to limit, nothing lost
        pass


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
        self.root = self.location.local
        self.model = model
        self.dimension = dimension
        self.identity = ModelIdentity(model, dimension, prompts)
        self.location.prepare()
        self._in_use = self._share_local_store()
        self._check_manifest()
        self.coordination = coordination or LocalCoordination(self.root, table_name)
        self.stats = IndexStats()
        self._session: Any = None  # a lance.Session once a search needs one
        self._snapshots: dict[str, LivePartition] = {}
        self._writes: Counter[str] = Counter()
        self._held: dict[str, int] = {}  # partition → the fd of its write lock, while held
        self._known: set[str] = set()  # partitions seen written (a remote existence check is a listing)
        self._turns: set[str] = set()  # partitions whose turn among machines is held now
        self._deferred: dict[str, bool] = {}  # image builds put off until the turn is free: key → force
        self._lock = threading.RLock()

    # -- manifest ---------------------------------------------------------------------------

    def _check_manifest(self) -> None:
        if self.location.remote:
            recorded = read_manifest(self.location) or write_manifest(self.location, self.identity)
            self._refuse_other_model(recorded)
            return
        path = self.root / "store.json"
        if path.exists():
            self._refuse_other_model(json.loads(path.read_text()))
        else:
            # Several processes may open a new store at once: each writes its own file, and the
            # first link wins; the others then check what the winner recorded.
            tmp = path.with_name(f"store.{os.getpid()}.{secrets.token_hex(4)}.tmp")
            tmp.write_text(json.dumps(self.identity.manifest()))
            try:
                os.link(tmp, path)
            except FileExistsError:
                tmp.unlink()
                self._check_manifest()
                return
            tmp.unlink()

    def _share_local_store(self):
        """A shared lock on ``in-use.lock`` for as long as this store is open, so a reindex
        (which takes it exclusive) never swaps the store under a live process. Held by a file
        object: a store the caller drops without closing releases it when collected."""
        if self.location.remote:
            return None
        handle = open(self.root / IN_USE, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise StoreBusy("a reindex of this store is under way (esfis reindex); try again once it is done") from None
        return handle

    def close(self) -> None:
        if self._in_use is not None:
            self._in_use.close()
            self._in_use = None

    def _refuse_other_model(self, recorded: dict) -> None:
        built = ModelIdentity.from_manifest(recorded)
        if built != self.identity:
            raise StoreMismatch(
                f"this store was built with model {built.describe()}; the model in use is "
                f"{self.identity.describe()}. Use the same model (ESFIS_MODEL), move the store to "
                f"this one (esfis reindex) or use another ESFIS_HOME"
            )

    # -- plumbing ---------------------------------------------------------------------------

    @property
    def session(self):
        """The Lance session every dataset of this store opens in (``lance`` itself, not
        ``lancedb``: its import costs a command line most of a second more)."""
        if self._session is None:
            import lance

            # Bounded caches: with Lance's defaults the metadata cache grew with every write (a
            # 2M-row import: +275 MiB RSS and climbing; bounded, flat at ~500 MiB).
            self._session = lance.Session(
                index_cache_size_bytes=LANCE_CACHE_BYTES, metadata_cache_size_bytes=LANCE_CACHE_BYTES
            )
        return self._session

    def _image_folder(self, key: str) -> Path:
        return self.root / f"{table_name(key)}.image"

    def _lock_path(self, key: str) -> Path:
        return self.root / f"{table_name(key)}.lock"

    def _uri(self, key: str) -> str:
        return self.location.table(table_name(key))

    def exists(self, key: str) -> bool:
        return self.location.table_exists(table_name(key))

    def _dataset(self, key: str):
        """The partition's Lance dataset at its latest version, or None if never written."""
        if not self.location.remote and not self.exists(key):
            return None  # one stat, not Lance's listing
        return open_dataset(self._uri(key), session=self.session)

    def _token(self, key: str) -> str:
        return self.coordination.version(key)

    @contextmanager
    def _writing(self, key: str) -> Iterator[str]:
        """Hold the partition's write lock (this machine's, then the turn among machines);
        yields the version before the write and bumps it after."""
        with self._lock, open(self._lock_path(key), "a+") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            self._held[key] = lock_file.fileno()
            try:
                with self.coordination.writer_turn(key):
                    self._turns.add(key)
                    try:
                        before = self._token(key)
                        try:
                            yield before
                        finally:  # after a failure too: the table may have changed before it
                            after = self.coordination.bump(key)
                    finally:
                        self._turns.discard(key)
                snap = self._snapshots.get(key)
                if snap is not None:
                    if snap.token == before:
                        snap.token = after  # our image already holds our own change
                    else:
                        self._snapshots.pop(key, None)  # someone else wrote: reload later
                force = self._deferred.pop(key, None)
                if force is not None:  # this machine's image, built once the turn is free
                    self._refresh_image(key, force=force)
                    self._snapshots.pop(key, None)
            finally:
                self._deferred.pop(key, None)
                self._held.pop(key, None)
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    def _schema(self, table_id: str | None = None) -> pa.Schema:
        """The partitions' schema; a table being created carries a new identity (``image.table_id``)."""
        return pa.schema(
            [
                pa.field("id", pa.string(), nullable=False),
                pa.field("text", pa.string(), nullable=False),
                pa.field("vector", pa.list_(pa.float32(), self.dimension), nullable=False),
                pa.field("created_at", pa.int64(), nullable=False),
                pa.field("valid_from", pa.int64(), nullable=False),
                pa.field("valid_until", pa.int64(), nullable=True),
            ],
            metadata=None if table_id is None else {"esfis_table_id": table_id},
        )

    def _open_table(self, key: str):
        """The partition's dataset at its latest version, or None if it was never written."""
        self.stats.opened[key] += 1
        return self._dataset(key)

    def _append(self, key: str, table: pa.Table):
        """Append rows; Lance creates the partition on its first write (under its write lock,
        so two processes never both create it)."""
        import lance

        self.stats.opened[key] += 1
        mode = "append" if key in self._known or self.exists(key) else "create"
        schema = self._schema(secrets.token_hex(8) if mode == "create" else None)
        written = lance.write_dataset(
            table.replace_schema_metadata(schema.metadata),
            self._uri(key),
            schema=schema,
            mode=mode,
            session=self.session,
        )
        self._known.add(key)
        return written

    def live_partition(self, key: str) -> LivePartition:
        """The partition's image, reloaded from LanceDB if another process wrote since.

        The load takes no lock: a purge in another process may then delete the files of the
        version it opened (a reload happens right after another process wrote, so that is
        just when the next purge may run). A failed load is tried once more holding the
        partition's lock shared: the write under way finishes first, and none starts until
        the load is done. A second failure is a real one and is raised. Readers take the lock
        only then, so a stream of loads never keeps a writer waiting.
        """
        with self._lock:
            token = self._token(key)
            snap = self._snapshots.get(key)
            if snap is not None and snap.token == token:
                return snap
            try:
                snap = self._load(key, token)
            except Exception:
                with self._reading(key):
                    snap = self._load(key, self._token(key))
            self._snapshots[key] = snap
            return snap

    def _load(self, key: str, token: str) -> LivePartition:
        # Never written: on a disk, one stat says so; remotely that is a listing, and a
        # partition without a version was never written (or holds only a dead write's rows).
        if (not token) if self.location.remote else not self.exists(key):
            self.stats.opened[key] += 1
            self.stats.loaded[key] += 1
            return LivePartition(dimension=self.dimension, token=token)
        mapped = image.open_image(self._image_folder(key))
        if mapped is not None and self.location.remote:
            # Another machine may have dropped the table, or dropped it and made it again: an
            # image of another table is this machine's stale copy, removed, never served.
            current = self._dataset(key)
            if current is None or image.table_id(current) != mapped.table_id:
                with self._exclusive(key):
                    image.remove(self._image_folder(key))
                mapped = None
        if mapped is None:
            table = self._open_table(key)
            self.stats.loaded[key] += 1
            if table is None:
                return LivePartition(dimension=self.dimension, token=token)
            arrow = table.to_table()
            if arrow.num_rows < ANN_THRESHOLD:
                return LivePartition.from_arrow(arrow, self.dimension, token)
            del arrow
            # A large partition without an image (a store from before images, or a build that
            # was killed): build it once, here, under the write lock; it persists.
            with self._exclusive(key):
                self._build_image(key, previous=None)
                mapped = image.open_image(self._image_folder(key))
            if mapped is None:
                raise RuntimeError(f"the image of partition {key} could not be built")
        import lance

        self.stats.opened[key] += 1
        self.stats.loaded[key] += 1
        dataset = lance.dataset(self._uri(key), session=self.session)
        gone, since = image.changes(mapped, dataset)
        if self.location.remote and _holds_purged(mapped, gone, since):
            # Another machine forgot rows that this machine's image still holds (a forget
            # rebuilds only its own machine's image): rebuild it here before serving anything.
            with self._exclusive(key):
                self._build_image(key, previous=mapped)
            del mapped
            return self._load(key, token)
        return LivePartition.over(mapped, gone, since, self.dimension, token)

    def _build_image(self, key: str, previous: image.Image | None) -> None:
        """Build and publish the partition's image (the caller holds the write lock), or
        remove it when the partition shrank below the threshold."""
        import lance

        folder = self._image_folder(key)
        dataset = lance.dataset(self._uri(key), session=self.session)
        if dataset.count_rows() < ANN_THRESHOLD:
            image.remove(folder)
            return
        reuse = previous is not None
        del dataset, previous  # the child maps the previous image itself
        image.build_in_child(folder, self._uri(key), self.dimension, reuse=reuse, lock_fd=self._held[key])
        self.stats.built[key] += 1

    def settle(self, key: str) -> None:
        """After a bulk write: compact the partition and build its image if it is large and the
        image is missing or behind (the importer calls this once per partition it wrote).
        A small partition is left to the routine compaction."""
        dataset = self._dataset(key)
        if dataset is None or dataset.count_rows() < ANN_THRESHOLD:
            return
        with self._writing(key):
            table = self._open_table(key)
            if table is None:
                return
            self._compact(table)
            self._refresh_image(key, force=False)
            self._snapshots.pop(key, None)  # the next search maps the new image

    def _refresh_image(self, key: str, *, force: bool) -> None:
        """(Re)build the image when the partition is past the threshold and the rows written since
        the last build are many; with ``force`` (a forget), whenever an image exists.

        On a shared store the image is this machine's own, and a build of a large partition
        takes long: it waits until the write has given the turn among machines back (still
        under this machine's lock, before the write returns), so no other machine's writer
        waits for it."""
        if key in self._turns and self.location.remote:
            self._deferred[key] = force or self._deferred.get(key, False)
            return
        import lance

        folder = self._image_folder(key)
        current = image.open_image(folder)
        if current is None:
            if force:
                image.remove(folder)  # a half-built or other-format image holds texts too
                return
            dataset = lance.dataset(self._uri(key), session=self.session)
            if dataset.count_rows() >= ANN_THRESHOLD:
                self._build_image(key, previous=None)
            return
        if not force:
            dataset = lance.dataset(self._uri(key), session=self.session)
            if image.rows_since(current, dataset) <= max(ANN_THRESHOLD // 5, current.rows // 10):
                return
        self._build_image(key, previous=current)

    @contextmanager
    def _exclusive(self, key: str) -> Iterator[None]:
        """Hold the partition's write lock without announcing a write (an image build changes
        no row)."""
        with self._lock, open(self._lock_path(key), "a+") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            self._held[key] = lock_file.fileno()
            try:
                yield
            finally:
                self._held.pop(key, None)
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    @contextmanager
    def _reading(self, key: str) -> Iterator[None]:
        """Hold the partition's lock shared (writers hold it exclusive)."""
        fd = os.open(self._lock_path(key), os.O_RDONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # releases the lock

    # -- reads ------------------------------------------------------------------------------

    def search(self, key: str, query: np.ndarray, k: int, now: int, text: str | None = None) -> PartitionResult:
        """The ``k`` best rows valid at ``now``: by cosine, fused with BM25 when ``text`` is given."""
        if not _blas_limited:
            search_on_one_thread()  # on the first search, not at start: most commands never search
        with self._lock:  # a write in another thread may be growing the image
            result = self.live_partition(key).search(query, k, now, text)
            self.stats.scored[key] += result.scored
            self.stats.postings[key] += result.postings
        return result

    def partitions(self) -> list[str]:
        """Every partition that has a table, read from the tables themselves (not the catalog)."""
        if self.location.remote:
            import lancedb

            db, names, page = lancedb.connect(self.location.tables), [], None
            while True:
                listed = db.list_tables(page_token=page, limit=10_000)
                names += listed.tables
                page = listed.page_token
                if not page:
                    break
        else:
            names = [p.name.removesuffix(".lance") for p in Path(self.location.tables).glob("p.*.lance")]
        return sorted(k for k in map(key_of, names) if k is not None)

    def remove_stale_images(self) -> int:
        """Remove this machine's images of tables that no longer exist (dropped by another
        machine of a shared store); returns how many."""
        tables = {table_name(k) for k in self.partitions()}
        removed = 0
        for folder in self.root.glob("p.*.image"):
            name = folder.name.removesuffix(".image")
            key = key_of(name)
            if key is not None and name not in tables:
                with self._exclusive(key):
                    image.remove(folder)
                self._snapshots.pop(key, None)
                removed += 1
        return removed

    # -- whole partitions (backup, restore, export) -----------------------------------------

    @contextmanager
    def held_still(self, key: str) -> Iterator[None]:
        """Hold the partition still: no write, and no purge of old versions, until the block
        ends. This machine's lock shared; on a shared store the turn among machines as well
        (other machines' writers of this partition wait for it)."""
        with self._reading(key), self.coordination.writer_turn(key):
            yield

    def stream(self, key: str, *, batch_size: int = 8192, with_vectors: bool = True) -> Iterator[pa.RecordBatch]:
        """The partition's rows at one version (the latest when the stream starts), in batches:
        id, text, created_at, valid_from, valid_until (and vector). A purge of old versions in
        another process may delete files under a stream that holds no lock: the caller retries
        under ``held_still``. Nothing for a partition never written."""
        dataset = self._dataset(key)
        if dataset is None:
            return
        columns = ["id", "text", "created_at", "valid_from", "valid_until"] + (["vector"] if with_vectors else [])
        yield from dataset.to_batches(columns=columns, batch_size=batch_size)

    def create_from(self, key: str, batches: Iterator[pa.RecordBatch]) -> int:
        """Create the partition's table from a stream of rows (the ``stream`` columns, vector
        included) in one commit, under the write lock; returns the rows written. Refuses a
        partition that already has a table."""
        import lance

        schema = self._schema(secrets.token_hex(8))
        written, failed = 0, []

        def counted() -> Iterator[pa.RecordBatch]:
            nonlocal written
            try:
                for batch in batches:
                    written += batch.num_rows
                    yield pa.RecordBatch.from_arrays([batch.column(f.name) for f in schema], schema=schema)
            except BaseException as exc:  # Lance would raise it as its own error: keep the original
                failed.append(exc)
                raise

        with self._writing(key):
            if self.exists(key):
                raise ValueError(f"partition {key} already has a table")
            reader = pa.RecordBatchReader.from_batches(schema, counted())
            try:
                lance.write_dataset(reader, self._uri(key), schema=schema, mode="create", session=self.session)
            except BaseException:
                if failed:
                    raise failed[0] from None
                raise
            self._known.add(key)
        return written

    def ids_written_before(self, key: str, micros: int) -> list[str]:
        """The ids of a partition's rows written before ``micros``, from its table."""
        dataset = self._dataset(key)
        if dataset is None:
            return []
        return dataset.to_table(columns=["id"], filter=f"created_at < {int(micros)}").column("id").to_pylist()

    def text(self, key: str, id_: str) -> str | None:
        return self.live_partition(key).text_of(id_)

    def vector(self, key: str, id_: str) -> np.ndarray | None:
        return self.live_partition(key).vector_of(id_)

    def row_ids(self, key: str) -> list[str]:
        return self.live_partition(key).live_ids()

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
        for id_ in batch.ids:
            if not _ID.match(id_):
                raise ValueError(f"bad row id {id_!r}")
        vectors = self.check_vectors(batch.vectors)
        until = pa.array(batch.valid_until, type=pa.int64(), mask=batch.valid_until == OPEN_END)
        table = pa.table(
            {
                "id": pa.array(batch.ids, type=pa.string()),
                "text": pa.array(batch.texts, type=pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(vectors.reshape(-1), type=pa.float32()), self.dimension
                ),
                "created_at": pa.array(batch.created_at, type=pa.int64()),
                "valid_from": pa.array(batch.valid_from, type=pa.int64()),
                "valid_until": until,
            },
            schema=self._schema(),
        )
        with self._writing(key) as _:
            lance_table = self._append(key, table)
            snap = self._snapshots.get(key)
            if snap is not None:
                snap.append(batch)
            self._writes[key] += 1
            if compact and self._compaction_due(key):
                self._compact(lance_table)
                self._refresh_image(key, force=False)
                self._snapshots.pop(key, None)

    def compact_if_due(self, key: str) -> None:
        """Run the routine compaction if enough writes piled up since the last one."""
        if self._compaction_due(key):
            with self._writing(key):
                table = self._open_table(key)
                if table is not None:
                    self._compact(table)

    def end_validity(self, key: str, id_: str, valid_until: int) -> None:
        """Close a row's validity interval (supersede or expire)."""
        if not _ID.match(id_):
            raise ValueError(f"bad row id {id_!r}")
        with self._writing(key):
            table = self._open_table(key)
            if table is None:
                return
            table.update({"valid_until": str(int(valid_until))}, where=f"id = '{id_}'")
            snap = self._snapshots.get(key)
            if snap is not None:
                snap.end(id_, valid_until)
            self._writes[key] += 1
            if self._compaction_due(key):
                self._compact(table)
                self._refresh_image(key, force=False)
                self._snapshots.pop(key, None)

    def purge(self, key: str, ids: list[str]) -> None:
        """Delete rows and rewrite the partition so no file under the store holds them.

        A delete only marks rows; the text stays in its data file and in old versions. Every
        fragment with a deletion is rewritten, then every old version is removed. The predicate
        names ids only, because LanceDB writes it verbatim into its transaction files.
        """
        for id_ in ids:
            if not _ID.match(id_):
                raise ValueError(f"bad row id {id_!r}")
        if not ids:
            return
        with self._writing(key):
            table = self._open_table(key)
            if table is None:
                return
            quoted = ", ".join(f"'{i}'" for i in ids)
            table.delete(f"id IN ({quoted})")
            failpoints.hit("purge:after-delete")
            self._rewrite(key)
            # The image holds texts too: rebuilt before the forget returns, every time (a
            # retried forget finds the rows already deleted and still rebuilds it).
            self._refresh_image(key, force=True)
            failpoints.hit("purge:after-image")
            snap = self._snapshots.get(key)
            if snap is not None:
                snap.remove(ids)
                if snap.base is not None:
                    self._snapshots.pop(key, None)  # map the rebuilt image on the next search

    def drop(self, key: str) -> None:
        """Remove a whole partition from disk."""
        with self._writing(key):
            self.location.remove_table(table_name(key))
            self._known.discard(key)
            image.remove(self._image_folder(key))
            self._snapshots.pop(key, None)
        self._lock_path(key).unlink(missing_ok=True)

    def _rewrite(self, key: str) -> None:
        import lance

        dataset = lance.dataset(self._uri(key), session=self.session)
        # Every fragment with a deletion is rewritten, whatever its size; small fragments are
        # merged only up to COMPACT_TARGET_ROWS, so a forget does not rewrite the whole table.
        dataset.optimize.compact_files(
            materialize_deletions_threshold=0.0, target_rows_per_fragment=COMPACT_TARGET_ROWS
        )
        dataset = lance.dataset(self._uri(key), session=self.session)
        dataset.cleanup_old_versions(older_than=timedelta(0), delete_unverified=True)

    def _compaction_due(self, key: str) -> bool:
        return self._writes[key] > 0 and self._writes[key] % COMPACT_EVERY == 0

    @staticmethod
    def _compact(dataset) -> None:
        """Compact on a schedule (every ``COMPACT_EVERY`` writes): tiny writes otherwise pile up
        versions and files.

        Only fragments under ``COMPACT_TARGET_ROWS`` are merged, so a compaction costs the recent
        writes, not the whole table (``table.optimize`` rewrote every fragment under 1M rows each
        time: a 1M-row import spent 180 s and 1.2 GB of RSS in it, growing with the table).
        """
        dataset.optimize.compact_files(target_rows_per_fragment=COMPACT_TARGET_ROWS)
        dataset.cleanup_old_versions(older_than=timedelta(minutes=10))
