"""The PostgreSQL catalog's part of a backup (``server.bulk.backup``): one snapshot that both
``pg_dump`` and the backup's own reads share, and ``pg_restore`` into an empty database.

``Snapshot`` opens a REPEATABLE READ, READ ONLY transaction and exports its snapshot
(``pg_export_snapshot``); ``pg_dump --snapshot`` dumps the catalog's schema as of exactly that
moment while the backup reads, in the same snapshot, which memories the dump names, partition
by partition. Writers go on meanwhile. The binaries come from PATH, else Debian's
``/usr/lib/postgresql/N/bin`` (the newest): ``pg_dump`` must be as new as the server.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from server.catalog.postgres import POSTGRES, _pg, _row_maker
from server.catalog.shared import redacted
from server.errors import InvalidInput, StoreUnavailable


class Snapshot:
    """A read-only view of the catalog at one moment, shared with ``pg_dump``."""

    sql = POSTGRES

    def __init__(self, url: str) -> None:
        try:
            self._conn = psycopg.connect(url, row_factory=_row_maker, application_name="esfis-backup")
            self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            self.id = self._value("SELECT pg_export_snapshot() AS s")
            self.schema = self._value("SELECT current_schema() AS s")
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot read the PostgreSQL catalog at {redacted(url)}: {exc}") from exc

    def _value(self, sql: str) -> str:
        row = self._conn.execute(sql).fetchone()
        assert row is not None  # a SELECT of one function answers one row
        return row["s"]

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._conn.execute(_pg(sql), params).fetchall()

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(_pg(sql), params).fetchone()

    def close(self) -> None:
        self._conn.rollback()
        self._conn.close()


def dump(url: str, snapshot: Snapshot, path: Path) -> None:
    """The catalog's schema, as of ``snapshot``, into ``path`` (pg_dump's custom format)."""
    _run(
        "pg_dump",
        f"--snapshot={snapshot.id}",
        "--format=custom",
        f"--schema={snapshot.schema}",
        "--no-owner",
        "--no-privileges",
        f"--file={path}",
        f"--dbname={url}",
    )


def require_empty(url: str) -> None:
    """Refuse a database that already holds an esfis catalog where ``url`` looks."""
    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT to_regclass('meta')").fetchone()
            present = None if row is None else row[0]
    except psycopg.Error as exc:
        raise StoreUnavailable(f"cannot reach the PostgreSQL catalog at {redacted(url)}: {exc}") from exc
    if present is not None:
        raise InvalidInput(
            f"the catalog at {redacted(url)} is not empty: restore goes into an empty database", field="ESFIS_CATALOG"
        )


def restore_dump(url: str, path: Path) -> None:
    """``path`` into the database ``url`` names, which must hold no catalog yet (the dump makes
    its schema, under the name it had), in one transaction."""
    require_empty(url)
    _run(
        "pg_restore",
        "--no-owner",
        "--no-privileges",
        "--single-transaction",
        "--exit-on-error",
        f"--dbname={url}",
        str(path),
    )


def _run(tool: str, *argv: str) -> None:
    binary = shutil.which(tool)
    if binary is None:
        found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{tool}"), key=lambda p: int(p.parts[-3]))
        binary = str(found[-1]) if found else None
    if binary is None:
        raise StoreUnavailable(
            f"{tool} is not installed: a backup of a PostgreSQL catalog needs PostgreSQL's "
            "client tools (apt-get install postgresql-client)"
        )
    done = subprocess.run([binary, *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise StoreUnavailable(f"{tool} failed: {redacted(done.stderr.strip())[:500]}")
