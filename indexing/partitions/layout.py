"""The on-disk layout of a vector store: what lies under its root, and the names that lead there.

Under the store's root (a local folder; ``location.py`` for S3, where the tables lie under the
prefix and the rest in this machine's folder)::

    store.json            the model every vector was made with: name, dimension, and its
                          prompts when it has any (``manifest.py``)
    in-use.lock           held shared by every open store of this folder, exclusive by a
                          reindex (``locks.py``)
    <table>.lance/        one LanceDB table per partition (the store of record)
    <table>.arrow         instead, while a partition is small (at most ``SMALL_ROWS`` rows, on
                          a local disk): its rows in one Arrow file (``small_file.py``)
    <table>.lock          an advisory lock per partition across processes: one writer at a
                          time (exclusive); a load that failed is retried under it (shared),
                          so a purge never deletes the files of a version being read. It also
                          holds the partition's version, a token rewritten after every write
                          (its table's generation first: ``coordination.same_table``), so other
                          processes know their in-memory partition is stale (a file read costs
                          far less than a Lance version check); across machines the version
                          lives in the catalog instead (``coordination.py``)
    <table>.image/        a large partition's persisted, mapped image (``image.py``, built
                          by ``image_build.py``, kept by ``image_cache.py``)

``<table>`` is ``table_name(key)``: the partition key, escaped into the characters a table name
allows. Every table has the one schema ``schema`` draws.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from indexing.partitions import small_file
from indexing.partitions import tail as tail_file
from indexing.partitions.location import Location, open_dataset
from indexing.partitions.small_file import SUFFIX as SMALL_SUFFIX
from indexing.partitions.tail import SUFFIX as TAIL_SUFFIX
from indexing.rows import OPEN_END, RowBatch

IN_USE = "in-use.lock"
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")
_ROW_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


@lru_cache(maxsize=4096)  # a write asks it several times; bounded: an import may reach 100,000 spaces
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


def check_row_ids(ids: list[str]) -> None:
    """Refuse an id a predicate could not quote safely: LanceDB writes predicates verbatim."""
    for id_ in ids:
        if not _ROW_ID.match(id_):
            raise ValueError(f"bad row id {id_!r}")


@lru_cache(maxsize=64)
def schema(dimension: int, table_id: str | None = None) -> pa.Schema:
    """The partitions' schema; a table being created carries a new identity (``image.table_id``)."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dimension), nullable=False),
            pa.field("created_at", pa.int64(), nullable=False),
            pa.field("valid_from", pa.int64(), nullable=False),
            pa.field("valid_until", pa.int64(), nullable=True),
        ],
        metadata=None if table_id is None else {"esfis_table_id": table_id},
    )


def rows_table(batch: RowBatch, vectors: np.ndarray) -> pa.Table:
    """A batch of rows as the table holds them (``vectors``: the batch's, checked); no end of
    validity is a null."""
    dimension = vectors.shape[1]
    return pa.Table.from_arrays(  # from arrays, not a dict: a thin import makes one per space
        [
            pa.array(batch.ids, type=pa.string()),
            pa.array(batch.texts, type=pa.string()),
            pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), type=pa.float32()), dimension),
            pa.array(batch.created_at, type=pa.int64()),
            pa.array(batch.valid_from, type=pa.int64()),
            pa.array(batch.valid_until, type=pa.int64(), mask=batch.valid_until == OPEN_END),
        ],
        schema=schema(dimension),
    )


def create_table(uri: str, batches: Iterator[pa.RecordBatch], *, dimension: int, session: Any) -> int:
    """Create a partition's table at ``uri`` from a stream of rows (``VectorStore.stream``'s
    columns, vector included) in one commit, with a new table identity; the rows written."""
    import lance

    table_schema = schema(dimension, secrets.token_hex(8))
    written, failed = 0, []

    def counted() -> Iterator[pa.RecordBatch]:
        nonlocal written
        try:
            for batch in batches:
                written += batch.num_rows
                yield pa.RecordBatch.from_arrays([batch.column(f.name) for f in table_schema], schema=table_schema)
        except BaseException as exc:  # Lance would raise it as its own error: keep the original
            failed.append(exc)
            raise

    reader = pa.RecordBatchReader.from_batches(table_schema, counted())
    try:
        lance.write_dataset(reader, uri, schema=table_schema, mode="create", session=session)
    except BaseException:
        if failed:
            raise failed[0] from None
        raise
    return written


@dataclass(frozen=True)
class Layout:
    """Where each of a partition's files lies, for one store's ``location``."""

    location: Location

    @property
    def root(self) -> Path:
        """This machine's folder of the store (the tables too, unless they lie in S3)."""
        return self.location.local

    def uri(self, key: str) -> str:
        return self.location.table(table_name(key))

    def small_path(self, key: str) -> Path | None:
        """Where the partition's rows lie while it is small; None on S3 (a table from the start)."""
        return None if self.location.remote else self.root / f"{table_name(key)}{SMALL_SUFFIX}"

    def tail_path(self, key: str) -> Path | None:
        """Where a table's newest rows lie until they are appended (``tail.py``); None on S3."""
        return None if self.location.remote else self.root / f"{table_name(key)}{TAIL_SUFFIX}"

    def lock_path(self, key: str) -> str:
        """A string, not a ``Path``: asked once a write, and only ever opened."""
        return f"{self.location.local}/{table_name(key)}.lock"

    def image_folder(self, key: str) -> Path:
        return self.root / f"{table_name(key)}.image"

    def exists(self, key: str) -> bool:
        """Whether the partition was ever written, in either form."""
        small = self.small_path(key)
        return (small is not None and small.exists()) or self.location.table_exists(table_name(key))

    def partitions(self) -> list[str]:
        """Every partition that has a table or a small file, read from them (not the catalog)."""
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
            folder = Path(self.location.tables)
            tables = {p.name.removesuffix(".lance") for p in folder.glob("p.*.lance")}
            names = sorted(tables | {p.name.removesuffix(SMALL_SUFFIX) for p in folder.glob(f"p.*{SMALL_SUFFIX}")})
        return sorted(k for k in map(key_of, names) if k is not None)

    def batches(
        self, key: str, columns: list[str], *, batch_size: int, session: Any = None
    ) -> Iterator[pa.RecordBatch]:
        """The partition's rows at its latest version, in either form (a table's tail included,
        each row once); nothing if never written."""
        if self.location.remote or self.location.table_exists(table_name(key)):
            tail = self.tail_path(key)
            newest = None if tail is None else tail_file.pending(tail)  # before the table (``tail.py``)
            dataset = open_dataset(self.uri(key), session=session)
            if dataset is not None:
                if newest is None or tail is None:
                    yield from dataset.to_batches(columns=columns, batch_size=batch_size)
                    return
                held = newest.column("id").to_pylist()
                waiting = set(held)
                read = columns if "id" in columns else ["id", *columns]
                for batch in dataset.to_batches(columns=read, batch_size=batch_size):
                    waiting.difference_update(batch.column("id").to_pylist())
                    yield batch.select(columns)
                self._check_tail_kept(key, tail, held)
                rest = newest.filter(pc.is_in(newest.column("id"), value_set=pa.array(sorted(waiting), pa.string())))
                yield from rest.select(columns).to_batches(max_chunksize=batch_size)
                return
        small = self.small_path(key)
        held = None if small is None else small_file.read(small)
        if held is not None:
            yield from held.select(columns).to_batches(max_chunksize=batch_size)

    def _check_tail_kept(self, key: str, tail: Path, held: list[str]) -> None:
        """After a read without a lock: every row the tail held when the read began is still in
        the tail or, folded since, in the table. A row gone from both was forgotten during the
        read: ``OSError``, as when a purge deletes a table's files under a read (the caller
        reads again holding the partition's lock, or fails)."""
        now = tail_file.pending(tail)
        gone = set(held) - set(now.column("id").to_pylist() if now is not None else [])
        if not gone:
            return
        dataset = open_dataset(self.uri(key))
        quoted = ", ".join(f"'{id_}'" for id_ in sorted(gone))
        folded = (
            set()
            if dataset is None
            else set(dataset.to_table(columns=["id"], filter=f"id IN ({quoted})").column("id").to_pylist())
        )
        if gone - folded:
            raise OSError(f"partition {key}: rows were forgotten while it was read")

    def images(self) -> list[tuple[str, Path]]:
        """This machine's image folders, each with its partition's key."""
        found = []
        for folder in self.root.glob("p.*.image"):
            key = key_of(folder.name.removesuffix(".image"))
            if key is not None:
                found.append((key, folder))
        return found
