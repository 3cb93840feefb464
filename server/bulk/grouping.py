"""Rows put in order of space before they are written, so an import writes each partition once.

Writing a partition has a cost of its own, whatever it holds (a Lance commit: a data file, a
manifest, the version among machines), so a file whose rows come in any order of space — a
product's dump of 100,000 tenants, a few rows each, round robin — would write each partition as
often as it has rows. ``Grouping`` sits between parsing and the batches:

- **The window.** Parsed rows are held grouped by space, up to ``WINDOW_BYTES`` of them (text,
  vector and the row's own size). An import that fits in the window is written at its end, one
  space after another.
- **A full batch goes at once.** A space whose rows in the window reach ``batch_size`` is
  written now, so rows that come space by space stream through as if there were no window.
- **Dense groups go straight on.** When the window is full, every space holding at least
  ``DENSE_ROWS`` rows there is written now (its batches hold whole groups, a large group split
  at ``batch_size``).
- **Thin groups are spilled.** The other spaces' rows go to one of ``BUCKETS`` files, chosen by
  the space's name, and the window starts again. Once a bucket holds rows, every later row of
  its spaces goes there too: a space's rows are written in the order of the file, so the first
  of two rows with one key (or one text) is still the one imported. At the end each bucket is
  read back, grouped by space and written; a bucket larger than the window is first split again
  by the next bits of the name's hash, so a partition is written once however large the import (up to
  ``MAX_DEPTH`` levels of splitting: some 64³ windows).
- **Spill files hold no name.** Each is a ``TemporaryFile`` in the data folder, unlinked from
  the start: a killed import leaves no file behind (the system frees it), and nothing there is
  a memory until its batch is committed, so the crash guarantees are the batches' own
  (``server.bulk.journal``).

Errors and blank lines do not wait: errors go with the next batch out (``Failures`` keeps the
lowest line numbers, whatever the order they arrive in), and each batch counts the lines it
carries, so progress reaches the file's line count when the last batch is written.
"""

from __future__ import annotations

import itertools
import pickle
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from indexing import failpoints
from server.bulk.rows import Row, RowError

WINDOW_BYTES = 64 * 1024 * 1024  # rows held in memory, grouped by space, before any spills
DENSE_ROWS = 32  # a space with this many rows in a full window is written straight away
BUCKET_BITS = 6
BUCKETS = 1 << BUCKET_BITS  # spill files: each space's spilled rows all go to one
MAX_DEPTH = 3  # a bucket larger than the window is split again, up to 64³ files in all
ROW_BYTES = 640  # a held row's own size (the object, its dates, digest and labels), beside its text
BATCH_TEXT_CHARS = 8 * 1024 * 1024  # a batch closes early once its texts reach this many characters


@dataclass(frozen=True)
class Batch:
    """Rows and errors to prepare and write together, and the input lines they account for."""

    items: list[Row | RowError]
    lines: int


def row_bytes(row: Row) -> int:
    return ROW_BYTES + len(row.text) + len(row.data or "") + (row.vector.nbytes if row.vector is not None else 0)


def bucket_of(space: str | None, *, level: int = 0) -> int:
    """The space's bucket; a split bucket's by the next bits of the same hash (a CRC of two
    names that collide would collide again under any common prefix)."""
    return (zlib.crc32((space or "").encode()) >> (BUCKET_BITS * level)) % BUCKETS


@dataclass
class _Spill:
    """One bucket's file, and the bytes of the rows it holds (as the window counts them)."""

    file: IO[bytes]
    bytes: int = 0


# A spilled chunk is written by column: each field's values of every row as one tuple, and the
# vectors as one matrix. Pickle then writes strings and numbers in C, not an object per row
# through its reduce method, and reads them back the same way (a thin spread spills most rows).
Columns = tuple[list[int], tuple[tuple[Any, ...], ...], tuple[list[bool] | None, np.ndarray] | None]


def _by_column(spaces: list[list[Row]]) -> tuple[Columns, int]:
    """Groups of rows as columns, and the bytes they count for in the window."""
    rows = [row for group in spaces for row in group]
    *fields, vectors = zip(*rows)
    present = [vector is not None for vector in vectors]
    matrix: tuple[list[bool] | None, np.ndarray] | None = None
    if all(present):
        matrix = (None, np.stack(vectors))
    elif any(present):
        matrix = (present, np.stack([vector for vector in vectors if vector is not None]))
    texts, data = fields[1], fields[Row._fields.index("data")]
    held = ROW_BYTES * len(rows) + sum(map(len, texts)) + sum(len(d) for d in data if d)
    held += matrix[1].nbytes if matrix is not None else 0
    return ([len(group) for group in spaces], tuple(fields), matrix), held


def _by_row(columns: Columns) -> list[list[Row]]:
    """``_by_column`` undone: the groups, each row as it was."""
    sizes, fields, matrix = columns
    vectors: Iterable[np.ndarray | None]
    if matrix is None:
        vectors = itertools.repeat(None)
    elif matrix[0] is None:
        vectors = matrix[1]  # its rows, one per row
    else:
        stacked = iter(matrix[1])
        vectors = [next(stacked) if has else None for has in matrix[0]]
    rows = list(map(Row._make, zip(*fields, vectors)))
    groups, start = [], 0
    for size in sizes:
        groups.append(rows[start : start + size])
        start += size
    return groups


def _chunks(file: IO[bytes]) -> Iterator[tuple[list[list[Row]], int]]:
    """What ``_spill`` wrote, chunk by chunk from the start: the groups, and their bytes."""
    file.seek(0)
    while True:
        try:
            columns, held = pickle.load(file)
        except EOFError:
            return
        yield _by_row(columns), held


class Grouping:
    """Feed it parsed items (``add``) and then ``finish``; both give the batches ready to write."""

    def __init__(self, *, batch_size: int, spill_in: Path, window_bytes: int | None = None) -> None:
        self.batch_size = batch_size
        self.spill_in = spill_in
        self.window_bytes = WINDOW_BYTES if window_bytes is None else window_bytes
        self.groups: dict[str | None, list[Row]] = {}
        self.held = 0  # bytes of the rows in the window
        self.errors: list[RowError] = []
        self.lines = 0  # lines read and not yet in a batch out: blanks, and the errors held
        self.buckets: dict[int, _Spill] = {}  # bucket → its spill file, once it holds rows
        self.spilled = 0  # rows ever spilled (the report's and the tests' figure)

    def add(self, item: Row | RowError | None) -> list[Batch]:
        if isinstance(item, Row):
            group = self.groups.setdefault(item.space, [])
            group.append(item)
            self.held += row_bytes(item)
            if len(group) >= self.batch_size and bucket_of(item.space) not in self.buckets:
                # A whole batch of one space: as good as a write gets, so out now (rows that
                # come space by space stream through, as if there were no window).
                del self.groups[item.space]
                self.held -= sum(row_bytes(row) for row in group)
                return [self._out(list[Row | RowError](group))]
            return self._make_room() if self.held >= self.window_bytes else []
        self.lines += 1
        if item is not None:
            self.errors.append(item)
        if len(self.errors) >= self.batch_size or self.lines >= 4 * self.batch_size:
            return [self._loose()]  # errors or blank lines alone: out now, so progress moves
        return []

    def finish(self) -> Iterator[Batch]:
        """The rest: the window, then each bucket read back; last, what errors are left."""
        groups, self.groups, self.held = self.groups, {}, 0
        if self.buckets:
            for space, rows in groups.items():
                if bucket_of(space) in self.buckets:
                    self._spill(self.buckets, bucket_of(space), [rows])
            groups = {space: rows for space, rows in groups.items() if bucket_of(space) not in self.buckets}
        yield from self._pack(groups.values())
        for number in sorted(self.buckets):
            yield from self._drain(self.buckets.pop(number), depth=1)
        if self.errors or self.lines:
            yield self._loose()

    def close(self) -> None:
        for spill in self.buckets.values():
            spill.file.close()
        self.buckets.clear()

    def _make_room(self) -> list[Batch]:
        groups, self.groups, self.held = self.groups, {}, 0
        dense: list[list[Row]] = []
        thin: dict[int, list[list[Row]]] = {}
        for space, rows in groups.items():
            number = bucket_of(space)
            if len(rows) >= DENSE_ROWS and number not in self.buckets:
                dense.append(rows)
            else:
                thin.setdefault(number, []).append(rows)
        for number, spaces in thin.items():
            self._spill(self.buckets, number, spaces)
        return list(self._pack(dense))

    def _spill(self, buckets: dict[int, _Spill], number: int, spaces: list[list[Row]]) -> None:
        spill = buckets.get(number)
        if spill is None:
            spill = buckets[number] = _Spill(tempfile.TemporaryFile(prefix="esfis-import-", dir=self.spill_in))
        columns, held = _by_column(spaces)
        pickle.dump((columns, held), spill.file, protocol=pickle.HIGHEST_PROTOCOL)
        spill.bytes += held
        if buckets is self.buckets:
            self.spilled += sum(len(rows) for rows in spaces)
        failpoints.hit("import:after-spill")

    def _drain(self, spill: _Spill, *, depth: int) -> Iterator[Batch]:
        """A bucket's rows back, grouped by space, in the order spilled. A bucket larger than
        the window is first split again (by the next bits of the name's hash), so a space's rows still
        come back together however large the import."""
        with spill.file:
            if spill.bytes > self.window_bytes and depth < MAX_DEPTH:
                smaller: dict[int, _Spill] = {}
                try:
                    for chunk, _ in _chunks(spill.file):
                        parts: dict[int, list[list[Row]]] = {}
                        for rows in chunk:  # a space's rows all go to one part, in their order
                            parts.setdefault(bucket_of(rows[0].space, level=depth), []).append(rows)
                        for number, spaces in parts.items():
                            self._spill(smaller, number, spaces)
                    for number in sorted(smaller):
                        yield from self._drain(smaller.pop(number), depth=depth + 1)
                finally:
                    for rest in smaller.values():
                        rest.file.close()
                return
            groups: dict[str | None, list[Row]] = {}
            held = 0
            for chunk, chunk_bytes in _chunks(spill.file):
                for rows in chunk:
                    groups.setdefault(rows[0].space, []).extend(rows)
                held += chunk_bytes
                if held >= self.window_bytes:
                    yield from self._pack(groups.values())
                    groups, held = {}, 0
            yield from self._pack(groups.values())

    def _pack(self, groups: Iterable[list[Row]]) -> Iterator[Batch]:
        """Whole groups into batches of at most ``batch_size`` rows (a larger group split)."""
        batch: list[Row | RowError] = []
        chars = 0
        for rows in groups:
            for row in rows:
                batch.append(row)
                chars += len(row.text)
                if len(batch) >= self.batch_size or chars >= BATCH_TEXT_CHARS:
                    yield self._out(batch)
                    batch, chars = [], 0
            if batch and len(batch) + DENSE_ROWS > self.batch_size:  # the next group would not fit whole
                yield self._out(batch)
                batch, chars = [], 0
        if batch:
            yield self._out(batch)

    def _out(self, rows: list[Row | RowError]) -> Batch:
        """A batch of rows, with the errors and blank lines read so far."""
        items = [*rows, *self.errors] if self.errors else rows
        lines = len(rows) + self.lines
        self.errors, self.lines = [], 0
        return Batch(items, lines)

    def _loose(self) -> Batch:
        return self._out([])
