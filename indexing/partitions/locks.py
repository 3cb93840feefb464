"""Who may touch a partition when: the locks a store takes, from a thread to a machine.

Four levels, each taken inside the one above it, never the other way round:

- ``in-use.lock``, for as long as a store is open: shared by every open store of a folder,
  exclusive by a reindex, so a reindex never swaps the store under a live process
  (``share_store``).
- ``PartitionLocks.thread(key)``, a re-entrant lock per partition (one of ``THREAD_STRIPES``,
  chosen by the partition's name): a store's threads take turns at one partition's in-memory
  copy (``indexing/partitions/partition.py``) and its files, while other partitions go on, so
  an import writes partitions side by side and a search never waits on another space's write.
  No code holds two partitions at once, so two names sharing a stripe only take turns.
- ``<table>.lock``, per partition, across this machine's processes: one writer at a time holds
  it exclusive (``exclusive``); a reader holds it shared only to retry a load that failed, or to
  hold a partition still (``reading``, ``held_still``).
- the writer turn among machines of a shared store (``Coordination.writer_turn``), taken inside
  this machine's lock by a write (``turn``), which bumps the partition's version as it ends.

A write is ``exclusive`` then ``turn``: the store composes them (``VectorStore._writing``) with
what it does once the turn is given back, still under this machine's lock.
"""

from __future__ import annotations

import fcntl
import os
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from indexing.errors import StoreBusy
from indexing.partitions.coordination import Coordination, LocalCoordination
from indexing.partitions.layout import IN_USE, Layout

# Bounded, whatever the number of partitions: a lock each would grow with the spaces.
THREAD_STRIPES = 256


def share_store(layout: Layout) -> IO[str] | None:
    """A shared lock on ``in-use.lock``, held by the returned file object for as long as the
    store is open (a store the caller drops without closing releases it when collected); None
    for a store in S3, which a reindex does not swap."""
    if layout.location.remote:
        return None
    handle = open(layout.root / IN_USE, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise StoreBusy("a reindex of this store is under way (esfis reindex); try again once it is done") from None
    return handle


@dataclass
class Write:
    """The partition's versions around one write: ``after`` is known once the turn ends.
    ``tail_only``: set by a write that only appended to the partition's tail (``tail.py``)."""

    before: str
    after: str = ""
    tail_only: bool = False


class PartitionLocks:
    """One store's locks on its partitions: its threads', its machine's and the machines' turn."""

    def __init__(self, layout: Layout, coordination: Coordination) -> None:
        self.layout = layout
        self.coordination = coordination
        self._threads = tuple(threading.RLock() for _ in range(THREAD_STRIPES))
        self._held: dict[str, int] = {}  # partition → the fd of its write lock, while held
        self._turns: set[str] = set()  # partitions whose turn among machines is held now
        # Whether the version lies in the lock file itself (a store's own local coordination),
        # which a write then reads and rewrites through the descriptor it holds.
        self._version_in_lock = isinstance(coordination, LocalCoordination) and Path(coordination.folder) == Path(
            layout.location.local
        )

    def thread(self, key: str) -> threading.RLock:
        """The lock this store's threads take to touch the partition (re-entrant)."""
        return self._threads[zlib.crc32(key.encode()) % THREAD_STRIPES]

    def fd(self, key: str) -> int:
        """The file descriptor of the partition's write lock, held by this thread now: an image
        build hands it to its child process, which keeps the lock if this one dies."""
        return self._held[key]

    def in_turn(self, key: str) -> bool:
        """Whether a write of this partition holds the turn among machines now."""
        return key in self._turns

    @contextmanager
    def exclusive(self, key: str) -> Iterator[None]:
        """Hold the partition's write lock on this machine (and the store's thread lock), without
        announcing a write: alone, for an image build, which changes no row."""
        with self.thread(key):
            # Raw os calls: once a partition write (a file object costs more than the lock).
            fd = os.open(self.layout.lock_path(key), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._held[key] = fd
                try:
                    yield
                finally:
                    self._held.pop(key, None)
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    @contextmanager
    def turn(self, key: str) -> Iterator[Write]:
        """Hold the writer turn among machines, inside ``exclusive``: yields the version before
        the write, and bumps it as the turn ends, after a failure too (the table may have
        changed before it)."""
        held = self._held.get(key) if self._version_in_lock else None
        with self.coordination.writer_turn(key):
            self._turns.add(key)
            try:
                write = Write(before=self.coordination.version(key, held=held))
                try:
                    yield write
                finally:
                    since = write.before if write.tail_only else ""
                    write.after = self.coordination.bump(key, tail_only_since=since, held=held)
            finally:
                self._turns.discard(key)

    @contextmanager
    def reading(self, key: str) -> Iterator[None]:
        """Hold the partition's lock shared (writers hold it exclusive)."""
        fd = os.open(self.layout.lock_path(key), os.O_RDONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # releases the lock

    @contextmanager
    def held_still(self, key: str) -> Iterator[None]:
        """Hold the partition still: no write, and no purge of old versions, until the block
        ends. This machine's lock shared; on a shared store the turn among machines as well
        (other machines' writers of this partition wait for it)."""
        with self.reading(key), self.coordination.writer_turn(key):
            yield
