"""A server copies the catalog's WAL back into the database from a thread of its own, so no
request's commit waits for the copy; what it wrote still reaches the database file. (SQLite's
WAL: on PostgreSQL, ``checkpoint_in_background`` has nothing to do.)

The database file is read alone (``immutable=1``) only once no checkpoint can be writing it:
when SQLite's own wal-index says every frame of the WAL was copied back. Read while a
checkpoint copies pages in, the file is half old, half new ("database disk image is malformed").
"""

from __future__ import annotations

import sqlite3
import struct
import subprocess
import sys
import time
from pathlib import Path

from server.catalog.sqlite import SqliteCatalog as Catalog
from tests.helpers import file_bytes


def _in_database_file(path: Path, space: str) -> bool:
    # immutable=1 reads the database file alone, never the WAL beside it.
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        return conn.execute("SELECT 1 FROM spaces WHERE name = ?", (space,)).fetchone() is not None
    except sqlite3.OperationalError:  # not even the schema has been copied back yet
        return False
    finally:
        conn.close()


def _backfilled(path: Path) -> bool:
    """True once a checkpoint has copied every frame of the WAL into the database file, as the
    wal-index records it (sqlite.org/walformat.html, in the machine's byte order): the header's
    ``mxFrame`` (offset 16) is the WAL's last frame, ``nBackfill`` (offset 96) the last one a
    checkpoint copied back, stored only after the copy is written. With both equal, a checkpoint
    has nothing left to write, so the database file stays as it is while it is read."""
    try:
        header = file_bytes(Path(f"{path}-shm"))[:100]
    except subprocess.CalledProcessError:  # no such file yet
        return False
    if len(header) < 100:
        return False
    order = "<" if sys.byteorder == "little" else ">"
    (last,) = struct.unpack_from(f"{order}I", header, 16)
    (copied,) = struct.unpack_from(f"{order}I", header, 96)
    return last > 0 and copied == last


def _write(catalog: Catalog, name: str) -> None:
    with catalog.transaction() as tx:
        tx.execute("INSERT INTO spaces (name, created_at) VALUES (?, 0)", (name,))


def test_a_servers_commits_leave_the_checkpoint_to_its_thread(tmp_path: Path):
    path = tmp_path / "catalog.db"
    catalog = Catalog(path)
    try:
        catalog.checkpoint_in_background(every_s=0.05)
        assert catalog.one("PRAGMA wal_autocheckpoint")[0] == 0  # no commit checkpoints
        for i in range(300):
            _write(catalog, f"s{i}")
        deadline = time.monotonic() + 10
        while not _backfilled(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _backfilled(path), "the background checkpoint copied the whole WAL back"
        assert _in_database_file(path, "s299"), "what the commits wrote is in the database file"
        with catalog.bulk():
            pass
        assert catalog.one("PRAGMA wal_autocheckpoint")[0] == 0  # an import's end keeps it off
    finally:
        catalog.close()


def test_without_the_thread_commits_checkpoint_as_sqlite_does(tmp_path: Path):
    catalog = Catalog(tmp_path / "catalog.db")
    try:
        assert catalog.one("PRAGMA wal_autocheckpoint")[0] == 1000
        assert catalog.checkpoint()  # the schema, copied back
        _write(catalog, "a")
        assert not _in_database_file(tmp_path / "catalog.db", "a")  # still only in the WAL
    finally:
        catalog.close()


def test_under_readers_that_never_let_go_the_wal_is_truncated_past_its_bound(tmp_path: Path, monkeypatch):
    """A PASSIVE checkpoint never shrinks the WAL, and while a reader is always on it SQLite
    never starts it over: under a server's steady load it grew without end and, on a full disk,
    ate the room kept for reads. Past ``WAL_BYTES`` the checkpoint thread truncates it."""
    from server.catalog import sqlite as sqlite_catalog

    monkeypatch.setattr(sqlite_catalog, "WAL_BYTES", 64 << 10)
    path = tmp_path / "catalog.db"
    catalog = Catalog(path)
    wal = Path(f"{path}-wal")
    try:
        catalog.checkpoint_in_background(every_s=0.05)
        largest = 0
        for i in range(600):  # a reader on every step: the WAL is never free to start over
            reader = sqlite3.connect(str(path))
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM spaces").fetchone()
            _write(catalog, f"s{i}")
            reader.close()
            largest = max(largest, wal.stat().st_size)
        deadline = time.monotonic() + 10
        while wal.stat().st_size > 64 << 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert wal.stat().st_size <= 64 << 10, f"the WAL stayed at {wal.stat().st_size} bytes (at most {largest})"
        assert _in_database_file(path, "s599")
    finally:
        catalog.close()
