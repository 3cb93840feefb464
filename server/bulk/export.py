"""``esfis export`` and ``esfis import --restore``: memories as JSON Lines, with their labels,
from one home into another (of any catalog backend).

An export line is one current memory (not forgotten, superseded or expired)::

    {"id", "space", "text", "labels": {"space", "origin", "digest", "run", "from"},
     "valid_from", "valid_until", "created_at", "ai", "data", "vector"?}

``data`` is the memory's metadata (``server.memories.data``), {} for none; a restore checks it
as a write does, and a line without it restores none.

Partitions are read one at a time and in batches, and each batch's catalog rows are read
together, so memory stays bounded whatever the store's size.

**Labels are never widened on the way in.** ``import --restore`` keeps each row's id, writer,
times and labels. A row must carry its labels whole, and nothing else among them:
``labels.space`` equal to ``space`` and ``labels.from`` present, so a line that lost its
``space`` cannot become a personal memory (which would reach every space), and a ``from`` label
(the spaces whose data the writing run carried) comes back with it; ``labels.run`` is null or a
run id of the form esfis makes (``server.barrier.runs``). A NUL in any field, or a control
character in any but the text, is the line's error on every catalog
(``server.bulk.rows.refuse_controls``), and the rest of its batch goes in. The space must exist
in the target home (restore creates none). A row whose id the target already knows (even as
forgotten) is skipped: re-runs add nothing, and a forgotten memory never comes back this way.
Rows without a vector are embedded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, BinaryIO

import numpy as np
import orjson
import pyarrow as pa

from indexing.partitions.store import VectorStore
from indexing.rows import OPEN_END, RowBatch
from server.bulk.journal import batch_lock
from server.bulk.rows import FREE, _vector, read_lines, refuse_controls
from server.catalog import Catalog
from server.clock import from_micros, iso, parse_time, to_micros
from server.errors import EsfisError, InvalidInput, SpaceNotFound
from server.inputs import ERRORS_KEPT
from server.labels import check_origins
from server.memories import MemoryBook
from server.memories.data import check_data, loaded, stored
from server.memories.input import check_id, check_text, digest_of
from server.records import RUN_ID
from server.spaces import partition_key, validate_space_name
from server.spaces.policies import validate_ai
from server.spaces.registry import Registry

BATCH = 4096
LABELS = frozenset({"space", "origin", "digest", "run", "from"})  # what an export writes
Progress = Callable[[int], None]


@dataclass(frozen=True)
class ExportReport:
    memories: int
    partitions: int
    seconds: float


def export(
    catalog: Catalog,
    store: VectorStore,
    out: BinaryIO,
    *,
    now: datetime,
    spaces: list[str] | None = None,
    vectors: bool = False,
    progress: Progress | None = None,
) -> ExportReport:
    """Write every memory current at ``now`` (of ``spaces``, else all; ``personal`` names the
    personal memories) to ``out`` as JSON Lines."""
    started = time.monotonic()
    if spaces:
        known = {r["name"] for r in catalog.all("SELECT name FROM spaces")}
        for name in spaces:
            if name != "personal" and validate_space_name(name, field="space") not in known:
                raise SpaceNotFound(f"no space named {name!r} (esfis space list shows them)")
        keys = [partition_key(None if s == "personal" else s) for s in spaces]
    else:
        keys = [r["key"] for r in catalog.all("SELECT key FROM partitions ORDER BY key")]
    micros, written = to_micros(now), 0
    for key in dict.fromkeys(keys):
        done: set[str] = set()  # this partition's ids written: a read again skips them
        for held in (False, True):
            # Read without a lock first; a forget that deletes files under the read (or rows of
            # the tail) makes it fail, and it is read again with the partition's writers held off.
            try:
                with store.held_still(key) if held else nullcontext():
                    _export_partition(
                        catalog, store, out, key=key, micros=micros, vectors=vectors, done=done, progress=progress
                    )
                break
            except _ReadLost as lost:
                if held:
                    raise lost.error from None
        written += len(done)
    out.flush()
    return ExportReport(written, len(set(keys)), time.monotonic() - started)


def _export_partition(
    catalog: Catalog,
    store: VectorStore,
    out: BinaryIO,
    *,
    key: str,
    micros: int,
    vectors: bool,
    done: set[str],
    progress: Progress | None,
) -> None:
    """Write the partition's memories current at ``micros`` that are not in ``done``, adding
    them; a read of the partition that failed raises ``_ReadLost`` (``out``'s errors are
    raised as they are: what was written cannot be read again)."""
    for batch in _read_lost_on_error(store.stream(key, batch_size=BATCH, with_vectors=vectors)):
        ids = batch.column("id").to_pylist()
        current = {
            r["id"]: r
            for r in catalog.all(
                f"SELECT * FROM memories WHERE id IN (SELECT value FROM {catalog.sql.values}) AND forgotten_at IS NULL "
                "AND superseded_by IS NULL AND (valid_until IS NULL OR valid_until > ?)",
                (json.dumps(ids), micros),
            )
        }
        texts = batch.column("text").to_pylist()
        matrix = (
            batch.column("vector").values.to_numpy(zero_copy_only=False).reshape(len(ids), -1)
            if vectors and ids
            else None
        )
        lines = []
        for n, (id_, text) in enumerate(zip(ids, texts, strict=True)):
            row = current.pop(id_, None)  # once each, whatever the table holds
            if row is None or id_ in done:
                continue
            done.add(id_)
            line: dict[str, Any] = {
                "id": id_,
                "space": row["space"],
                "text": text,
                "labels": {
                    "space": row["space"],
                    "origin": json.loads(row["labels"]),
                    "digest": row["digest"],
                    "run": row["run_id"],
                    "from": json.loads(row["from_spaces"]),
                },
                "valid_from": _iso(row["valid_from"]),
                "valid_until": _iso(row["valid_until"]),
                "created_at": _iso(row["created_at"]),
                "ai": row["ai"],
                "data": loaded(row["data"]),
            }
            if matrix is not None:
                line["vector"] = matrix[n]
            lines.append(orjson.dumps(line, option=orjson.OPT_SERIALIZE_NUMPY))
        if lines:
            out.write(b"\n".join(lines) + b"\n")
            if progress is not None:
                progress(len(lines))


class _ReadLost(Exception):
    """A partition's read failed under a forget (files deleted, tail rows gone): read again."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _read_lost_on_error(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    try:
        yield from batches
    except (OSError, RuntimeError, ValueError) as exc:  # what backup reads again on, too
        raise _ReadLost(exc) from exc


def _iso(micros: int | None) -> str | None:
    return iso(from_micros(micros))


# -- import --restore ------------------------------------------------------------------------


@dataclass(frozen=True)
class Restored:
    """One export row, checked."""

    id: str
    space: str | None
    text: str
    meta: tuple  # as MemoryBook.write_restored takes it
    vector: np.ndarray | None


@dataclass(frozen=True)
class RestoreImportReport:
    imported: int
    skipped: int
    failed: int
    errors: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rows(self) -> int:
        return self.imported + self.skipped + self.failed

    def summary(self) -> str:
        return f"restored {self.imported}, skipped {self.skipped}, failed {self.failed} in {self.seconds:.1f} s"


def check_restored(fields: object, *, now: datetime, dimension: int) -> Restored:
    """One export row, or ``InvalidInput`` naming what is wrong with it."""
    if not isinstance(fields, dict):
        raise InvalidInput("a line must be a JSON object")
    unknown = sorted(
        set(fields)
        - {"id", "space", "text", "labels", "valid_from", "valid_until", "created_at", "ai", "data", "vector"}
    )
    if unknown:
        raise InvalidInput(f"unknown field(s) {', '.join(map(repr, unknown))}")
    id_ = check_id(fields.get("id"))
    space = fields.get("space")
    if space is not None:
        validate_space_name(space)
    labels = fields.get("labels")
    if not isinstance(labels, dict) or "space" not in labels or "from" not in labels:
        raise InvalidInput(
            "labels must be given whole (space, from, …): an export's labels are never dropped", field="labels"
        )
    unknown_labels = sorted(map(str, set(labels) - LABELS))
    if unknown_labels:
        raise InvalidInput(f"unknown label(s) {', '.join(map(repr, unknown_labels))}", field="labels")
    if labels["space"] != space:
        raise InvalidInput(f"labels.space {labels['space']!r} is not the row's space {space!r}", field="labels")
    origin = check_origins(labels.get("origin"), field="labels.origin")
    spread = labels["from"]
    if not isinstance(spread, list):
        raise InvalidInput("labels.from must be a list of spaces", field="labels.from")
    spread = sorted({validate_space_name(s, field="labels.from") for s in spread})
    text = check_text(fields.get("text"))
    digest = digest_of(text)
    if labels.get("digest") not in (None, digest):
        raise InvalidInput("labels.digest is not the sha256 of the text", field="labels.digest")
    run = labels.get("run")
    if run is not None and (not isinstance(run, str) or not RUN_ID.fullmatch(run)):
        raise InvalidInput("labels.run must be null or a run id (run_ and 24 hex digits)", field="labels.run")
    times = {}
    for name in ("created_at", "valid_from", "valid_until"):
        value = fields.get(name)
        if value is None and name != "valid_until":
            raise InvalidInput(f"{name} is missing", field=name)
        times[name] = None if value is None else to_micros(parse_time(value, now=now, field=name))
    until, since = times["valid_until"], times["valid_from"]
    if until is not None and since is not None and until <= since:
        raise InvalidInput("valid_until must be after valid_from", field="valid_until")
    ai = validate_ai(fields.get("ai"))
    vector = _vector(fields.get("vector"), dimension)
    data = check_data(fields.get("data"))
    refuse_controls(fields, free=FREE)
    meta = (
        id_,
        space,
        ai,
        times["created_at"],
        times["valid_from"],
        times["valid_until"],
        digest,
        json.dumps(sorted(origin)),
        run,
        json.dumps(spread),
        stored(data),
    )
    return Restored(id_, space, text, meta, vector)


def import_restore(
    lines: BinaryIO,
    *,
    catalog: Catalog,
    store: VectorStore,
    book: MemoryBook,
    embed: Callable[[list[str]], np.ndarray],
    now: datetime,
    journals,
    progress: Progress | None = None,
) -> RestoreImportReport:
    """Restore export rows into this home, in batches (see the module's docstring)."""
    started = time.monotonic()
    journals.mkdir(parents=True, exist_ok=True)
    registry = Registry(catalog, lambda: now)
    imported = skipped = failed = 0
    errors: list[tuple[int, str]] = []
    for chunk in _chunks(read_lines(lines), BATCH):
        rows: list[Restored] = []
        for number, raw in chunk:
            try:
                if not isinstance(raw, bytes):
                    raise InvalidInput("line is over the size limit")
                if not raw.strip():
                    continue
                try:
                    fields = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    raise InvalidInput(f"invalid JSON: {exc}") from None
                row = check_restored(fields, now=now, dimension=store.dimension)
                if row.space is not None and not registry.exists(row.space):
                    raise InvalidInput(f"no space named {row.space!r}; restore never creates spaces (esfis space add)")
                rows.append(row)
            except EsfisError as exc:
                failed += 1
                if len(errors) < ERRORS_KEPT:
                    errors.append((number, exc.message))
        with batch_lock(journals):  # the check and the write together: two restores add a row once
            known = book.presence.known_ids([r.id for r in rows])
            fresh = list({r.id: r for r in rows if r.id not in known}.values())
            skipped += len(rows) - len(fresh)
            for key, group in _by_partition(fresh):
                missing = [r.text for r in group if r.vector is None]
                embedded = iter(embed(missing)) if missing else iter(())
                vectors = np.stack([r.vector if r.vector is not None else next(embedded) for r in group])
                book.write_restored(
                    key,
                    RowBatch(
                        ids=[r.id for r in group],
                        texts=[r.text for r in group],
                        vectors=vectors.astype(np.float32),
                        created_at=np.array([r.meta[3] for r in group], dtype=np.int64),
                        valid_from=np.array([r.meta[4] for r in group], dtype=np.int64),
                        valid_until=np.array(
                            [OPEN_END if r.meta[5] is None else r.meta[5] for r in group], dtype=np.int64
                        ),
                    ),
                    [r.meta for r in group],
                )
                imported += len(group)
        if progress is not None:
            progress(len(chunk))
    return RestoreImportReport(imported, skipped, failed, errors, round(time.monotonic() - started, 3))


def _chunks(lines: Iterable[Any], size: int) -> Iterator[list[tuple[int, Any]]]:
    chunk: list[tuple[int, Any]] = []
    for number, raw in enumerate(lines, start=1):
        chunk.append((number, raw))
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _by_partition(rows: list[Restored]) -> Iterator[tuple[str, list[Restored]]]:
    groups: dict[str, list[Restored]] = {}
    for row in rows:
        groups.setdefault(partition_key(row.space), []).append(row)
    yield from groups.items()
