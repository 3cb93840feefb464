"""The write journal: what makes a killed remember or replace leave no text behind that no
command can find or forget.

A write goes vectors first, then the catalog (``MemoryBook.write_batch``). A process killed in
between leaves rows in a partition's LanceDB table that no catalog entry names: recall ignores
them, but they hold texts. So each process keeps one journal,
``<ESFIS_HOME>/imports/writes-<pid>-<random>.json``, locked (``flock``) for as long as the process
lives: before a write's vectors, one line names the ids about to be written (``{"partition":
[ids]}``); once no write is in flight the file is emptied. A killed process leaves its journal
unlocked, and the next service to open (or the next import) sweeps it
(``server.bulk.journal.sweep``): ids the catalog does not hold are purged from their partition.

Lines are appended (one ``write`` each), never rewritten in place: writes of several threads
are in flight at once, and a kill mid-update never loses the ids of another's write. A line cut
short by the kill was being written before its vectors were, so it names nothing to purge.
An import keeps its own journal in the same folder (``server.bulk.journal``).

A journal is created under a temporary name and renamed once locked, so a sweep never finds a
live one unlocked.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from indexing import durable

JOURNALS = "imports"  # the folder under ESFIS_HOME (named for the imports, whose journals came first)


def create_locked(directory: Path, prefix: str, *, append: bool = False) -> tuple[int, Path]:
    """A new journal file ``<prefix>-<pid>-<random>.json``, opened and locked before its name
    appears. (``append``: O_APPEND, under which Linux's pwrite ignores its offset.)"""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{prefix}-{os.getpid()}-{secrets.token_hex(4)}"
    tmp = directory / f".{name}.tmp"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | (os.O_APPEND if append else 0), 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    path = directory / f"{name}.json"
    os.rename(tmp, path)
    return fd, path


class WriteJournal:
    """One process's journal of writes in flight, shared by its threads; created on first use."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd: int | None = None
        self._path: Path | None = None
        self._pid = 0
        self._in_flight = 0
        self._kept: dict[tuple[str, tuple[str, ...]], bytes] = {}  # lines of writes whose outcome is not known
        self._lock = threading.Lock()

    @contextmanager
    def writing(self, partition: str, ids: list[str]) -> Iterator[None]:
        """Around a write: its ids are on disk before the block starts."""
        line = (json.dumps({partition: ids}) + "\n").encode()
        with self._lock:
            if self._fd is None or self._pid != os.getpid():  # a forked child keeps a journal of its own
                self._fd, self._path = create_locked(self.directory, "writes", append=True)
                self._pid = os.getpid()
            end = os.lseek(self._fd, 0, os.SEEK_END)
            try:
                durable.write_all(self._fd, line, failpoint="journal:write")
            except OSError:
                os.ftruncate(self._fd, end)  # a line cut short would glue itself to the next one
                raise
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._empty()

    def keep(self, partition: str, ids: list[str]) -> None:
        """Keep a write's line past its end: its catalog commit's outcome is not known (the
        connection was cut under it), so its vectors stay until someone settles it: this
        process (``release``, once it has asked the catalog) or, if it dies first, the sweep."""
        with self._lock:
            self._kept[(partition, tuple(ids))] = (json.dumps({partition: ids}) + "\n").encode()

    def release(self, partition: str, ids: list[str]) -> None:
        """The kept write is settled: its line may go."""
        with self._lock:
            self._kept.pop((partition, tuple(ids)), None)
            if self._in_flight == 0 and self._fd is not None and self._pid == os.getpid():
                self._empty()

    def _empty(self) -> None:
        """Nothing in flight: the file holds only the kept lines (often none), all a sweep need read."""
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        if self._kept:
            durable.write_all(self._fd, b"".join(self._kept.values()))

    def close(self) -> None:
        """Remove the journal (nothing in flight: it names nothing a sweep would purge)."""
        with self._lock:
            if self._fd is not None and self._pid == os.getpid():
                if self._in_flight == 0 and not self._kept and self._path is not None:
                    self._path.unlink(missing_ok=True)  # still locked: no sweep reads it meanwhile
                os.close(self._fd)
            self._fd = None
