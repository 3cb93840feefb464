"""Connections for the catalog's reads, so that concurrent requests do not queue behind one
connection (``server.catalog.sqlite``, ``server.catalog.postgres``, ``server.catalog.partition_sync``).

A process once had one catalog connection, taken in turns: every read of every request waited
for the one before it, and for any write transaction open on it (a group commit of delivery
records, a remember, an import batch waiting for its vectors): under load, a large share of a
request thread's time (docs/benchmarks.md has the profile's figures). Reads outside a
transaction, and on PostgreSQL single statements that write alone (a rate counter's upsert),
now take a connection of their own from here: at most ``size``, made when first needed, each
used by one thread at a time. A statement inside a transaction stays on the transaction's
connection, where it sees the transaction's own writes.

Every connection is in autocommit, so each statement reads what was committed before it began,
whichever connection committed it (SQLite's WAL, PostgreSQL's read committed); a connection
that broke (a PostgreSQL restart, a failover) is dropped and a new one made in its place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

READERS = 3  # per catalog handle, besides its writer's connection

C = TypeVar("C")


class Readers(Generic[C]):
    """Up to ``size`` connections from ``connect``, lent one thread at a time; ``broken`` says
    whether a connection must be dropped rather than lent again."""

    def __init__(
        self, connect: Callable[[], C], *, broken: Callable[[C], bool] = lambda conn: False, size: int = READERS
    ) -> None:
        self._connect = connect
        self._broken = broken
        self._size = size
        self._idle: list[C] = []
        self._made = 0
        self._closed = False
        self._free = threading.Condition()

    @contextmanager
    def connection(self) -> Iterator[C]:
        conn = self._take()
        try:
            yield conn
        finally:
            self._give_back(conn)

    def _take(self) -> C:
        with self._free:
            while not self._idle and self._made >= self._size:
                self._free.wait()
            if self._idle:
                conn = self._idle.pop()
                if not self._broken(conn):
                    return conn
                _close(conn)
            else:
                self._made += 1
        try:
            return self._connect()
        except BaseException:
            with self._free:
                self._made -= 1
                self._free.notify()
            raise

    def _give_back(self, conn: C) -> None:
        with self._free:
            if self._closed or self._broken(conn):
                self._made -= 1
                _close(conn)
            else:
                self._idle.append(conn)
            self._free.notify()

    def close(self) -> None:
        with self._free:
            self._closed = True
            idle, self._idle = self._idle, []
            self._made -= len(idle)
        for conn in idle:
            _close(conn)


def _close(conn: object) -> None:
    close = getattr(conn, "close", None)
    if close is not None:
        close()
