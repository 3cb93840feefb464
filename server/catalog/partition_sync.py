"""Partition versions and writer turns in the PostgreSQL catalog: what lets several machines
serve one store (``indexing.partitions.coordination`` says what a store needs of it).

- **Versions.** ``partition_versions`` holds each partition's version, bumped right after a
  write's vectors are committed to Lance, before the write's catalog transaction commits. So a
  server that sees a memory in the catalog also sees a version newer than any image it holds
  without that memory, and reloads: every write, replace and forget made through one server
  applies at every other server's next request. Before each search a server reads the
  partition's version: one indexed read, no file and no object listing.
- **Writer turns.** One writer per partition across machines: a session-level advisory lock
  (``pg_try_advisory_lock``) on this module's own connection, taken around the write and
  released after. Tried in a loop rather than waited on, so a thread waiting for one partition
  never holds the connection that another thread needs to release its own. Lance's commits are
  conditional puts too, so two writers that did meet would not lose a commit; the lock is what
  keeps a forget's purge of unreferenced files from taking another machine's uncommitted ones.
  If this process dies, PostgreSQL ends its session and releases its turns.

The bump does not take the catalog's write lock: an import holds that one while its vectors are
written, and the bump is one row of its own.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from server.catalog.shared import redacted
from server.errors import CatalogUnavailable, Unavailable

TURN_CLASS = 0x6573  # "es": the advisory locks' first key, so partition turns never meet the catalog's
TURN_WAIT_S = 60.0  # a writer waits this long for another machine's write to the partition
TURN_POLL_S = 0.01


class PostgresPartitionSync:
    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._turns = 0  # turns held on the current session
        self._lost_turns = False  # the session ended while it held some: they are gone
        self._conn = self._connect()

    def _connect(self) -> psycopg.Connection:
        try:
            return psycopg.connect(
                self.url,
                autocommit=True,
                application_name="esfis-partitions",
                connect_timeout=10,
                keepalives=1,
                keepalives_idle=30,
                keepalives_interval=10,
            )
        except psycopg.Error as exc:
            raise CatalogUnavailable(f"cannot open the PostgreSQL catalog at {redacted(self.url)}: {exc}") from exc

    def _execute(self, sql: str, params: tuple[Any, ...]) -> Any:
        with self._lock:
            for attempt in (1, 2):
                if self._conn.closed or self._conn.broken:
                    if self._turns:
                        # The turns this process held ended with the old session: another machine
                        # may be writing now, so no write under them may go on as if they held.
                        self._lost_turns = True
                    self._conn = self._connect()
                try:
                    return self._conn.execute(sql, params).fetchone()
                except psycopg.OperationalError as exc:
                    # A session the server ended (a restart) is found out at its first use: once,
                    # on a new session, when this process held no turn on the old one.
                    if attempt == 2 or self._turns or not self._conn.broken:
                        raise CatalogUnavailable(f"the PostgreSQL catalog cannot be reached now: {exc}") from exc
            raise AssertionError("unreachable")

    def _check_turns(self) -> None:
        if self._lost_turns:
            raise CatalogUnavailable(
                "the catalog session holding this write's partition turn was lost; "
                "the write was not acknowledged: try it again"
            )

    def version(self, key: str, *, held: int | None = None) -> str:
        row = self._execute("SELECT version FROM partition_versions WHERE key = %s", (key,))
        return "" if row is None else str(row[0])

    def bump(self, key: str, *, tail_only_since: str = "", held: int | None = None) -> str:
        """Bumped even when the turn was lost (other machines must reload), then refused."""
        row = self._execute(
            "INSERT INTO partition_versions (key, version) VALUES (%s, 1) ON CONFLICT (key) "
            "DO UPDATE SET version = partition_versions.version + 1 RETURNING version",
            (key,),
        )
        self._check_turns()
        return str(row[0])

    @contextmanager
    def writer_turn(self, key: str) -> Iterator[None]:
        ident = (TURN_CLASS, _signed32(zlib.crc32(key.encode())))  # a collision only makes two partitions take turns
        deadline = time.monotonic() + TURN_WAIT_S
        while not self._execute("SELECT pg_try_advisory_lock(%s, %s)", ident)[0]:
            if time.monotonic() > deadline:
                raise Unavailable(f"another server held partition {key!r} for over {TURN_WAIT_S:.0f} s")
            time.sleep(TURN_POLL_S)
        with self._lock:
            self._turns += 1
        try:
            yield
            self._check_turns()
        finally:
            with self._lock:
                self._turns -= 1
                lost, session_turns = self._lost_turns, self._turns
                if lost and not session_turns:
                    self._lost_turns = False  # every turn of the lost session is given up
            if not lost:
                self._execute("SELECT pg_advisory_unlock(%s, %s)", ident)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _signed32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value
