"""The catalog on PostgreSQL (psycopg 3), for several machines sharing one (``server.catalog``).

Chosen by ``ESFIS_CATALOG=postgresql://…``. The statements are the ones SQLite runs: only the
``?`` placeholders become ``%s`` here (the SQL holds no ``?`` inside a string literal), and the
few fragments SQLite writes otherwise come from ``POSTGRES`` (JSON arrays as one parameter).
The schema is its own (``postgres_schema.py``), versioned in ``meta`` like SQLite's:

- microsecond timestamps and counts are ``BIGINT``; scores ``DOUBLE PRECISION`` (SQLite's REAL);
- every text column sorts by bytes (``COLLATE "C"``), as SQLite's do: ``Registry.subtree``
  finds ``acme/…`` by the range ``acme/`` to ``acme0``, which a locale's collation breaks;
- memories have a ``rowid`` of their own (an identity column: PostgreSQL has no rowid),
  assigned under the write lock and so in the order of commits (its sequence caches one value,
  the default: with more, each connection would take values from a range of its own);
- the ``totals`` row is kept by a plpgsql trigger, as SQLite's triggers keep it.

Writes take turns. SQLite's ``BEGIN IMMEDIATE`` takes the database's write lock before the
first statement, and the core's checks inside a transaction rely on it (a folder not yet
claimed, a run not yet sealed, a space not removed meanwhile). Row locks would not cover rows
that do not exist yet, and SERIALIZABLE would make every caller retry; so each write
transaction first takes one transaction-scoped advisory lock (``WRITE_LOCK``), and the read
committed statements after it see every earlier writer's commit. Reads take no lock.

What a forget leaves: the catalog never holds a text, but a forget's UPDATE leaves the row's
old version (its digest, key and labels) as a dead tuple until VACUUM prunes it, and in the WAL
(and any archive, replica or backup of it) until that is recycled. ``checkpoint`` runs VACUUM
on the tables a forget touches, indexes included, so no row version or index entry holds them
once forget returns (tests/test_forget_purge.py reads every item of every page); but PostgreSQL
does not zero the space a pruned row leaves, so it is not SQLite's guarantee.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import psycopg

from indexing import failpoints
from server.catalog.access import note_write
from server.catalog.postgres_schema import migrate, version
from server.catalog.scrub_rounds import ScrubRounds
from server.catalog.shared import SCHEMA_VERSION, Dialect, redacted
from server.errors import CatalogUnavailable, DiskFull, InvalidInput

POSTGRES = Dialect(
    values="jsonb_array_elements_text(CAST(? AS jsonb))",
    rows="jsonb_array_elements(CAST(? AS jsonb))",
    item_template="CAST(value ->> {i} AS {type})",
    find="strpos",
)
WRITE_LOCK = 0x6573666973  # "esfis": the one advisory lock every write transaction takes first
LOCK_TIMEOUT = "30s"  # as SQLite's busy timeout: a writer waits this long for its turn

FORGET_TABLES = "memories, memory_fields, import_keys, contexts, approvals"  # where a forget clears or removes a row


class PostgresCatalog:
    """A thread-safe handle on a PostgreSQL catalog: one connection, taken in turns."""

    sql = POSTGRES

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.RLock()
        self._writing = 0  # transactions open on this connection (this thread's, under the lock)
        self._scrubs = ScrubRounds(lambda cleared: self.checkpoint())  # one VACUUM at a time
        self._conn = self._connect()
        try:
            if version(self) != SCHEMA_VERSION:  # read without the lock: the usual open writes nothing
                with self.transaction() as tx:  # the write lock: two first opens take turns
                    migrate(tx)
        except BaseException:
            self._conn.close()
            raise

    def _connect(self) -> psycopg.Connection:
        try:
            conn = psycopg.connect(self.url, autocommit=True, row_factory=_row_maker, application_name="esfis")
            conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
        except psycopg.Error as exc:
            raise CatalogUnavailable(f"cannot open the PostgreSQL catalog at {redacted(self.url)}: {exc}") from exc
        return conn

    def _connection(self) -> psycopg.Connection:
        """The connection, made again if the server dropped it (a restart, a failover), so
        esfis need not be restarted."""
        if self._conn.closed or self._conn.broken:
            self._conn = self._connect()
        return self._conn

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """A lost server or a write lock not had in time is the store's unavailability."""
        try:
            yield
        except psycopg.errors.LockNotAvailable as exc:
            raise CatalogUnavailable(f"the catalog's write lock was not free within {LOCK_TIMEOUT}") from exc
        except psycopg.errors.DiskFull as exc:
            raise DiskFull(f"the PostgreSQL catalog's disk is full: the call was refused ({exc})") from exc
        except psycopg.OperationalError as exc:
            # The server went away (a restart, a failover, the network): come back later. A
            # transaction cut here did not commit, or its outcome is not known (a COMMIT cut
            # short): the write path keeps such a write's vectors for the catalog to settle.
            raise CatalogUnavailable(f"the PostgreSQL catalog cannot be reached now: {exc}") from exc
        except psycopg.DataError as exc:
            # PostgreSQL's text cannot hold NUL; SQLite's can, so an input no check caught (a
            # filter, say) must answer as bad input here, never as an internal error.
            if "NUL" in str(exc):
                raise InvalidInput("a value holds a NUL character (0x00), which the catalog cannot hold") from exc
            raise

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[Tx]:
        """A write transaction that takes the write lock (``WRITE_LOCK``) first. ``durable=False``
        (``Catalog.transaction``): its commit does not wait for the WAL's flush."""
        with self._lock, self._guard():
            conn = self._connection()
            self._writing += 1
            try:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                    if not durable:
                        conn.execute("SET LOCAL synchronous_commit TO OFF")
                    yield Tx(conn)
                    failpoints.hit("catalog:commit")
                note_write()
            finally:
                self._writing -= 1

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Nothing to tune: PostgreSQL checkpoints its WAL itself, whatever the writer."""
        yield

    def checkpoint_in_background(self) -> None:
        """Nothing to move off the requests: a commit never copies PostgreSQL's WAL back."""

    def checkpoint(self) -> bool:
        """VACUUM the tables a forget rewrites, so no dead version of a cleared row waits for
        autovacuum (see the module's docstring for what PostgreSQL still keeps). It waits for a
        VACUUM that holds a table (autovacuum gives way to it): skipping that table, as this once
        did, let forget return while the cleared row's old version was still there (a test saw
        it once in a full run). False when the wait passes ``LOCK_TIMEOUT``: the forget is
        finished later."""
        with self._lock:
            try:
                with self._guard():
                    # INDEX_CLEANUP ON: else VACUUM skips the indexes when few rows died (one
                    # forget in a large table), and the digest index would keep the forgotten
                    # digest's prefix. It reads every index of these tables: a forget's cost
                    # grows with the catalog.
                    self._connection().execute(f"VACUUM (INDEX_CLEANUP ON) {FORGET_TABLES}")
            except CatalogUnavailable:
                if self._conn.broken:
                    raise
                return False
        return True

    def scrub(self, cleared: Sequence[bytes] | None) -> bool:
        """``checkpoint``'s VACUUM: PostgreSQL keeps no copy of a pruned version in a live item
        (what it keeps in free space: the module's docstring), whatever was cleared; in rounds
        (``scrub_rounds``): forgets at once share a VACUUM."""
        return self._scrubs(cleared)

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._read(sql, params, lambda cursor: cursor.fetchall())

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._read(sql, params, lambda cursor: cursor.fetchone())

    def _read(self, sql: str, params: Sequence[Any], fetch: Callable[[psycopg.Cursor], Any]) -> Any:
        """A read, tried once more on a new connection when the old one turns out dropped
        (a read can be repeated; a transaction's statements cannot, and are never retried)."""
        with self._lock, self._guard():
            try:
                return fetch(self._connection().execute(_pg(sql), params))
            except psycopg.OperationalError:
                if self._writing or not self._conn.broken:
                    raise
            return fetch(self._connection().execute(_pg(sql), params))

    def write_returning(self, sql: str, params: Sequence[Any] = (), *, durable: bool = True) -> list[Any]:
        """One statement that writes (``Catalog.write_returning``): on this autocommit
        connection, its own transaction, never retried."""
        with self._lock, self._guard():
            conn = self._connection()
            if durable:
                return conn.execute(_pg(sql), params).fetchall()
            with conn.transaction():
                conn.execute("SET LOCAL synchronous_commit TO OFF")
                return conn.execute(_pg(sql), params).fetchall()

    def reopen(self) -> PostgresCatalog:
        return PostgresCatalog(self.url)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class Tx:
    """The connection inside one transaction."""

    sql = POSTGRES

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor:
        return self._conn.execute(_pg(sql), params)

    def script(self, sql: str) -> None:
        """Several statements, without parameters (psycopg then runs them as one)."""
        self._conn.execute(sql)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if rows:
            with self._conn.cursor() as cursor:
                cursor.executemany(_pg(sql), rows)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.execute(sql, params).fetchone()

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self.execute(sql, params).fetchall()


@lru_cache(maxsize=4096)
def _pg(sql: str) -> str:
    """``?`` placeholders as psycopg's; a literal ``%`` escaped."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Row(tuple):
    """A row read by column name, as ``sqlite3.Row`` is, or by position."""

    _names: dict[str, int]

    def __getitem__(self, key):
        return tuple.__getitem__(self, self._names[key] if isinstance(key, str) else key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_maker(cursor: Any):
    names = {column.name: i for i, column in enumerate(cursor.description or ())}

    def make(values: Sequence[Any]) -> _Row:
        row = _Row(values)
        row._names = names
        return row

    return make
