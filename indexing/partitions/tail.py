"""A large partition's newest rows, kept in one file until there are enough to append.

A LanceDB append costs a data file, a transaction and a manifest however few rows it brings:
about 2 ms of CPU, most of what a remember into a large space cost the server. So a partition
that is a LanceDB table keeps the rows written since its last append in ``<table>.tail``, under
the partition's write lock: at most ``TAIL_ROWS`` rows and ``TAIL_BYTES``. The write that would
take it past either bound *folds* it: the tail's rows and its own go to the table in one append,
and the file goes. A batch too large for a tail of its own (an import's) is appended to the
table directly; the tail stays as it was. Local disks only, as small partitions: on S3 every
write is an append.

**Appended, not rewritten.** The file is ``MAGIC``, then frames: a frame is its payload's length,
its rows and its CRC-32, then the CRC-32 of those twelve bytes (``FRAME``), then the payload, an
Arrow IPC message. The first frame is the schema (its metadata carries the tail's id), each later
one a record batch, so the payloads in order are an Arrow IPC stream. A write appends one frame
(``O_APPEND``), every byte of it (a full disk's short write raises, ``indexing.durable``), then
fdatasyncs it: rewriting the file and renaming it over the old one cost a remember a millisecond
and more under load (ext4 writes a file renamed over another back at once). A frame cut short, or a
last frame that fails its CRC, ends the file for a reader: a write under way (its rows count once
the version moves, after it), or one a kill cut; the next writer cuts such an end off before it
appends. Only the end can be cut that way (each writer cuts it before appending), so a writer checks
the last frame's CRC alone, and a frame that fails its CRC with whole frames after it is no write's:
the disk changed it, and reading it raises ``PartitionCorrupt`` rather than take the frames before
it for the whole tail (a fold or a purge would then drop the rows after it). A header that fails its
own checksum is refused the same way, wherever it lies: a kill leaves a header whole or short, never
changed, and a changed length would lead the walk astray, to an end that looks cut (a writer would
then cut the committed frames after it away). Forget and end of validity, rare, rewrite the file
whole into ``<table>.tail.tmp`` and rename it over. A tail of esfis before this (an Arrow IPC file,
``ARROW1``; or frames without a header checksum, ``ESFTAIL1``) is read as such, and rewritten in
this form at its next write.

**A fold cut by a kill.** The tail is first renamed ``<table>.folding``; the append carries the
file's id in its transaction's properties; then the file is removed. A kill leaves the folding
file, and the next writer settles it before anything else, under the lock: when the table's
latest transaction carries the id, the rows are in the table and the file goes; otherwise the
append never committed and the file is the tail again. No other write can come between (each
one settles first).

**Readers take no lock.** A reader reads the tail and the folding file first, then the table,
and takes a row of the files only when the table does not hold its id: racing a fold, a row is
never counted twice, and never missed (the table it opens after the files is at least as new).
A reader that holds the partition in memory, when only the tail moved since (another process
remembered into it), reads the tail alone and takes the rows it gained (``refresh``): a
remember in one worker does not make the others load the whole partition again.

Forget: a purge rewrites the tail without the rows (the rename frees the old file) and removes
a temporary file a killed write left; the folding file is settled before a purge runs.
"""

from __future__ import annotations

import os
import secrets
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from indexing import durable, failpoints
from indexing.errors import PartitionCorrupt
from indexing.partitions import small_file

if TYPE_CHECKING:
    from indexing.partitions.partition import LivePartition

TAIL_ROWS = 256  # a write that would take the tail past this many rows folds it into the table
TAIL_BYTES = 1 << 20  # ... or past a file this large: what one remember may rewrite
SUFFIX = ".tail"
FOLDING = ".folding"
FOLD_ID = "esfis_fold"  # the tail's id: in its schema's metadata, and in the fold's transaction
MAGIC = b"ESFTAIL2"
HEAD = struct.Struct("<III")  # payload bytes, rows, CRC-32 of the payload
FRAME = struct.Struct("<IIII")  # HEAD, then the CRC-32 of HEAD's bytes
MAGIC_V1 = b"ESFTAIL1"  # frames of HEAD alone, no checksum of it: read, and rewritten at the next write
LEGACY = b"ARROW1"  # an Arrow IPC file: the tail as esfis wrote it before frames


def folding_of(tail: Path) -> Path:
    return tail.with_name(tail.name.removesuffix(SUFFIX) + FOLDING)


def read(tail: Path) -> pa.Table | None:
    """The tail's rows (its id in the schema's metadata), or None when there is none."""
    data = _bytes(tail)
    if data is None:
        return None
    if data.startswith(LEGACY):
        return pa.ipc.open_file(pa.py_buffer(data)).read_all()
    return _Frames(data, tail).table()


def id_of(held: pa.Table) -> str:
    metadata = held.schema.metadata or {}
    return metadata.get(FOLD_ID.encode(), b"").decode()


def encoded(table: pa.Table, *, bounded: bool = True) -> bytes | None:
    """The whole file of ``table``'s rows (and its schema's metadata); None when ``bounded`` and
    past the bounds."""
    if bounded and table.num_rows > TAIL_ROWS:
        return None
    chunks = [MAGIC, _frame(table.schema.serialize(), 0)]
    chunks += [_frame(batch.serialize(), batch.num_rows) for batch in table.combine_chunks().to_batches()]
    data = b"".join(chunks)
    return None if bounded and len(data) > TAIL_BYTES else data


def write(tail: Path, table: pa.Table) -> None:
    """Rewrite the tail whole (temporary file, renamed over): a forget, an end of validity. The
    rewritten tail has an id of its own: only appends keep one (``refresh``)."""
    data = encoded(table.replace_schema_metadata({FOLD_ID: secrets.token_hex(8)}), bounded=False)
    assert data is not None
    small_file.write(tail, data)


def append(tail: Path, table: pa.Table, fold: Callable[[pa.Table, str], Any]) -> Any:
    """Under the write lock: ``table``'s rows after the tail's, or, past the bounds, the tail's
    and ``table``'s given to ``fold`` (rows, the tail's id) for one append to the table. What
    ``fold`` returned, or None when the rows stayed in the tail."""
    data = _bytes(tail)
    table = table.replace_schema_metadata(None)
    if data is not None and not data.startswith(LEGACY):
        frames = _Frames(data, tail, last_only=True)  # the end is all a kill can cut
        if frames.end < len(data):  # a write a kill cut short: its frame goes, every frame checked first
            frames = _Frames(data, tail)
            os.truncate(tail, frames.end)
        if (
            frames.current
            and frames.schema_payload is not None
            and frames.schema().remove_metadata().equals(table.schema)
        ):
            added = b"".join(_frame(batch.serialize(), batch.num_rows) for batch in table.to_batches())
            if frames.rows + table.num_rows <= TAIL_ROWS and frames.end + len(added) <= TAIL_BYTES:
                fd = os.open(tail, os.O_WRONLY | os.O_APPEND)  # raw os calls: once a remember
                try:
                    # Every byte, then on disk, or raise (``indexing.durable``): a short frame
                    # that went unnoticed was cut away by the next writer, an acknowledged
                    # remember with it. One that raises is cut by the failed write's purge.
                    durable.write_all(fd, added, failpoint="tail:append")
                    failpoints.hit("tail:sync")
                    durable.sync(fd)
                finally:
                    os.close(fd)
                return None
        held = _Frames(data, tail).table() if frames.schema_payload is not None else None  # every frame checked
    else:
        held = None if data is None else pa.ipc.open_file(pa.py_buffer(data)).read_all()
    rows = small_file.joined(None if held is None else held.replace_schema_metadata(None), table)
    rows = rows.replace_schema_metadata({FOLD_ID: id_of(held) if held is not None else secrets.token_hex(8)})
    whole = encoded(rows)
    if whole is not None:  # a new tail, or one whose form changed: written whole
        small_file.write(tail, whole)
        return None
    if held is None:  # the batch alone is past the bounds: no tail to fold
        if data is not None:
            remove(tail)  # a tail a kill cut before its first frame held nothing
        return fold(table, "")
    folding = folding_of(tail)
    os.replace(tail, folding)
    failpoints.hit("fold:after-rename")
    written = fold(rows, id_of(rows))
    failpoints.hit("fold:after-append")
    os.unlink(folding)
    return written


def _bytes(path: Path) -> bytes | None:
    # Raw os calls: asked once a write (the folding file, nearly always missing).
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        chunks = [os.read(fd, max(size, 1 << 16))]
        while chunks[-1]:  # the file may have grown since the stat
            chunks.append(os.read(fd, 1 << 16))
        return b"".join(chunks)
    finally:
        os.close(fd)


def _frame(payload: pa.Buffer, rows: int) -> bytes:
    data = payload.to_pybytes()
    head = HEAD.pack(len(data), rows, zlib.crc32(data))
    return head + zlib.crc32(head).to_bytes(4, "little") + data


class _Frames:
    """A framed tail's whole frames: the schema's payload, the batches', their rows, and where
    the last whole frame ends (what follows it is a write under way or one a kill cut).
    ``last_only``: the last whole frame's CRC checked alone (a writer's read: only the end can
    have been cut), else every frame's."""

    def __init__(self, data: bytes, path: Path, *, last_only: bool = False) -> None:
        self.schema_payload: bytes | None = None
        self.payloads: list[memoryview] = []
        self.rows = 0
        view = memoryview(data)
        self.current = data.startswith(MAGIC)  # this esfis's frames: an append may add one
        frame = FRAME if self.current else HEAD
        at = self.end = len(MAGIC) if self.current or data.startswith(MAGIC_V1) else 0
        frames: list[tuple[int, int, int, int]] = []  # (header at, payload end, rows, crc)
        while at + frame.size <= len(data):
            if self.current:
                length, rows, crc, head_crc = FRAME.unpack_from(data, at)
                # A whole header is as its write made it (a kill cuts a write's end, never its
                # middle): one that fails its checksum was changed since, and its length
                # cannot be trusted to find where the frames after it begin.
                if zlib.crc32(view[at : at + HEAD.size]) != head_crc:
                    raise PartitionCorrupt(f"{path}: the header of frame {len(frames)} fails its checksum")
            else:
                length, rows, crc = HEAD.unpack_from(data, at)
            stop = at + frame.size + length
            if stop > len(data):
                break
            frames.append((at, stop, rows, crc))
            at = stop
        for n in range(max(len(frames) - 1, 0) if last_only else 0, len(frames)):
            start, stop, _, crc = frames[n]
            if zlib.crc32(view[start + frame.size : stop]) != crc:
                if n < len(frames) - 1:
                    raise PartitionCorrupt(
                        f"{path}: frame {n} of {len(frames)} fails its checksum, with whole frames after it"
                    )
                del frames[n:]  # the last frame: a write a kill cut, as one cut short
        for start, stop, rows, _ in frames:
            payload = view[start + frame.size : stop]
            if self.schema_payload is None:
                self.schema_payload = bytes(payload)
            else:
                self.payloads.append(payload)
                self.rows += rows
            self.end = stop

    def schema(self) -> pa.Schema:
        assert self.schema_payload is not None
        return pa.ipc.read_schema(pa.py_buffer(self.schema_payload))

    def table(self) -> pa.Table | None:
        """The rows, as one chunk; None when not even the schema was written whole."""
        if self.schema_payload is None:
            return None
        stream = pa.py_buffer(b"".join([self.schema_payload, *self.payloads]))
        return pa.ipc.open_stream(stream).read_all().combine_chunks()


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
    file); a temporary file a killed write left, and a frame a kill cut short, go either way."""
    data = _bytes(tail)
    if data is not None and not data.startswith(LEGACY):
        end = _Frames(data, tail).end
        if end < len(data):  # a cut frame may hold a text no reader sees: truncated away
            os.truncate(tail, end)
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
    return seen(tail)[0]


def seen(tail: Path) -> tuple[pa.Table | None, str | None]:
    """``pending``'s rows, and which tail they were: its id, "" when there was none, None when a
    fold was under way (a reader of these rows can never take the tail alone, ``refresh``)."""
    current, folding = read(tail), read(folding_of(tail))
    parts = [held for held in (current, folding) if held is not None]
    rows = pa.concat_tables([p.replace_schema_metadata(None) for p in parts]).combine_chunks() if parts else None
    return rows, None if folding is not None else "" if current is None else id_of(current)


def refresh(tail: Path, part: LivePartition, unmoved: Callable[[], bool]) -> bool:
    """Bring a partition held in memory up to its tail, when every write since it was read only
    appended to the tail (the caller checked: ``coordination.same_table``): the rows the tail
    gained are appended to it. False, ``part`` untouched, whenever that cannot be told for sure
    (no tail: a fold under way or done; another tail than the one it read) or the version moved
    meanwhile (``unmoved()``): the caller then loads the partition whole.

    Why this is enough: a fold renames the tail, appends, removes the file and only then moves
    the version (and the table's generation), so a read between finds no tail; a fold done
    before the read moved the generation. Only appends keep the tail's id: a rewrite (a forget,
    an end of validity) draws a new one, so even one whose writer was killed before it moved
    the version is never taken for an append."""
    if part.tail_id is None:
        return False
    current = read(tail)
    if current is None:
        return False
    tail_id = id_of(current)
    if (part.tail_id and part.tail_id != tail_id) or not unmoved():
        return False
    fresh = [not part.holds(id_) for id_ in current.column("id").to_pylist()]
    part.append_arrow(current.filter(pa.array(fresh, type=pa.bool_())))
    part.tail_id = tail_id
    return True
