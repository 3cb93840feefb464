"""A small partition, kept in one Arrow file until it grows: what a thin space costs on disk.

A LanceDB table costs the same to create whatever it holds (a folder, a data file, a
transaction, a manifest: about 2 ms of CPU on the machines we measure on), so an import of
100,000 tenants of five memories each spent its time making tables, not writing rows. A
partition of at most ``SMALL_ROWS`` rows and ``SMALL_BYTES`` is therefore one Arrow IPC file,
``<table>.arrow``, beside where its table would lie; the write that takes it past either creates its
LanceDB table with every row, then removes the file. It is still the space's own partition:
one file per space, never shared, searched exactly as before (every row of a small partition
is held in memory, ``partition.py``).

Every change rewrites the file whole (at most ``SMALL_BYTES``: 256 short memories of 384
dimensions are about 400 KB, and long texts make a space a table sooner) into
``<table>.arrow.tmp``, fdatasyncs it and renames it over the file (then fsyncs the folder), so a
kill or a full disk at any point leaves the partition either before the write or after it
(``indexing.durable``: a short write raises, never renames a cut file over a whole one); the temporary name is fixed because writers
hold the partition's lock, and a purge removes a temporary file a killed write left (it may
hold a forgotten text). The rename frees the old file: a purged row's text is on no file.

Only on a local disk: on S3 every partition is a LanceDB table (an object store has no rename,
and its writes are not what a thin import is bound by there).

Which form a partition has: its table when ``<table>.lance`` holds a version; else its file.
Both lie there only after a promotion was killed: before the table's commit (a folder with no
version: removed, the file still holds every row) or after it (the table holds every row: the
file is removed), by the next writer (``PartitionFiles.is_table``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from indexing import durable, failpoints

SMALL_ROWS = 256  # past this many rows a partition becomes a LanceDB table
SMALL_BYTES = 1 << 20  # ... or past a file this large: what one remember may rewrite
SUFFIX = ".arrow"
_TEMP = ".tmp"


def read(path: Path) -> pa.Table | None:
    """The partition's rows, or None when it has no file (read whole: it is small, and a
    mapped file would keep a purged file's blocks alive under a reader)."""
    try:
        with open(path, "rb", buffering=0) as file:  # not Path.read_bytes: asked once a write
            data = file.readall()
    except FileNotFoundError:
        return None
    return pa.ipc.open_file(pa.py_buffer(data)).read_all()


def encoded(table: pa.Table, *, rows_at_most: int | None = None, bytes_at_most: int | None = None) -> pa.Buffer | None:
    """The file ``table`` makes, or None when it is past the bounds (the partition's rows then
    belong in a table): ``SMALL_ROWS`` and ``SMALL_BYTES`` unless given. Bounded by the file's
    own size: that is what one write rewrites."""
    if table.num_rows > (SMALL_ROWS if rows_at_most is None else rows_at_most):
        return None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    data = sink.getvalue()
    return data if data.size <= (SMALL_BYTES if bytes_at_most is None else bytes_at_most) else None


def write(path: Path, table: pa.Table | pa.Buffer, *, failpoint: str | None = None) -> None:
    """Replace the partition's file by ``table`` (or the file ``encoded`` made of it),
    atomically (the caller holds its write lock). ``failpoint``: hit once the new file is
    written, before it replaces the old one."""
    if isinstance(table, pa.Table):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        table = sink.getvalue()
    temp = temp_of(path)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            durable.write_all(fd, table, failpoint="small:write")  # every byte, or raise: never a short file
            failpoints.hit("small:sync")
            durable.sync(fd)
        finally:
            os.close(fd)
        if failpoint is not None:
            failpoints.hit(failpoint)
    except BaseException:
        remove_temp(path)  # a refused write leaves no copy behind (a kill's is the next writer's)
        raise
    os.replace(temp, path)
    durable.sync_dir(path.parent)


def temp_of(path: Path) -> Path:
    """The temporary file a write of ``path`` goes through (a killed write leaves it)."""
    return path.with_name(path.name + _TEMP)


def remove(path: Path) -> None:
    """The partition's file and any temporary one a killed write left."""
    for name in (path, temp_of(path)):
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass


def remove_temp(path: Path) -> None:
    try:
        os.unlink(temp_of(path))
    except FileNotFoundError:
        pass


def joined(held: pa.Table | None, table: pa.Table) -> pa.Table:
    """The rows held, then the new ones, in the file's schema (no table identity: a small
    partition gets its identity when it becomes a table)."""
    table = table.replace_schema_metadata(None)
    return table if held is None else pa.concat_tables([held, table]).combine_chunks()


def ended(table: pa.Table, id_: str, valid_until: int) -> pa.Table:
    """``table`` with the row ``id_``'s validity ending at ``valid_until``."""
    index = table.schema.get_field_index("valid_until")
    hit = pc.equal(table.column("id"), pa.scalar(id_, pa.string()))
    until = pc.if_else(hit, pa.scalar(int(valid_until), pa.int64()), table.column("valid_until"))
    return table.set_column(index, table.schema.field(index), until)


def without(table: pa.Table, ids: list[str]) -> pa.Table:
    """``table`` less the rows ``ids``."""
    gone = pa.array(list(ids), type=pa.string())
    return table.filter(pc.invert(pc.is_in(table.column("id"), value_set=gone)))


def written_before(table: pa.Table, micros: int) -> list[str]:
    """The ids of the rows created before ``micros``."""
    return table.filter(pc.less(table.column("created_at"), int(micros))).column("id").to_pylist()
