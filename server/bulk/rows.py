"""Import rows: reading JSON Lines and Parquet, and checking each row on its own.

A row is ``{"text", "space"?, "valid_from"?, "valid_until"?, "labels"?, "key"?, "data"?, "vector"?}``
(``data``: the memory's metadata, checked as a write checks it: ``server.memories.data``).
Each row is judged alone: a bad one becomes a ``RowError`` (its line number and the reason) and
never stops the rest. Unknown fields are refused rather than ignored, so a typo such as
``valid_untill`` cannot quietly import a memory that never expires. A NUL anywhere, and any other
control character outside the text, is the row's error on every catalog (``refuse_controls``).

Readers stream: a JSON Lines file is read a line at a time (a line over ``MAX_LINE_BYTES`` is
that line's error, and is skipped without being held in memory); a Parquet file is read a
record batch at a time, with a vector column turned into one float32 matrix per batch rather
than a million Python lists.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import orjson

from server.clock import parse_time
from server.errors import EsfisError, InvalidInput
from server.labels import check_origins
from server.memories.data import check_data, stored
from server.memories.input import check_text, digest_of
from server.spaces import validate_space_name

FIELDS = frozenset({"text", "space", "valid_from", "valid_until", "labels", "key", "data", "vector"})
# Fields whose strings may hold control characters (a NUL never: each one's own check refuses it).
FREE = frozenset({"text", "vector", "data"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # Unicode's Cc: C0, DEL and C1
MAX_KEY_CHARS = 512
# The longest text (32 KiB, up to 6 bytes a character once JSON-escaped) plus a vector.
MAX_LINE_BYTES = 1024 * 1024


class Row(NamedTuple):
    """A row that passed every check that needs no database.

    A named tuple, not a frozen dataclass: an import makes one per line and a thin spread
    spills and reads back most of them (``server.bulk.grouping``), and a tuple is built and
    unpacked in C (a frozen dataclass's ``__init__`` sets each field through Python).
    """

    line: int
    text: str
    digest: str
    space: str | None
    valid_from: datetime
    valid_until: datetime | None
    labels: tuple[str, ...]
    key: str | None
    data: str | None  # as the catalog stores it (compact JSON), None for none
    vector: np.ndarray | None  # unit length, float32; None: to be embedded (last: ``server.bulk.grouping``)


@dataclass(frozen=True)
class RowError:
    line: int
    reason: str


class LineTooLong:
    """Stands for a line over ``MAX_LINE_BYTES``: its bytes were never kept."""

    def __init__(self, size: int) -> None:
        self.size = size


def check_row(line: int, fields: object, *, now: datetime, dimension: int) -> Row | RowError:
    """Check one row's fields; the space's existence is checked later, once per batch."""
    if not isinstance(fields, Mapping):
        return RowError(line, "a line must be a JSON object")
    if not FIELDS.issuperset(fields):
        unknown = sorted(set(fields) - FIELDS)
        return RowError(line, f"unknown field(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(FIELDS))}")
    try:
        if fields.get("text") is None:
            raise InvalidInput("text is missing", field="text")
        text = check_text(fields["text"])
        space = fields.get("space")
        if space is not None:
            validate_space_name(space)
        valid_from = _time(fields.get("valid_from"), now, "valid_from") or now
        valid_until = _time(fields.get("valid_until"), now, "valid_until")
        if valid_until is not None and valid_until <= valid_from:
            raise InvalidInput("valid_until must be after valid_from", field="valid_until")
        labels = check_origins(fields.get("labels"))
        key = _key(fields.get("key"))
        data = stored(check_data(fields.get("data")))
        vector = _vector(fields.get("vector"), dimension)
        refuse_controls(fields, free=FREE)
    except EsfisError as exc:
        return RowError(line, exc.message)
    return Row(line, text, digest_of(text), space, valid_from, valid_until, labels, key, data, vector)


def refuse_controls(fields: Mapping[str, Any], *, free: frozenset[str] = frozenset({"text", "vector"})) -> None:
    """No field but the text holds a control character, and none a NUL (the text's own check
    refuses that one). PostgreSQL's text refuses a NUL, so one that reached the catalog would
    fail the whole batch; in a key, a label or a time a control character is never data, only a
    way to forge what a terminal shows. A text keeps its tabs and newlines, as a write keeps
    them. Run after the fields' own checks, so their more precise reasons come first."""
    for name, value in fields.items():
        if name not in free:
            _no_controls(value, str(name))


def _no_controls(value: Any, where: str) -> None:
    if isinstance(value, str):
        found = _CONTROL.search(value)
        if found is not None:
            char = found.group()
            what = "a NUL character" if char == "\x00" else f"a control character (U+{ord(char):04X})"
            raise InvalidInput(f"{where} holds {what}", field=where)
    elif isinstance(value, Mapping):
        for name, inner in value.items():
            _no_controls(name, where)  # before the name is shown in a path
            _no_controls(inner, f"{where}.{name}")
    elif isinstance(value, (list, tuple)):
        for n, inner in enumerate(value):
            _no_controls(inner, f"{where}[{n}]")


def _time(value: Any, now: datetime, field: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, (str, datetime)):
        raise InvalidInput(f"{field} must be an ISO 8601 time or a duration such as 7d", field=field)
    return parse_time(value, now=now, field=field)


def _key(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_KEY_CHARS:
        raise InvalidInput(f"key must be a string of 1 to {MAX_KEY_CHARS} characters", field="key")
    if "\x00" in value:  # PostgreSQL's text refuses it: this row's error on every catalog
        raise InvalidInput("key holds a NUL character", field="key")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("key is not valid Unicode (it holds a lone surrogate)", field="key") from None
    return value


def _vector(value: Any, dimension: int) -> np.ndarray | None:
    """A precomputed vector, made unit length (cosine ignores scale; the index assumes unit)."""
    if value is None:
        return None
    try:
        array = (
            value if isinstance(value, np.ndarray) else np.asarray(value) if isinstance(value, (list, tuple)) else None
        )
    except (ValueError, TypeError, OverflowError):  # ragged ([1, [2], 3]) or not numbers at all
        array = None
    if array is None or array.ndim != 1 or array.dtype.kind not in "iuf":  # numbers, not bools or strings
        raise InvalidInput("vector must be a list of numbers", field="vector")
    vector = array.astype(np.float32, copy=False)
    if vector.shape != (dimension,):
        raise InvalidInput(
            f"vector has {vector.shape[0]} dimensions; this store's vectors have {dimension}", field="vector"
        )
    norm = math.sqrt(float(np.dot(vector, vector)))  # np.linalg.norm costs 5 µs a call here
    if not math.isfinite(norm) or norm == 0.0:
        raise InvalidInput("vector must hold finite numbers and not be all zeros", field="vector")
    return vector / norm


# -- JSON Lines ------------------------------------------------------------------------------


def parse_line(line: int, raw: bytes | str | LineTooLong, *, now: datetime, dimension: int) -> Row | RowError | None:
    """One JSON line checked; None for a blank line (ignored, not counted)."""
    if isinstance(raw, LineTooLong):
        return RowError(line, f"line is {raw.size} bytes; the limit is {MAX_LINE_BYTES} bytes")
    if len(raw) > MAX_LINE_BYTES:
        return RowError(line, f"line is {len(raw)} bytes; the limit is {MAX_LINE_BYTES} bytes")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return RowError(line, f"not UTF-8 (byte {exc.start})")
    if not raw.strip():
        return None
    try:
        # orjson first: 5x faster on a line with a 384-float vector (6.6 µs against 33 µs). It
        # is stricter (NaN, Infinity, lone surrogates), so what it refuses goes to the json
        # module, whose answer (and error message) is the one that counts. One difference: it
        # reads an integer past 64 bits as a float (json: an int), so a vector holding one is
        # refused as not finite rather than as not numbers.
        fields = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            # Without its line ending: a line cut short would be "line 2, column 1" after it.
            fields = json.loads(raw.rstrip(b"\r\n" if isinstance(raw, bytes) else "\r\n"))
        except json.JSONDecodeError as exc:
            where = "at the end of the line" if exc.pos >= len(exc.doc) else f"column {exc.colno}"
            return RowError(line, f"invalid JSON: {exc.msg} ({where})")
        except RecursionError:
            return RowError(line, "invalid JSON: nested too deeply")
    return check_row(line, fields, now=now, dimension=dimension)


def read_lines(stream: BinaryIO, max_bytes: int = MAX_LINE_BYTES) -> Iterator[bytes | LineTooLong]:
    """The lines of a binary stream, each held whole only when it is under ``max_bytes``."""
    while True:
        raw = stream.readline(max_bytes + 1)
        if not raw:
            return
        if len(raw) <= max_bytes or raw.endswith(b"\n"):
            yield raw
            continue
        size = len(raw)
        while raw and not raw.endswith(b"\n"):  # drain the rest of the long line
            raw = stream.readline(max_bytes + 1)
            size += len(raw)
        yield LineTooLong(size)


# -- Parquet ---------------------------------------------------------------------------------


def parquet_rows(path: Path, *, batch_size: int) -> tuple[int, Iterator[tuple[int, dict[str, Any]]]]:
    """(row count, rows as (row number, fields)), read one record batch at a time."""
    import pyarrow.parquet as pq

    try:
        # Buffered reads without pre-buffering stream pages even inside one row group; the
        # defaults load a whole row group (a 200k-row group of 384-d vectors: +330 MiB).
        file = pq.ParquetFile(str(path), buffer_size=1 << 20, pre_buffer=False)
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path} is not a readable Parquet file: {exc}", field="file") from None
    names = [n for n in file.schema_arrow.names if not n.startswith("__")]  # pandas' index columns
    unknown = sorted(set(names) - FIELDS)
    if unknown:
        raise InvalidInput(
            f"unknown column(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(FIELDS))}",
            field="file",
        )
    if "text" not in names:
        raise InvalidInput("a Parquet import needs a 'text' column", field="file")

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        number = 0
        for batch in file.iter_batches(batch_size=batch_size, columns=names):
            columns = {n: batch.column(n) for n in names}
            vectors = _vector_column(columns.pop("vector")) if "vector" in columns else None
            plain = {n: c.to_pylist() for n, c in columns.items()}
            for i in range(batch.num_rows):
                number += 1
                fields = {n: values[i] for n, values in plain.items() if values[i] is not None}
                if vectors is not None and vectors[i] is not None:
                    fields["vector"] = vectors[i]
                yield number, fields

    return file.metadata.num_rows, rows()


def _vector_column(column: Any) -> list[Any]:
    """Per row: a float32 array, None, or the raw value (a bad one, judged by ``check_row``)."""
    import pyarrow as pa

    kind = column.type
    fixed = pa.types.is_fixed_size_list(kind)
    if (fixed or pa.types.is_list(kind) or pa.types.is_large_list(kind)) and (
        pa.types.is_floating(kind.value_type) or pa.types.is_integer(kind.value_type)
    ):
        # .values ignores the array's slice; the offsets (or the fixed size) index into it.
        flat = column.values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        if fixed:
            offsets = (np.arange(len(column) + 1) + column.offset) * kind.list_size
        else:
            offsets = column.offsets.to_numpy()
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        return [flat[a:b] if ok else None for a, b, ok in zip(offsets[:-1], offsets[1:], valid)]
    return column.to_pylist()
