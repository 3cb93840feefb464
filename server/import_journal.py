"""The import journal: what makes a killed import leave nothing behind but what it committed.

A batch is written vectors first, then the catalog in one transaction (``MemoryBook.write``).
A process killed between the two leaves rows in the partition's LanceDB table that no catalog
entry names. Recall already ignores them (the catalog has the last word on every hit), but
they would take places among a query's candidates and hold texts nobody can forget. So each
import keeps a journal, ``<ESFIS_HOME>/imports/pending-*.json``: before a write it records the
ids about to be written, after the commit it empties the file. The file is locked (``flock``)
for as long as its import lives; the kernel drops the lock when the process dies, however it
dies.

Every import starts with a sweep: a journal whose lock can be taken belongs to a dead import;
its ids that the catalog does not hold are purged from their partitions, then the journal is
removed. A journal cut short by the kill was being written before any vector was, so it names
nothing to purge.

One lock, ``imports/lock``, is held around each batch's last duplicate check and its writes,
and around the sweep: two imports of the same file at once (a client retrying a slow request)
still add each row once.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from server.catalog import Catalog
from server.memories import MemoryBook
from indexing.store import VectorStore


class Journal:
    """One import's journal; open it with ``Journal.open`` and close it when done."""

    def __init__(self, directory: Path, fd: int, path: Path) -> None:
        self.directory = directory
        self._fd = fd
        self.path = path

    @classmethod
    def open(cls, home: Path, catalog: Catalog, store: VectorStore) -> "Journal":
        directory = home / "imports"
        directory.mkdir(parents=True, exist_ok=True)
        with batch_lock(directory):
            sweep(directory, catalog, store)
            path = directory / f"pending-{os.getpid()}-{secrets.token_hex(4)}.json"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)  # taken under the batch lock: no sweep sees it unlocked
        return cls(directory, fd, path)

    def pending(self, ids_by_partition: dict[str, list[str]]) -> None:
        """Record the ids about to be written (in place: the lock stays on this file)."""
        data = json.dumps(ids_by_partition).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def committed(self) -> None:
        os.ftruncate(self._fd, 0)

    def close(self, catalog: Catalog, store: VectorStore) -> None:
        """Purge anything this import left half-written (an exception mid-batch), then remove."""
        try:
            with batch_lock(self.directory):
                _purge_orphans(_read(self._fd), catalog, store)
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
    """Clean up after dead imports; returns the number of orphan rows purged."""
    purged = 0
    for path in sorted(directory.glob("pending-*.json")):
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live import
            purged += _purge_orphans(_read(fd), catalog, store)
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return purged


def _read(fd: int) -> dict[str, list[str]]:
    size = os.fstat(fd).st_size
    if not size:
        return {}
    try:
        data = json.loads(os.pread(fd, size, 0))
    except ValueError:
        return {}  # cut short while being written: no vector had been written yet
    return data if isinstance(data, dict) else {}


def _purge_orphans(pending: dict[str, list[str]], catalog: Catalog, store: VectorStore) -> int:
    purged = 0
    book = MemoryBook(catalog, store)
    for partition, ids in pending.items():
        known = book.known_ids(ids)
        orphans = [i for i in ids if i not in known]
        if orphans:
            store.purge(partition, orphans)
            purged += len(orphans)
    return purged
