"""Bulk import: rows of JSON Lines (or Parquet, from the CLI) into memories, streamed in batches.

A row is ``{"text", "space"?, "valid_from"?, "valid_until"?, "labels"?, "key"?, "vector"?}``
(``server.bulk.rows`` checks each). No space means personal; a space that does not exist is
that row's error, unless the import was asked to create spaces (``create_spaces``: then each
batch creates the spaces it names, checked as ``space add`` checks them, in its rows' catalog
transaction, and the report lists every one). ``valid_from`` defaults to now and
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
  skipped. The last check runs under a lock with the write, against the rows written since the
  first check, so the batches in flight beside each other, and two imports of the same file at
  once, still add each row once.
- **Kill and re-run.** Each batch's vectors go into each of its spaces' partitions (side by
  side, ``PARTITION_WRITERS`` at once), and its catalog rows, for every space, in one
  transaction that commits only once all those vectors are on disk; what is committed stays,
  the rest is redone by the re-run. A kill between the two leaves vectors no catalog entry names: recall ignores them, and
  the next import purges them (``server.bulk.journal``).
- **Each partition written once.** Rows are grouped by space before they are batched
  (``server.bulk.grouping``): a window of rows in memory, the thin spaces' rows spilled to
  unlinked files in the data folder and read back at the end, so a dump of 100,000 tenants in
  any order writes each tenant's partition about once, not once per row. A space's rows stay in
  the file's order, so the first of two rows with one key is the one imported.
- **Overlapped.** The caller's thread parses and groups; each batch is then checked and
  embedded in one worker thread and written in another, so parsing, embedding and writing run
  at once (the model, LanceDB and SQLite work outside the GIL). Catalog rows go in as one
  statement per batch. ``benchmarks/test_import_throughput.py`` measures the import's own
  cost, the spread of spaces as an axis (the report has it).
- **Bounded memory.** The grouping window (``WINDOW_BYTES``), the batches of the window
  before it still waiting for the workers (two windows at most), at most four batches past
  them at once (one being made, one embedded, one written, one waiting), each of at most
  ``batch_size`` rows (default 4096) and ``BATCH_TEXT_CHARS`` of text, with a vector each; a
  cache of recent vectors (``EMBED_CACHE_BYTES``); one JSON line (≤ 1 MiB) or one Parquet
  record batch, so peak memory grows neither with the file nor with its number of spaces
  (``tests/test_import_scale.py`` asserts the bound; ``scripts/import-scale`` measures it). Two
  malloc arenas (``server.arenas``) keep the worker threads from growing it. A model that embeds
  adds its own memory on top. A Parquet row group is streamed page by page, never loaded whole.
- **Embedding once.** A batch's texts are embedded in one call; identical texts once, and a text
  seen in a recent batch not again. A precomputed ``vector`` (operator imports only; the store's
  dimension; made unit length) skips embedding. On a CPU embedding is the cost: parsing and
  writing hide behind the model (``scripts/import-throughput``). Rows that bring vectors in JSON
  are bound by parsing them; Parquet reads a vector column as one matrix.
- **Operators only.** An import is an operator's act (the CLI on the data folder, or
  ``POST /v1/import`` with an operator token): AI policies do not apply and ``ai`` is recorded as
  the writer. There is no AI import: it would write where an AI's scope never reaches, around
  the façade's checks; agents write one memory at a time through ``Esfis.remember``.

The façade's ``import_jsonl`` and ``import_parquet`` call this; ``esfis import`` (``server.cli.bulk``)
draws the progress bar and prints the report.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from indexing.embedding.embedder import Embedder
from indexing.partitions.store import VectorStore
from server.arenas import limit_malloc_arenas
from server.bulk.batches import Preparer, Writer
from server.bulk.grouping import Batch, Grouping
from server.bulk.journal import Journal
from server.bulk.rows import LineTooLong, Row, RowError, check_row, parse_line
from server.catalog import Catalog
from server.clock import Clock
from server.errors import InvalidInput
from server.faults import DiskRoom
from server.inputs import DEFAULT_BATCH, MAX_BATCH
from server.memories import MemoryBook
from server.metrics import count_import
from server.render import counted
from server.spaces import partition_key
from server.spaces.policies import validate_ai
from server.spaces.registry import Registry

IN_FLIGHT = 2  # batches past parsing at once: one being embedded, one being written


@dataclass(frozen=True)
class ImportReport:
    imported: int
    skipped: int  # already present, or repeated in the input
    failed: int
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line, reason), first ERRORS_KEPT
    seconds: float = 0.0
    rate: float = 0.0  # rows (imported, skipped and failed) per second
    created_spaces: tuple[str, ...] = ()  # with create_spaces: every space the import created

    @property
    def rows(self) -> int:
        return self.imported + self.skipped + self.failed

    def summary(self) -> str:
        created = f", created {counted(len(self.created_spaces), 'space')}" if self.created_spaces else ""
        return (
            f"imported {self.imported}, skipped {self.skipped}, failed {self.failed}{created} "
            f"in {self.seconds:.1f} s ({self.rate:.0f} rows/s)"
        )


# Partitions a batch writes side by side: LanceDB's writes wait on the disk more than on a core,
# so a thin spread (many spaces, a few rows each) gains from more than the machine's cores.
PARTITION_WRITERS = 8


class Stores(Protocol):
    """What an import writes into: the façade's parts (``server.facade.parts.Parts``) are one."""

    @property
    def home(self) -> Path: ...
    @property
    def catalog(self) -> Catalog: ...
    @property
    def store(self) -> VectorStore: ...
    @property
    def embedder(self) -> Embedder: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def room(self) -> DiskRoom: ...


def check_batch_size(batch_size: object) -> int:
    """An import's (or a reindex's) batch size, from 1 to ``MAX_BATCH``."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH:
        raise InvalidInput(f"batch size must be from 1 to {MAX_BATCH}", field="batch_size")
    return batch_size


def import_stream(
    parts: Stores,
    lines: Iterable[bytes | str | LineTooLong],
    *,
    ai: str = "import",
    batch_size: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
    create_spaces: bool = False,
) -> ImportReport:
    """Import JSON Lines. ``progress(n)`` is called as each batch is written, with the lines it
    accounts for (their sum is the file's line count);
    ``create_spaces``: a row naming a space that does not exist creates it (else the row fails)."""
    dimension = parts.store.dimension

    def parsed() -> Iterator[Row | RowError | None]:
        for number, raw in enumerate(lines, start=1):
            if number % 256 == 1:
                now = parts.clock()  # "now" for rows without valid_from; read every 256 rows
            yield parse_line(number, raw, now=now, dimension=dimension)

    return _Importer(parts, ai=ai, batch_size=batch_size, progress=progress, create_spaces=create_spaces).run(parsed())


def import_records(
    parts: Stores,
    records: Iterable[tuple[int, Mapping[str, Any]]],
    *,
    ai: str = "import",
    batch_size: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
    create_spaces: bool = False,
) -> ImportReport:
    """Import rows already split into fields, as ``(row number, fields)`` (Parquet)."""
    dimension = parts.store.dimension

    def parsed() -> Iterator[Row | RowError | None]:
        for count, (number, fields) in enumerate(records):
            if count % 256 == 0:
                now = parts.clock()
            yield check_row(number, fields, now=now, dimension=dimension)

    return _Importer(parts, ai=ai, batch_size=batch_size, progress=progress, create_spaces=create_spaces).run(parsed())


class _Importer:
    """Parses in the caller's thread; each batch is then prepared (checked and embedded) in one
    worker thread and written in another, so parsing, embedding and writing overlap. The
    embedder and the stores release the GIL while they work."""

    def __init__(
        self,
        parts: Stores,
        *,
        ai: str,
        batch_size: int,
        progress: Callable[[int], None] | None,
        create_spaces: bool = False,
    ) -> None:
        validate_ai(ai)
        self.create_spaces = create_spaces
        check_batch_size(batch_size)
        self.parts = parts
        self.ai = ai
        self.batch_size = batch_size
        self.progress = progress
        self.home = parts.home

    def run(self, parsed: Iterator[Row | RowError | None]) -> ImportReport:
        started = time.monotonic()
        limit_malloc_arenas()  # before the workers start: their arenas are the import's growth
        parts = self.parts
        in_flight: deque[tuple[Future, Future, int]] = deque()  # (prepared, written, lines)
        stop = threading.Event()  # set by a step that fails, or here on the way out
        with ExitStack() as cleanup:  # undone in reverse: workers stop before the journal closes
            # The preparer and the writer each have a connection of their own: readers run
            # while the writer's transaction is open (it stays open until the batch's vectors
            # are on disk), where one shared connection would make everyone take turns, a
            # server's requests included.
            reader = parts.catalog.reopen()
            cleanup.callback(reader.close)
            writes = parts.catalog.reopen()
            cleanup.callback(writes.close)
            journal = Journal.open(self.home, parts.catalog, parts.store)
            cleanup.callback(journal.close, parts.catalog, parts.store)
            cleanup.enter_context(writes.bulk())
            # Entered in this order so they stop in the reverse one: the writer first (it may
            # still be waiting on a batch's vectors), the vectors' thread last.
            vectors, preparing, writing = (
                cleanup.enter_context(
                    ThreadPoolExecutor(
                        PARTITION_WRITERS if name == "vectors" else 1, thread_name_prefix=f"esfis-import-{name}"
                    )
                )
                for name in ("vectors", "prepare", "write")
            )
            cleanup.callback(self._abandon, in_flight, stop)
            preparer = Preparer(
                book=MemoryBook(reader, parts.store),
                registry=Registry(reader, parts.clock),
                embed=lambda texts: parts.embedder.embed_documents(texts),  # the model loads only if needed
                dimension=parts.store.dimension,
                ai=self.ai,
                clock=parts.clock,
                stop=stop,
                create_spaces=self.create_spaces,
            )
            writer = Writer(
                MemoryBook(writes, parts.store, room=parts.room),
                journal=journal,
                vectors_in=vectors,
                stop=stop,
                registry=Registry(writes, parts.clock),
            )

            def submit(batch: Batch) -> None:
                prepared = preparing.submit(preparer, batch.items)
                in_flight.append((prepared, writing.submit(lambda: writer(prepared.result())), batch.lines))

            def hand_on(*, all_of_them: bool) -> None:
                """Submit what waits while the workers have room (all of it, waiting as needed,
                before a new window's batches join): parsing goes on beside the writes."""
                while in_flight and in_flight[0][1].done():
                    finish()
                while waiting and (all_of_them or len(in_flight) <= IN_FLIGHT):
                    submit(waiting.popleft())
                    while len(in_flight) > IN_FLIGHT and (all_of_them or in_flight[0][1].done()):
                        finish()

            def finish() -> None:
                _, written, consumed = in_flight.popleft()
                written.result()  # a worker's error is raised here, in the caller's thread
                if self.progress is not None and consumed:
                    self.progress(consumed)

            grouping = Grouping(batch_size=self.batch_size, spill_in=self.home)
            cleanup.callback(grouping.close)
            # A full window hands out a window's batches at once: they wait here and go to the
            # workers as those free up, while parsing fills the next window (two at most).
            waiting: deque[Batch] = deque()
            for item in parsed:
                out = grouping.add(item)
                if out:
                    hand_on(all_of_them=True)
                    waiting.extend(out)
                if waiting:
                    hand_on(all_of_them=False)
            hand_on(all_of_them=True)  # what still waits from the last window, before the rest
            for batch in grouping.finish():
                waiting.append(batch)
                hand_on(all_of_them=True)
            while in_flight:
                finish()
        # The index is built when data is written: each large partition gets its image now,
        # not on its first recall (after the workers stopped, so no batch is still writing).
        # A space this import created holds what the import wrote there (another writer of a
        # brand-new space is rare, and its image is then built at its first recall): a small one
        # is not even opened, so a thin spread pays nothing here.
        created = {partition_key(name) for name in writer.created}
        for key in sorted(writer.partitions):
            parts.store.settle(key, rows=writer.partitions[key] if key in created else None)
        seconds = time.monotonic() - started
        failures = preparer.failures
        rows = writer.imported + writer.skipped + failures.count
        count_import(writer.imported, writer.skipped, failures.count)
        return ImportReport(
            writer.imported,
            writer.skipped,
            failures.count,
            failures.kept,
            round(seconds, 3),
            rows / seconds if seconds else 0.0,
            tuple(writer.created),
        )

    @staticmethod
    def _abandon(in_flight: deque[tuple[Future, Future, int]], stop: threading.Event) -> None:
        """On the way out (done, failed, or interrupted): what has not started never will."""
        stop.set()
        for prepared, written, _ in in_flight:
            written.cancel()
            prepared.cancel()
