"""The catalog: everything but the texts, behind one contract with two backends.

Spaces, folders, policies, tokens, runs and their trails, grants, the metadata of every memory
(never its text) and the delivery log live in the catalog. The core talks to it only through
the protocols below; ``open_catalog`` picks the backend, in this one place, from the settings:

- SQLite (``server.catalog.sqlite``), the default: one database file in ``ESFIS_HOME``;
- PostgreSQL (``server.catalog.postgres``), when ``ESFIS_CATALOG`` is a ``postgresql://`` URL,
  so that several machines can share one catalog.

The contract both keep:

- ``transaction()`` is a write transaction that holds the catalog's one write lock from its
  first statement: writers take turns, and a check made inside one (is this folder taken? was
  this run sealed?) still holds at its commit. Reads outside a transaction see every commit made
  before they start, in any process. What a long-lived service keeps across requests (the
  token, policies, spaces and folders it reads on every request) it keeps under the *access
  generation* (``server.catalog.access``), which every write to those tables moves, by a trigger,
  in the writing transaction: a change committed before a request's first access read applies
  to it, on every server.
- SQL is written once, for both, with ``?`` placeholders. What the two dialects cannot say
  alike is a ``Dialect`` fragment: a JSON array passed as one parameter (a batch's rows, a list
  of ids) instead of thousands of parameters. Memories have a ``rowid`` that follows the order
  of commits (server.bulk.batches relies on it).
- Rows are read by column name (``row["id"]``) or position.
- ``checkpoint()`` is what a forget asks for once it has cleared a row: no old version of the
  row kept by the backend. SQLite can promise it, PostgreSQL only approaches it (see there).
  ``checkpoint_in_background()`` is a long-lived server's: no request's commit does that upkeep.
- ``reopen()`` is a second connection to the same catalog, for an import's reader and writer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from server.catalog.shared import SCHEMA_VERSION, Dialect
from server.errors import StoreUnavailable
from server.settings import Settings

__all__ = ["SCHEMA_VERSION", "Catalog", "Cursor", "Dialect", "Row", "Tx", "open_catalog", "open_coordination"]

POSTGRES_URL = re.compile(r"postgres(ql)?://", re.IGNORECASE)


class Row(Protocol):
    def __getitem__(self, key: str | int) -> Any: ...

    def keys(self) -> list[str]: ...


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Tx(Protocol):
    """The catalog inside one write transaction."""

    sql: Dialect

    def execute(self, sql: str, params: Any = ()) -> Any: ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any: ...

    def one(self, sql: str, params: Any = ()) -> Any: ...

    def all(self, sql: str, params: Any = ()) -> Any: ...


class Catalog(Protocol):
    """A thread-safe handle on the catalog (one connection, taken in turns)."""

    sql: Dialect

    def transaction(self, *, durable: bool = True) -> AbstractContextManager[Any]:
        """A write transaction. ``durable=False``: committed and seen by every reader, and kept
        when a process is killed, but not flushed to the disk before the commit returns, so a
        power cut or a crash of the machine may lose it (SQLite ``synchronous=NORMAL``,
        PostgreSQL ``synchronous_commit`` off). Only for bookkeeping whose loss weakens no
        promise: rate counters, a recall's delivery record when the run's marks do not grow
        (docs/guarantees.md)."""
        ...

    def bulk(self) -> AbstractContextManager[Any]: ...

    def checkpoint(self) -> bool: ...

    def scrub(self, cleared: Sequence[bytes] | None) -> bool:
        """After writes that cleared values (a forgotten memory's digest and text, a held text;
        None: not known), leave no copy of them in the catalog's files (SQLite: a checkpoint,
        and a rebuild when a page's gap still holds one; PostgreSQL: ``checkpoint``'s VACUUM).
        False when another connection kept it from finishing."""
        ...

    def checkpoint_in_background(self) -> None: ...

    def one(self, sql: str, params: Any = ()) -> Any: ...

    def write_returning(self, sql: str, params: Any = (), *, durable: bool = True) -> Any:
        """One statement that writes and returns rows, atomic by itself (an upsert): SQLite
        takes its write lock as for every write; PostgreSQL runs it alone, under the row locks
        the statement takes, without the write lock a transaction of several statements needs.
        Not a write of the access tables (no ``note_write``). ``durable`` as ``transaction``'s."""
        ...

    def all(self, sql: str, params: Any = ()) -> Any: ...

    def reopen(self) -> Any: ...

    def close(self) -> None: ...


def open_catalog(settings: Settings) -> Catalog:
    """The catalog the settings name: PostgreSQL for a ``postgresql://`` URL, else SQLite in
    ``ESFIS_HOME``. The PostgreSQL driver is imported only then."""
    url = settings.catalog
    if url is None:
        from server.catalog.sqlite import SqliteCatalog

        return SqliteCatalog(settings.catalog_path)
    if not POSTGRES_URL.match(url):
        raise StoreUnavailable("ESFIS_CATALOG must be a postgresql:// URL (unset: SQLite in ESFIS_HOME)")
    from server.catalog.postgres import PostgresCatalog

    return PostgresCatalog(url)


def open_coordination(settings: Settings):
    """How the processes sharing the vector store learn of each other's writes: through the
    PostgreSQL catalog when there is one (several machines; ``server.catalog.partition_sync``), else
    None, the store's token files (one machine, ``indexing.partitions.coordination``)."""
    if settings.catalog is None:
        return None
    from server.catalog.partition_sync import PostgresPartitionSync

    return PostgresPartitionSync(settings.catalog)
