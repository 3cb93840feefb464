"""SQLite's catalog reads on a connection of each thread's own, beside the one writer: a read
never waits for another thread's write transaction (and its fsync) to end, sees only what was
committed before it, and a thread inside its own write reads that write. (PostgreSQL's catalog
still shares one connection: docs/serving.md.)"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from server.catalog.sqlite import SqliteCatalog


@pytest.fixture
def catalog(tmp_path: Path):
    opened = SqliteCatalog(tmp_path / "catalog.db")
    yield opened
    opened.close()


def _space(catalog: SqliteCatalog, name: str):
    return catalog.one("SELECT name FROM spaces WHERE name = ?", (name,))


def test_a_read_is_answered_while_another_thread_holds_a_write_open(catalog):
    inside, release = threading.Event(), threading.Event()

    def writer() -> None:
        with catalog.transaction() as tx:
            tx.execute("INSERT INTO spaces (name, created_at) VALUES (?, ?)", ("acme", 1))
            inside.set()
            release.wait(30)

    writing = threading.Thread(target=writer)
    writing.start()
    try:
        assert inside.wait(10)
        read: list[object] = []
        reading = threading.Thread(target=lambda: read.append(_space(catalog, "acme")))
        reading.start()
        reading.join(10)
        assert not reading.is_alive(), "the read waited for the other thread's write to end"
        assert read == [None]  # not committed yet: not seen
    finally:
        release.set()
        writing.join()
    assert _space(catalog, "acme")["name"] == "acme"  # committed: seen by the next read


def test_a_thread_reads_its_own_write_inside_it_and_after_it(catalog):
    with catalog.transaction() as tx:
        tx.execute("INSERT INTO spaces (name, created_at) VALUES (?, ?)", ("globex", 1))
        assert _space(catalog, "globex")["name"] == "globex"  # the catalog's read, inside the write
    assert _space(catalog, "globex")["name"] == "globex"


def test_reads_never_write_and_every_thread_connection_closes_with_the_catalog(tmp_path):
    catalog = SqliteCatalog(tmp_path / "catalog.db")
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(catalog.all("SELECT name FROM spaces"))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [[], [], []] and len(catalog._reader_conns) == 3
    with pytest.raises(Exception, match="readonly|read-only|query_only"):
        catalog.all("INSERT INTO spaces (name, created_at) VALUES ('x', 1) RETURNING name")
    catalog.close()
    assert catalog._reader_conns == []


def test_a_thread_whose_connection_cannot_open_reads_on_the_writers(catalog, monkeypatch):
    with catalog.transaction() as tx:
        tx.execute("INSERT INTO spaces (name, created_at) VALUES (?, ?)", ("acme", 1))

    def no_descriptor_left(*args, **kwargs):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(sqlite3, "connect", no_descriptor_left)
    read: list[object] = []
    reading = threading.Thread(target=lambda: read.append(_space(catalog, "acme")["name"]))
    reading.start()
    reading.join(10)
    assert read == ["acme"] and catalog._reader_conns == []  # answered, and tried again next time
