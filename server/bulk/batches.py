"""One import batch, in two steps: check and embed it (``Preparer``), then write it (``Writer``).

The importer runs the two in threads of their own, one batch each at a time and in order, so a
batch is embedded while the one before it is written and the one after it is parsed
(``server.bulk.importer``). Each step only ever touches its own state: the preparer its catalog
connection and its cache of recent vectors, the writer its connection and its counts. An error
in either step stops the import: both then refuse every later batch (``Stopped``), so nothing is
written after a failed batch and the journal still names its vectors for the purge.
"""

from __future__ import annotations

import heapq
import itertools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from indexing import failpoints
from indexing.errors import IndexingError
from indexing.rows import OPEN_END
from server.bulk.journal import Journal, batch_lock
from server.bulk.rows import Row, RowError
from server.catalog import Tx
from server.clock import to_micros
from server.errors import StoreUnavailable
from server.inputs import ERRORS_KEPT
from server.memories import MemoryBook
from server.memories.input import MemoryBatch, new_ids
from server.spaces import partition_key
from server.spaces.registry import Registry

EMBED_CACHE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Prepared:
    """A batch's rows that may be new, as memories ready to write, one batch per space."""

    batches: list[MemoryBatch]
    rows: int  # rows of the batch that reached this point (repeats included)
    mark: int  # the catalog's last memory rowid before the rows were checked
    create: tuple[str, ...] = ()  # spaces the rows name that do not exist yet (--create-spaces)


class Stopped(Exception):
    """A step refused a batch because the import is stopping (an error in another step, or
    the caller gave up): nothing after a failed batch is embedded or written."""


def _stop_on_error(method):
    """Any error in a step stops the import: later batches are refused before they touch
    anything (the journal above all, which still names the failed batch's vectors)."""

    def step(self, *args):
        if self.stop.is_set():
            raise Stopped("the import is stopping")
        try:
            return method(self, *args)
        except BaseException:
            self.stop.set()
            raise

    return step


class Failures:
    """Failed rows: all counted, the ``ERRORS_KEPT`` of the lowest line numbers kept, in line
    order (batches reach here grouped by space, not in the file's order)."""

    def __init__(self) -> None:
        self.count = 0
        self.kept: list[tuple[int, str]] = []

    def add(self, failures: list[tuple[int, str]]) -> None:
        self.count += len(failures)
        if failures:
            self.kept = heapq.nsmallest(ERRORS_KEPT, self.kept + failures)


class Preparer:
    """Step one: sort out failures, refused spaces and rows already present; embed the rest."""

    def __init__(
        self,
        *,
        book: MemoryBook,
        registry: Registry,
        embed: Callable[[list[str]], np.ndarray],
        dimension: int,
        ai: str,
        clock: Callable[[], datetime],
        stop: threading.Event,
        create_spaces: bool = False,
    ) -> None:
        self.stop = stop
        self.book = book
        self.registry = registry
        self.create_spaces = create_spaces
        self.embed = embed
        self.ai = ai
        self.clock = clock
        self.failures = Failures()
        self.cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.cache_size = max(EMBED_CACHE_BYTES // (4 * dimension), 1)
        self.dimension = dimension

    @_stop_on_error
    def __call__(self, items: list[Row | RowError]) -> Prepared:
        groups: dict[str | None, list[Row]] = {}
        failures: list[tuple[int, str]] = []
        for item in items:
            if isinstance(item, RowError):
                failures.append((item.line, item.reason))
            else:
                groups.setdefault(item.space, []).append(item)
        named = [s for s in groups if s is not None]
        # The mark before the spaces are read: a space unknown then has no memory from before the
        # mark, so its rows are checked only by the writer, against what was written since.
        mark = self.book.presence.last_rowid()
        known = self.registry.known(named)  # one read per thousand spaces, however thin the spread
        unknown = tuple(s for s in named if s not in known)
        if not self.create_spaces:
            for missing in unknown:
                reason = f"no space named {missing!r}; give --create-spaces to create it, or esfis space add"
                failures.extend((row.line, reason) for row in groups.pop(missing))
            unknown = ()
        # The rows are written as ``ai``'s: a rule that denies it a space refuses them there, as
        # it refuses its remember (a space of refused rows alone is not created either).
        policies = self.registry.policies()
        for space in list(groups):
            decision = policies.decide(self.ai, space)
            if not decision.allowed:
                where = "personal memories" if space is None else f"space {space!r}"
                reason = f"{self.ai} may not use {where} ({decision.reason})"
                failures.extend((row.line, reason) for row in groups.pop(space))
        unknown = tuple(s for s in unknown if s in groups)
        self.failures.add(failures)
        rows = sum(map(len, groups.values()))
        fresh = {}
        for space, batch in groups.items():
            kept = first_of_each(batch)
            if space not in unknown:
                mask = self.book.presence.absent(space, [r.key for r in kept], [r.digest for r in kept])
                kept = [row for row, new in zip(kept, mask, strict=True) if new]
            fresh[space] = not_written_beside(kept)
        vectors, position = self._vectors([row for batch in fresh.values() for row in batch])
        # Built here, not by the writer: its thread is the import's narrowest stage. One clock
        # reading and one table of times for all the batch's spaces (a thin spread has thousands).
        created_at, micros = to_micros(self.clock()), _Micros()
        ids = iter(new_ids(sum(map(len, fresh.values()))))  # drawn at once, not per space
        batches = [
            self._batch(space, rows, vectors, position, ids=ids, created_at=created_at, micros=micros)
            for space, rows in fresh.items()
            if rows
        ]
        return Prepared(batches, rows, mark, unknown)

    def _vectors(self, rows: list[Row]) -> tuple[np.ndarray, dict[str, int]]:
        """A vector for each distinct text of the rows that came without one, and each digest's
        row in that matrix. The texts not in the cache of recent ones are embedded in one call."""
        texts: dict[str, str] = {}
        for row in rows:
            if row.vector is None:
                texts.setdefault(row.digest, row.text)
        position = {digest: i for i, digest in enumerate(texts)}
        table = np.empty((len(position), self.dimension), dtype=np.float32)
        missing: list[str] = []
        for digest, i in position.items():
            vector = self.cache.get(digest)
            if vector is None:
                missing.append(digest)
            else:
                self.cache.move_to_end(digest)
                table[i] = vector
        if missing:
            try:
                embedded = self.embed([texts[d] for d in missing])
            except IndexingError as exc:
                raise StoreUnavailable(str(exc)) from exc
            rows_of = [position[d] for d in missing]
            table[rows_of] = embedded
            self.cache.update((d, table[position[d]].copy()) for d in missing)  # not views: each would hold its batch
            while len(self.cache) > self.cache_size:
                self.cache.popitem(last=False)
        return table, position

    def _batch(
        self,
        space: str | None,
        rows: list[Row],
        vectors: np.ndarray,
        position: dict[str, int],
        *,
        ids: Iterator[str],
        created_at: int,
        micros: _Micros,
    ) -> MemoryBatch:
        if position:
            matrix = vectors[[position.get(r.digest, 0) if r.vector is None else 0 for r in rows]]
            for i, row in enumerate(rows):
                if row.vector is not None:
                    matrix[i] = row.vector
        else:  # every row brought its own vector
            matrix = np.stack([r.vector for r in rows])  # type: ignore[misc]
        return MemoryBatch(
            space=space,
            ai=self.ai,
            created_at=created_at,
            ids=list(itertools.islice(ids, len(rows))),
            texts=[r.text for r in rows],
            digests=[r.digest for r in rows],
            vectors=matrix,
            valid_from=np.array([micros(r.valid_from) for r in rows], dtype=np.int64),
            valid_until=np.array(
                [OPEN_END if r.valid_until is None else micros(r.valid_until) for r in rows], dtype=np.int64
            ),
            labels=[json.dumps(list(r.labels)) if r.labels else "[]" for r in rows],
            keys=[r.key for r in rows],
            run_ids=[None] * len(rows),
            data=[r.data for r in rows] if any(r.data for r in rows) else None,
        )


IMPORT_TURN = "~imports"  # no partition key starts with "~": the imports' own turn among machines


class Writer:
    """Step two: under the import lock, check again what is present, then write the rest."""

    def __init__(
        self,
        book: MemoryBook,
        *,
        journal: Journal,
        vectors_in: Executor,
        stop: threading.Event,
        registry: Registry | None = None,
    ) -> None:
        self.stop = stop
        self.book = book
        self.registry = registry  # where it creates the spaces a batch names (--create-spaces)
        self.created: list[str] = []  # every space this import created, in order
        self.journal = journal
        self.vectors_in = vectors_in
        self.imported = self.skipped = 0
        self.partitions: dict[str, int] = {}  # every partition this import wrote into: its rows

    @_stop_on_error
    def __call__(self, prepared: Prepared) -> None:
        # This machine's lock, then the turn among machines (a no-op on one machine).
        with batch_lock(self.journal.directory), self.book.store.coordination.writer_turn(IMPORT_TURN):
            # Checked again under the lock, against what was written since the first check:
            # this import's previous batch, or another import running beside it.
            keys = sorted({partition_key(b.space) for b in prepared.batches})
            written = self.book.presence.written_since(prepared.mark, keys)  # one query, however many spaces
            batches = [b.select(not_written(b, written)) for b in prepared.batches]
            batches = [b for b in batches if len(b)]
            created: list[str] = []
            registry = self.registry if prepared.create else None

            def create_spaces(tx: Tx) -> None:
                # In the batch's own transaction, before its rows (and beside its vectors' run,
                # off the writer's path): a batch killed before its commit leaves neither its
                # spaces nor its rows, and the resumed import creates and fills them.
                assert registry is not None
                created.extend(registry.add_many_in(tx, prepared.create)[0])
                failpoints.hit("import:after-spaces")

            self.journal.pending({partition_key(b.space): b.ids for b in batches})
            # One catalog transaction for the batch, however many spaces it spans: a partition
            # costs its own write (side by side on the vectors' threads), never a commit of its own.
            self.book.write_many(
                batches, vectors_in=self.vectors_in, also=create_spaces if registry is not None else None
            )
            self.created.extend(created)  # once committed: a failed batch created nothing
            for batch in batches:
                self.imported += len(batch)
                key = partition_key(batch.space)
                self.partitions[key] = self.partitions.get(key, 0) + len(batch)
            self.journal.committed()
            self.skipped += prepared.rows - sum(map(len, batches))


def not_written(batch: MemoryBatch, written: dict[str, tuple[set[str], set[str]]]) -> list[bool]:
    """For each row of ``batch``: True unless a memory of its space with its key (or, without a
    key, its text) is among ``written``."""
    keys, digests = written.get(partition_key(batch.space), (set(), set()))
    return [(k not in keys) if k is not None else (d not in digests) for k, d in zip(batch.keys, batch.digests)]


class _Micros(dict):
    """``to_micros``, remembered: most rows of a batch share a time (the import's now), most
    often the very same object, found before its hash is computed."""

    last: tuple[datetime, int] | None = None

    def __call__(self, moment: datetime) -> int:
        if self.last is not None and self.last[0] is moment:
            return self.last[1]
        value = self.get(moment)
        if value is None:
            value = self[moment] = to_micros(moment)
        self.last = (moment, value)
        return value


def first_of_each(rows: list[Row]) -> list[Row]:
    """Drop repeats within the batch: of rows with a key, all but the first with that key; of
    rows without one, all but the first with that text."""
    keys: set[str] = set()
    digests: set[str] = set()
    kept = []
    for row in rows:
        seen, mark = (keys, row.key) if row.key is not None else (digests, row.digest)
        if mark in seen:
            continue
        seen.add(mark)
        kept.append(row)
    return kept


def not_written_beside(rows: list[Row]) -> list[Row]:
    """Drop a row without a key whose text a keyed row of the same batch is about to write.
    (Checked after the catalog was asked: a keyed row already present writes nothing, and the
    text then counts as present only if some memory has it.)"""
    written = {row.digest for row in rows if row.key is not None}
    if not written:
        return rows
    return [row for row in rows if row.key is not None or row.digest not in written]
