"""A large partition's newest rows, kept in one Arrow file until there are enough to append.

A LanceDB append costs a data file, a transaction and a manifest however few rows it brings:
about 2 ms of CPU, most of what a remember into a large space cost the server. So a partition
that is a LanceDB table keeps the rows written since its last append in ``<table>.tail``, an
Arrow IPC file like a small partition's (``small_file.py``): at most ``TAIL_ROWS`` rows and
``TAIL_BYTES``, rewritten whole into ``<table>.tail.tmp`` and renamed over on each write, under
the partition's write lock. The write that would take it past either bound *folds* it: the
tail's rows and its own go to the table in one append, and the file goes. A batch too large for
a tail of its own (an import's) is appended to the table directly; the tail stays as it was.
Local disks only, as small partitions: on S3 every write is an append.

**A fold cut by a kill.** The tail is first renamed ``<table>.folding``; the append carries the
file's id (a random one, in its schema's metadata) in its transaction's properties; then the
file is removed. A kill leaves the folding file, and the next writer settles it before anything
else, under the lock: when the table's latest transaction carries the id, the rows are in the
table and the file goes; otherwise the append never committed and the file is the tail again.
No other write can come between (each one settles first).

**Readers take no lock.** A reader reads the tail and the folding file first, then the table,
and takes a row of the files only when the table does not hold its id: racing a fold, a row is
never counted twice, and never missed (the table it opens after the files is at least as new).

Forget: a purge rewrites the tail without the rows (the rename frees the old file) and removes
a temporary file a killed write left; the folding file is settled before a purge runs.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from indexing import failpoints
from indexing.partitions import small_file

TAIL_ROWS = 256  # a write that would take the tail past this many rows folds it into the table
TAIL_BYTES = 1 << 20  # ... or past a file this large: what one remember may rewrite
SUFFIX = ".tail"
FOLDING = ".folding"
FOLD_ID = "esfis_fold"  # the tail's id: in its schema's metadata, and in the fold's transaction


def folding_of(tail: Path) -> Path:
    return tail.with_name(tail.name.removesuffix(SUFFIX) + FOLDING)


def read(tail: Path) -> pa.Table | None:
    """The tail's rows, or None when there is none."""
    return small_file.read(tail)


def id_of(held: pa.Table) -> str:
    metadata = held.schema.metadata or {}
    return metadata.get(FOLD_ID.encode(), b"").decode()


def grown(held: pa.Table | None, table: pa.Table) -> tuple[pa.Table, pa.Buffer | None]:
    """The tail with ``table``'s rows after its own, and its file; None for the file when the
    rows are past the bounds (they are then folded into the table)."""
    rows = small_file.joined(None if held is None else held.replace_schema_metadata(None), table)
    rows = rows.replace_schema_metadata({FOLD_ID: id_of(held) if held is not None else secrets.token_hex(8)})
    return rows, small_file.encoded(rows, rows_at_most=TAIL_ROWS, bytes_at_most=TAIL_BYTES)


def write(tail: Path, data: pa.Table | pa.Buffer) -> None:
    small_file.write(tail, data)


def append(tail: Path, table: pa.Table, fold: Callable[[pa.Table, str], Any]) -> Any:
    """Under the write lock: ``table``'s rows after the tail's, or, past the bounds, the tail's
    and ``table``'s given to ``fold`` (rows, the tail's id) for one append to the table. What
    ``fold`` returned, or None when the rows stayed in the tail."""
    held = read(tail)
    rows, data = grown(held, table)
    if data is not None:
        write(tail, data)
        return None
    if held is None:  # the batch alone is past the bounds: no tail to fold
        return fold(table, "")
    folding = folding_of(tail)
    os.replace(tail, folding)
    failpoints.hit("fold:after-rename")
    written = fold(rows, id_of(rows))
    failpoints.hit("fold:after-append")
    os.unlink(folding)
    return written


def settle(tail: Path, latest: Callable[[], Any]) -> None:
    """Under the write lock, before anything else: a fold a kill cut short is finished (the
    table's latest transaction, from ``latest()``'s dataset, carries its id: the file goes) or
    undone (the file is the tail again)."""
    folding = folding_of(tail)
    held = read(folding)
    if held is None:
        return
    dataset = latest()
    done = None if dataset is None else dataset.read_transaction(dataset.version)
    properties = getattr(done, "transaction_properties", None) or {}
    if properties.get(FOLD_ID) == id_of(held):
        os.unlink(folding)
    else:
        os.replace(folding, tail)


def purge(tail: Path, ids: list[str]) -> list[str]:
    """Of ``ids``, those the tail held, now rewritten without them (the rename frees the old
    file); a temporary file a killed write left is removed either way."""
    held = read(tail)
    here = holds(held, ids)
    if here:
        assert held is not None
        without(tail, held, here)
    small_file.remove_temp(tail)
    return here


def holds(held: pa.Table | None, ids: list[str]) -> list[str]:
    """Of ``ids``, those among the tail's rows."""
    if held is None or not ids:
        return []
    present = pc.is_in(pa.array(ids, type=pa.string()), value_set=held.column("id"))
    return [id_ for id_, here in zip(ids, present.to_pylist()) if here]


def without(tail: Path, held: pa.Table, ids: list[str]) -> None:
    """Rewrite the tail less ``ids`` (removed when none is left)."""
    rest = small_file.without(held, ids)
    if rest.num_rows:
        write(tail, rest)
    else:
        remove(tail)


def remove(tail: Path) -> None:
    """The tail, a temporary file a killed write left, and a folding file."""
    small_file.remove(tail)
    try:
        os.unlink(folding_of(tail))
    except FileNotFoundError:
        pass


def pending(tail: Path) -> pa.Table | None:
    """What a reader adds to the table: the tail's rows and a folding file's, read before the
    table (the caller drops the ids the table holds)."""
    parts = [held for held in (read(tail), read(folding_of(tail))) if held is not None]
    if not parts:
        return None
    return pa.concat_tables([p.replace_schema_metadata(None) for p in parts]).combine_chunks()
