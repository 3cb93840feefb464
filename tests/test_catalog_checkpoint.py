"""A server copies the catalog's WAL back into the database from a thread of its own, so no
request's commit waits for the copy; what it wrote still reaches the database file. (SQLite's
WAL: on PostgreSQL, ``checkpoint_in_background`` has nothing to do.)"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from server.catalog.sqlite import SqliteCatalog as Catalog


def _in_database_file(path: Path, space: str) -> bool:
    # immutable=1 reads the database file alone, never the WAL beside it.
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        return conn.execute("SELECT 1 FROM spaces WHERE name = ?", (space,)).fetchone() is not None
    except sqlite3.OperationalError:  # not even the schema has been copied back yet
        return False
    finally:
        conn.close()


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
        while not _in_database_file(path, "s299") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _in_database_file(path, "s299"), "the background checkpoint copied the WAL back"
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
