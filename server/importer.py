"""Bulk import: rows of JSON Lines (or Parquet, from the CLI) into memories, streamed in batches.

A row is ``{"text", "space"?, "valid_from"?, "valid_until"?, "labels"?, "key"?, "vector"?}``
(``server.import_rows`` checks each). No space means personal; a space that does not exist is
that row's error, because an import never creates spaces. ``valid_from`` defaults to now and
``valid_until`` must come after it (a past interval is allowed: migrations carry history).

What is promised:

- **Per-row errors.** A bad row (invalid JSON, missing text, bad space, bad dates, a vector of
  the wrong dimension, an unknown field) is reported with its line number (1-based, as an
  editor counts; a Parquet row's number) and reason, and the rest goes on. Blank lines are
  ignored. The report keeps the first ``ERRORS_KEPT`` errors; ``failed`` counts them all.
- **Nothing twice.** A row with a ``key`` is present when that key is already imported into the
  same space (table ``import_keys``); a row without one, when a memory of the same text
  (``digest``) that is not forgotten is in the same space. Present rows are ``skipped``, as are
  repeats within the file. An import never updates a memory: a known key with a new text is
  skipped. The last check runs under a lock with the write, so two imports of the same file at
  once still add each row once.
- **Kill and re-run.** Each batch is written per space, vectors first, then the catalog in one
  transaction; what is committed stays, the rest is redone by the re-run. A kill between the
  two leaves vectors no catalog entry names: recall ignores them, and the next import purges
  them (``server.import_journal``).
- **Bounded memory.** One batch is held at a time: at most ``batch_size`` rows of at most 32 KiB
  of text and one vector each (512 rows: ≤ 17 MiB), a cache of recent vectors
  (``EMBED_CACHE_BYTES``), one JSON line (≤ 1 MiB) or one Parquet record batch. The process
  stays under 768 MiB peak RSS whatever the file size: measured 618 MiB at 1M rows with
  precomputed vectors (RSS 389 MiB at 100k, 499 at 500k, 541 at 1M: glibc arenas of LanceDB's
  threads; with ``MALLOC_ARENA_MAX=2`` peak 505 MiB, flat at ~400 MiB from 500k to 1M), 631
  MiB at 1M rows embedded by the HashingEmbedder (``scripts/import-scale``), and asserted at 200k
  rows by ``tests/test_import_scale.py``. A model that embeds adds its own memory on top. A
  Parquet row group is streamed page by page, never loaded whole.
- **Embedding once.** A batch's texts are embedded in one call; identical texts once, and a text
  seen in a recent batch not again. A precomputed ``vector`` (operator imports only; the store's
  dimension; made unit length) skips embedding. Embedding is the cost: on 2,000 LongMemEval user
  turns import ran at 0.96 of raw ``embed_documents`` throughput (40.4 vs 41.9 texts/s on 2 busy
  cores); the same rows with vectors precomputed took 2% of the embedding time
  (``scripts/import-throughput``).
- **Operators only.** An import is an operator's act (the CLI on the data folder, or
  ``POST /v1/import`` with an operator token): AI policies do not apply and ``ai`` is recorded as
  the writer. There is no AI import: it would write where an AI's scope never reaches, around
  the façade's checks; agents write one memory at a time through ``Esfis.remember``.

``esfis import FILE|-``: a progress bar on stderr when stderr is a terminal, the errors on stderr
(``line N: reason``), one summary line on stdout. Exit status 0 when every row was imported or
skipped; when some failed, the error ``BadImportLine`` (exit status 2, like any invalid input)
after everything else was imported. Errors that stop the whole import (unreadable file, store
unavailable) exit as every other CLI error does.
"""

from __future__ import annotations

import os
import sys
import time
from collections import OrderedDict
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from indexing.errors import IndexingError
from server.errors import BadImportLine, InvalidInput, StoreUnavailable
from server.import_journal import Journal, batch_lock
from server.import_rows import Row, RowError, check_row, parquet_rows, parse_line, read_lines
from server.memories import NewMemory, new_id
from server.policies import validate_ai
from server.service import Esfis, open_service
from server.spaces import partition_key

ERRORS_KEPT = 1000
EMBED_CACHE_BYTES = 8 * 1024 * 1024
MAX_BATCH = 8192
_IN_CHUNK = 900  # SQLite parameters per IN (...) list


@dataclass(frozen=True)
class ImportReport:
    imported: int
    skipped: int  # already present, or repeated in the input
    failed: int
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line, reason), first ERRORS_KEPT
    seconds: float = 0.0
    rate: float = 0.0  # rows (imported, skipped and failed) per second

    @property
    def rows(self) -> int:
        return self.imported + self.skipped + self.failed

    def summary(self) -> str:
        return (
            f"imported {self.imported}, skipped {self.skipped}, failed {self.failed} "
            f"in {self.seconds:.1f} s ({self.rate:.0f} rows/s)"
        )


def import_stream(
    service: Esfis,
    lines: Iterable[bytes | str],
    *,
    ai: str = "import",
    batch_size: int = 512,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import JSON Lines. ``progress(n)`` is called after each batch with the lines it consumed."""
    dimension = service.store.dimension

    def parsed() -> Iterator[tuple[int, Row | RowError | None]]:
        for number, raw in enumerate(lines, start=1):
            yield number, parse_line(number, raw, now=service.clock(), dimension=dimension)

    return _Importer(service, ai, batch_size, progress).run(parsed())


def import_records(
    service: Esfis,
    records: Iterable[tuple[int, Mapping[str, Any]]],
    *,
    ai: str = "import",
    batch_size: int = 512,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import rows already split into fields, as ``(row number, fields)`` (Parquet)."""
    dimension = service.store.dimension

    def parsed() -> Iterator[tuple[int, Row | RowError | None]]:
        for number, fields in records:
            yield number, check_row(number, fields, now=service.clock(), dimension=dimension)

    return _Importer(service, ai, batch_size, progress).run(parsed())


class _Importer:
    def __init__(
        self, service: Esfis, ai: str, batch_size: int, progress: Callable[[int], None] | None
    ) -> None:
        validate_ai(ai)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH:
            raise InvalidInput(f"batch size must be from 1 to {MAX_BATCH}", field="batch_size")
        self.service = service
        self.ai = ai
        self.batch_size = batch_size
        self.progress = progress
        self.imported = self.skipped = self.failed = 0
        self.errors: list[tuple[int, str]] = []
        self.cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.cache_size = max(EMBED_CACHE_BYTES // (4 * service.store.dimension), 1)
        self.home = service.catalog.path.parent

    def run(self, parsed: Iterator[tuple[int, Row | RowError | None]]) -> ImportReport:
        started = time.monotonic()
        journal = Journal.open(self.home, self.service.catalog, self.service.store)
        try:
            batch: list[Row | RowError] = []
            consumed = 0
            for _, item in parsed:
                consumed += 1
                if item is not None:
                    batch.append(item)
                if len(batch) >= self.batch_size or consumed >= 4 * self.batch_size:  # blank lines count too
                    self._batch(batch, journal)
                    batch, consumed = [], self._tick(consumed)
            if batch:
                self._batch(batch, journal)
            self._tick(consumed)
        finally:
            journal.close(self.service.catalog, self.service.store)
        seconds = time.monotonic() - started
        rows = self.imported + self.skipped + self.failed
        return ImportReport(
            self.imported, self.skipped, self.failed, self.errors, round(seconds, 3), rows / seconds if seconds else 0.0
        )

    def _tick(self, consumed: int) -> int:
        if self.progress is not None and consumed:
            self.progress(consumed)
        return 0

    def _fail(self, failures: list[tuple[int, str]]) -> None:
        self.failed += len(failures)
        self.errors.extend(sorted(failures)[: max(ERRORS_KEPT - len(self.errors), 0)])

    # -- one batch ----------------------------------------------------------------------------

    def _batch(self, items: list[Row | RowError], journal: Journal) -> None:
        groups: dict[str | None, list[Row]] = {}
        failures: list[tuple[int, str]] = []
        for item in items:
            if isinstance(item, RowError):
                failures.append((item.line, item.reason))
            else:
                groups.setdefault(item.space, []).append(item)
        for space in list(groups):
            reason = self._refusal(space)
            if reason is not None:
                failures.extend((row.line, reason) for row in groups.pop(space))
        self._fail(failures)  # in line order within the batch
        if not groups:
            return
        fresh = {space: self._absent(space, self._first_of_each(rows)) for space, rows in groups.items()}
        vectors = self._vectors([row for rows in fresh.values() for row in rows])
        now = self.service.clock()
        with batch_lock(journal.directory):
            # Checked again under the lock: another import may have written these rows meanwhile.
            todo = {space: self._absent(space, rows) for space, rows in fresh.items()}
            todo = {space: rows for space, rows in todo.items() if rows}
            self.skipped += sum(map(len, groups.values())) - sum(map(len, todo.values()))
            memories = {space: [self._memory(row, vectors, now) for row in rows] for space, rows in todo.items()}
            journal.pending({partition_key(s): [m.id for m in ms] for s, ms in memories.items()})
            for batch in memories.values():
                self.service.book.write(batch)
                self.imported += len(batch)
            journal.committed()

    def _refusal(self, space: str | None) -> str | None:
        """Why no row may go to ``space`` (checked once per batch), or None."""
        if space is not None and not self.service.registry.exists(space):
            return f"no space named {space!r}; an import never creates spaces (esfis space add)"
        return None

    def _first_of_each(self, rows: list[Row]) -> list[Row]:
        """Drop repeats within the batch: the same key, or (without a key) the same text."""
        keys: set[str] = set()
        digests: set[str] = set()
        kept = []
        for row in rows:
            if row.key is not None:
                if row.key in keys:
                    continue
                keys.add(row.key)
            elif row.digest in digests:
                continue
            digests.add(row.digest)
            kept.append(row)
        return kept

    def _absent(self, space: str | None, rows: list[Row]) -> list[Row]:
        """The rows not yet in ``space``: one query for keys, one for texts."""
        partition = partition_key(space)
        keys = self._present(
            "SELECT key AS v FROM import_keys WHERE partition = ? AND key IN ({})",
            partition,
            [r.key for r in rows if r.key is not None],
        )
        digests = self._present(
            "SELECT digest AS v FROM memories WHERE partition = ? AND digest IN ({}) AND forgotten_at IS NULL",
            partition,
            [r.digest for r in rows if r.key is None],
        )
        return [r for r in rows if (r.key not in keys if r.key is not None else r.digest not in digests)]

    def _present(self, sql: str, partition: str, values: list[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(values), _IN_CHUNK):
            chunk = values[start : start + _IN_CHUNK]
            rows = self.service.catalog.all(sql.format(",".join("?" * len(chunk))), (partition, *chunk))
            found.update(r["v"] for r in rows)
        return found

    def _vectors(self, rows: list[Row]) -> dict[str, np.ndarray]:
        """digest → vector for rows without one: each distinct text embedded once, in one call."""
        out: dict[str, np.ndarray] = {}
        missing: dict[str, str] = {}
        for row in rows:
            if row.vector is not None or row.digest in out or row.digest in missing:
                continue
            cached = self.cache.get(row.digest)
            if cached is not None:
                self.cache.move_to_end(row.digest)
                out[row.digest] = cached
            else:
                missing[row.digest] = row.text
        if missing:
            try:
                embedded = self.service.embedder.embed_documents(list(missing.values()))
            except IndexingError as exc:
                raise StoreUnavailable(str(exc)) from exc
            for digest, vector in zip(missing, embedded):
                out[digest] = vector
                self.cache[digest] = vector
            while len(self.cache) > self.cache_size:
                self.cache.popitem(last=False)
        return out

    def _memory(self, row: Row, vectors: dict[str, np.ndarray], now) -> NewMemory:
        return NewMemory(
            id=new_id(),
            space=row.space,
            text=row.text,
            vector=row.vector if row.vector is not None else vectors[row.digest],
            ai=self.ai,
            created_at=now,
            valid_from=row.valid_from,
            valid_until=row.valid_until,
            labels=row.labels,
            key=row.key,
        )


# -- the CLI ---------------------------------------------------------------------------------


def run_cli_import(args) -> None:
    """``esfis import FILE|-``: parsing and printing around ``import_stream``/``import_records``."""
    from tqdm import tqdm

    ai = validate_ai(args.ai or os.environ.get("ESFIS_AI") or "import")
    source = args.file
    fmt = args.format or ("parquet" if Path(source).suffix.lower() in (".parquet", ".pq") else "jsonl")
    if source == "-" and fmt == "parquet":
        raise InvalidInput("Parquet cannot be read from stdin: name the file", field="file")
    if source != "-" and not Path(source).is_file():
        raise InvalidInput(f"no file {source!r}", field="file")
    service = open_service()
    options = dict(ai=ai, batch_size=args.batch_size)
    try:
        if fmt == "parquet":
            total, records = parquet_rows(Path(source), batch_size=args.batch_size)
            with _bar(tqdm, total) as bar:
                report = import_records(service, records, progress=bar.update, **options)
        else:
            stream = open(source, "rb") if source != "-" else nullcontext(sys.stdin.buffer)
            with stream as lines, _bar(tqdm, None) as bar:
                # read_lines marks a line over the limit without keeping it; parse_line reports it.
                report = import_stream(service, read_lines(lines), progress=bar.update, **options)
    finally:
        service.close()
    for line, reason in report.errors:
        print(f"line {line}: {reason}", file=sys.stderr)
    if report.failed > len(report.errors):
        print(f"... and {report.failed - len(report.errors)} more errors", file=sys.stderr)
    print(report.summary())
    if report.failed:
        raise BadImportLine(f"{report.failed} of {report.rows} rows failed (listed above); the rest were imported")


def _bar(tqdm, total: int | None):
    return tqdm(
        total=total, unit=" rows", file=sys.stderr, disable=not sys.stderr.isatty(), dynamic_ncols=True, smoothing=0.1
    )

