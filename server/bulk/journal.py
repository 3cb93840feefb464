"""The import journal: what makes a killed import leave nothing behind but what it committed.

A batch is written vectors first, then the catalog in one transaction (``MemoryBook.write``).
A process killed between the two leaves rows in the partition's LanceDB table that no catalog
entry names. Recall already ignores them (the catalog has the last word on every hit), but
they would take places among a query's candidates and hold texts nobody can forget. So each
import keeps a journal, ``<ESFIS_HOME>/imports/pending-*.json``: before a write it records the
ids about to be written, after the commit it empties the file. The file is locked (``flock``)
for as long as its import lives; the kernel drops the lock when the process dies, however it
dies.

Every import starts with a sweep, and so does every service that opens (``open_service``): a
journal whose lock can be taken belongs to a dead process; its ids that the catalog does not
hold are purged from their partitions, then the journal is removed. A journal cut short by the
kill was being written before any vector was, so it names nothing to purge. The sweep reads the
journals of single writes too (``server.memories.journal``: remember and replace), kept in the
same folder, one line per write.

One lock, ``imports/lock``, is held around each batch's last duplicate check and its writes,
and around the sweep: two imports of the same file at once (a client retrying a slow request)
still add each row once.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from indexing.partitions.store import VectorStore
from server.catalog import Catalog
from server.memories import MemoryBook
from server.memories.journal import create_locked

JOURNAL_GLOBS = ("pending-*.json", "writes-*.json")  # an import's; a process's single writes
ABANDONED_TMP_S = 60
log = logging.getLogger("esfis.store")


class Journal:
    """One import's journal; open it with ``Journal.open`` and close it when done."""

    def __init__(self, directory: Path, fd: int, path: Path) -> None:
        self.directory = directory
        self._fd = fd
        self.path = path

    @classmethod
    def open(cls, home: Path, catalog: Catalog, store: VectorStore) -> Journal:
        directory = home / "imports"
        directory.mkdir(parents=True, exist_ok=True)
        with batch_lock(directory):
            sweep(directory, catalog, store)
            fd, path = create_locked(directory, "pending")  # locked before its name appears
        return cls(directory, fd, path)

    def pending(self, ids_by_partition: dict[str, list[str]]) -> None:
        """Record the ids about to be written (in place: the lock stays on this file)."""
        data = json.dumps(ids_by_partition).encode()
        os.ftruncate(self._fd, 0)
        if os.pwrite(self._fd, data, 0) != len(data):  # a full disk's short write: no batch without its ids
            os.ftruncate(self._fd, 0)
            raise OSError(errno.ENOSPC, "the import's journal could not be written whole")

    def committed(self) -> None:
        os.ftruncate(self._fd, 0)

    def close(self, catalog: Catalog, store: VectorStore) -> None:
        """Purge anything this import left half-written (an exception mid-batch), then remove."""
        try:
            with batch_lock(self.directory):
                purge_orphans(_read(self._fd), catalog, store)
                self.path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)


@contextmanager
def batch_lock(directory: Path) -> Iterator[None]:
    fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def sweep(directory: Path, catalog: Catalog, store: VectorStore) -> int:
    """Clean up after dead writers (imports, remembers, replaces); returns the number of orphan
    rows purged. Journals of live processes are locked and left alone."""
    purged = 0
    if not directory.is_dir():
        return 0
    for path in directory.glob(".*.tmp"):  # killed while creating a journal: it names nothing
        try:  # (a young one may be a live process's, between its creation and its lock)
            if time.time() - path.stat().st_mtime > ABANDONED_TMP_S:
                path.unlink()
        except FileNotFoundError:
            pass
    for path in sorted(p for pattern in JOURNAL_GLOBS for p in directory.glob(pattern)):
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live import
            try:
                purged += purge_orphans(_read(fd), catalog, store)
            except Exception:  # kept for the next sweep; the orphans stay harmless to recall meanwhile
                log.warning("could not purge the orphans %s names", path.name, exc_info=True)
                continue
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return purged


def sweep_every_partition(catalog: Catalog, store: VectorStore, written_before: int) -> tuple[int, int]:
    """Purge, from every partition's table, the rows written before ``written_before``
    (microseconds) that the catalog does not name; returns (rows purged, partitions read).

    This machine's images of tables that no longer exist are removed too. The journals name a
    dead writer's orphans only to the machine that kept them; when a
    machine of a shared store is lost for good, its orphans are found here, by reading every
    table. Rows written since ``written_before`` are left alone: a write in flight puts its
    vectors down just before its catalog rows."""
    purged = 0
    store.remove_stale_images()  # this machine's copies of tables another machine dropped
    partitions = store.partitions()
    for partition in partitions:
        ids = store.ids_written_before(partition, written_before)
        if ids:
            purged += purge_orphans({partition: ids}, catalog, store)
    return purged, len(partitions)


def dead_journals(directory: Path) -> list[tuple[Path, int]]:
    """The journals no live process holds, each with how many ids it names, and the temporary
    files a process killed while creating one left: what the next ``sweep`` settles. Changes
    nothing (a journal's lock is taken and let go at once)."""
    if not directory.is_dir():
        return []
    dead: list[tuple[Path, int]] = []
    for path in sorted(directory.glob(".*.tmp")):
        try:
            if time.time() - path.stat().st_mtime > ABANDONED_TMP_S:
                dead.append((path, 0))
        except FileNotFoundError:
            pass
    for path in sorted(p for pattern in JOURNAL_GLOBS for p in directory.glob(pattern)):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a live process holds its own exclusive
            except BlockingIOError:
                continue  # a live writer's, or one a sweep is settling now
            dead.append((path, sum(len(ids) for ids in _read(fd).values())))
        finally:
            os.close(fd)  # lets the lock go
    return dead


def _read(fd: int) -> dict[str, list[str]]:
    """The ids a journal names, by partition: one JSON object per line (an import's journal is
    one line). A line cut short was being written before its vectors were: it is skipped."""
    size = os.fstat(fd).st_size
    pending: dict[str, list[str]] = {}
    for line in os.pread(fd, size, 0).splitlines() if size else []:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            for partition, ids in data.items():
                if isinstance(partition, str) and isinstance(ids, list):
                    pending.setdefault(partition, []).extend(i for i in ids if isinstance(i, str))
    return pending


def purge_orphans(pending: dict[str, list[str]], catalog: Catalog, store: VectorStore) -> int:
    purged = 0
    book = MemoryBook(catalog, store)
    for partition, ids in pending.items():
        known = book.presence.known_ids(ids)
        orphans = [i for i in ids if i not in known]
        if orphans:
            store.purge(partition, orphans)
            purged += len(orphans)
    return purged
