"""Partition versions and writer turns in PostgreSQL (``server/catalog/partition_sync.py``), against a
real cluster: one writer per partition across processes, and a turn lost with its session is
never taken for a held one (the write under it fails, and says so)."""

from __future__ import annotations

import psycopg
import pytest

from server.catalog.partition_sync import PostgresPartitionSync
from server.errors import Unavailable
from tests import catalogs
from tests.catalogs import catalog_for

pytestmark = pytest.mark.postgresql


@pytest.fixture
def url(home) -> str:
    from server.catalog import open_catalog
    from tests.catalogs import settings_for

    open_catalog(settings_for(home)).close()  # the schema, partition_versions included
    return catalog_for(home)


def test_versions_change_after_every_bump_and_turns_exclude_each_other(url, monkeypatch):
    a, b = PostgresPartitionSync(url), PostgresPartitionSync(url)
    try:
        assert a.version("space:acme") == ""
        first = a.bump("space:acme")
        assert b.version("space:acme") == first != a.bump("space:acme")
        monkeypatch.setattr("server.catalog.partition_sync.TURN_WAIT_S", 0.3)
        with a.writer_turn("space:acme"):
            with pytest.raises(Unavailable, match="held partition"):
                with b.writer_turn("space:acme"):
                    pass
            with b.writer_turn("space:globex"):  # another partition: its own turn
                pass
        with b.writer_turn("space:acme"):
            pass
    finally:
        a.close()
        b.close()


def test_a_turn_lost_with_its_session_fails_the_write_under_it(url):
    a, b = PostgresPartitionSync(url), PostgresPartitionSync(url)
    admin = psycopg.connect(catalogs.CLUSTER.url(), autocommit=True)
    try:
        with pytest.raises(Unavailable, match="turn was lost"):
            with a.writer_turn("space:acme"):
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'esfis-partitions' AND pid <> pg_backend_pid() "
                    "AND pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory')"
                )
                with pytest.raises(Unavailable):
                    a.version("space:acme")  # the dead session's statement fails
                a.version("space:acme")  # a new session: the turn did not come with it
                with b.writer_turn("space:acme"):  # another process can take it now
                    pass
                a.bump("space:acme")
        with a.writer_turn("space:acme"):  # and a fresh turn works again
            a.bump("space:acme")
    finally:
        admin.close()
        a.close()
        b.close()
