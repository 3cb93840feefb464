"""The catalog's contract (``server.catalog``), on the backend under test: what one connection
commits, another reads at once; write transactions take turns, and the second sees the first's
commit; rows read by name and by position; a catalog made by a newer esfis is refused; the URL
names the backend. The last tests are PostgreSQL's own (run by the PostgreSQL pass only)."""

from __future__ import annotations

import threading
import time

import pytest

from server.catalog import SCHEMA_VERSION, open_catalog
from server.errors import CatalogUnavailable, StoreUnavailable
from server.settings import Settings
from tests import catalogs
from tests.catalogs import settings_for


@pytest.fixture
def catalog(home):
    opened = open_catalog(settings_for(home))
    yield opened
    opened.close()


def test_a_commit_in_one_connection_is_read_by_another_at_its_next_read(catalog):
    other = catalog.reopen()
    try:
        assert other.one("SELECT name FROM spaces WHERE name = ?", ("acme",)) is None
        with catalog.transaction() as tx:
            tx.execute("INSERT INTO spaces (name, created_at) VALUES (?, ?)", ("acme", 1))
        assert other.one("SELECT name FROM spaces WHERE name = ?", ("acme",))["name"] == "acme"
    finally:
        other.close()


def test_write_transactions_take_turns_and_the_second_sees_the_first(catalog):
    other = catalog.reopen()
    events: list[str] = []
    seen: list[int] = []

    def second() -> None:
        with other.transaction() as tx:
            events.append("second began")
            seen.append(tx.one("SELECT count(*) AS n FROM spaces")["n"])

    try:
        with catalog.transaction() as tx:
            tx.execute("INSERT INTO spaces (name, created_at) VALUES (?, ?)", ("acme", 1))
            waiting = threading.Thread(target=second)
            waiting.start()
            time.sleep(0.5)  # the second writer is waiting for its turn by now
            events.append("first commits")
        waiting.join(timeout=30)
        assert events == ["first commits", "second began"] and seen == [1]
    finally:
        other.close()


def test_rows_are_read_by_column_name_and_by_position(catalog):
    with catalog.transaction() as tx:
        tx.execute("INSERT INTO spaces (name, created_at) VALUES (?, ?)", ("acme", 7))
        [inserted] = tx.all(
            "INSERT INTO deliveries (at, ai, transport, query, limit_, reached, cut) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (1, "cli", "cli", "q", 10, "[]", "{}"),
        )
    row = catalog.one("SELECT name, created_at FROM spaces")
    assert (row["name"], row["created_at"]) == (row[0], row[1]) == ("acme", 7)
    assert list(row.keys()) == ["name", "created_at"]
    assert inserted["id"] == 1


def test_a_rollback_leaves_nothing(catalog):
    with pytest.raises(RuntimeError), catalog.transaction() as tx:
        tx.execute("INSERT INTO spaces (name, created_at) VALUES (?, ?)", ("acme", 1))
        raise RuntimeError("changed my mind")
    assert catalog.all("SELECT name FROM spaces") == []


def test_a_catalog_made_by_a_newer_esfis_is_refused(home, catalog):
    assert catalog.one("SELECT value FROM meta WHERE key = 'schema'")["value"] == str(SCHEMA_VERSION)
    with catalog.transaction() as tx:
        tx.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(StoreUnavailable, match="newer than this esfis"):
        open_catalog(settings_for(home))


def test_the_catalog_url_names_the_backend(tmp_path):
    assert Settings.from_env({"ESFIS_HOME": str(tmp_path)}).catalog is None
    url = "postgresql://esfis@db.internal/esfis"
    assert Settings.from_env({"ESFIS_HOME": str(tmp_path), "ESFIS_CATALOG": url}).catalog == url
    with pytest.raises(StoreUnavailable, match="postgresql://"):
        open_catalog(Settings(home=tmp_path, model=None, catalog="mysql://esfis@db.internal/esfis"))


def test_an_unreachable_postgresql_is_one_clear_error_without_the_password(tmp_path):
    url = "postgresql://esfis:hunter2@127.0.0.1:1/esfis?connect_timeout=2"
    with pytest.raises(CatalogUnavailable, match="cannot open the PostgreSQL catalog") as raised:
        open_catalog(Settings(home=tmp_path, model=None, catalog=url))
    assert "hunter2" not in str(raised.value)
    assert raised.value.status == 503 and raised.value.retry_after  # come back later, never a 500


@pytest.mark.postgresql
def test_a_connection_the_server_dropped_is_made_again_for_the_next_read(catalog):
    other = catalog.reopen()
    try:
        pid = catalog.one("SELECT pg_backend_pid() AS pid")["pid"]
        other.one("SELECT pg_terminate_backend(?) AS done", (pid,))
        time.sleep(0.2)
        assert catalog.one("SELECT pg_backend_pid() AS pid")["pid"] != pid
        with catalog.transaction() as tx:  # and writes go on
            tx.execute("INSERT INTO spaces (name, created_at) VALUES (?, ?)", ("acme", 1))
        assert other.one("SELECT count(*) AS n FROM spaces")["n"] == 1
    finally:
        other.close()


@pytest.mark.postgresql
def test_text_sorts_by_bytes_whatever_the_databases_locale(tmp_path):
    """Registry.subtree finds acme/... between 'acme/' and 'acme0': byte order, as on SQLite,
    in a database whose own collation (ICU en-US) would sort 'Acme' beside 'acme', not first."""
    url = catalogs.CLUSTER.database("esfis_en_us", "en-US")
    catalog = open_catalog(Settings(home=tmp_path, model=None, catalog=url))
    try:
        _sorts_by_bytes(catalog)
    finally:
        catalog.close()


def _sorts_by_bytes(catalog) -> None:
    with catalog.transaction() as tx:
        for name in ("acme", "acme-corp", "acme/platform", "acme2", "Acme"):
            tx.execute("INSERT INTO spaces (name, created_at) VALUES (?, ?)", (name, 1))
    names = [r["name"] for r in catalog.all("SELECT name FROM spaces ORDER BY name")]
    assert names == sorted(names, key=str.encode)
    inside = catalog.all("SELECT name FROM spaces WHERE name > ? AND name < ?", ("acme/", "acme0"))
    assert [r["name"] for r in inside] == ["acme/platform"]
