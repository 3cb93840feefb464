"""Which catalog the tests run on: SQLite in each test's ESFIS_HOME (the default), or, with
``ESFIS_TEST_CATALOG=postgresql``, a real PostgreSQL that this module starts once per session.

Every ESFIS_HOME a test makes gets a catalog of its own: on PostgreSQL a fresh schema of one
database (``catalog_for``), named in the URL's ``search_path``, so a test, a property example
and a subprocess started with that home all see the same catalog and no other. Tests build
their settings with ``settings_for(home)`` and their subprocesses' environment with
``conftest.cli_env``, which carry ``ESFIS_CATALOG``.

The cluster: PostgreSQL's ``initdb`` and ``pg_ctl`` (on PATH, else Debian's
``/usr/lib/postgresql/N/bin``; ``ESFIS_TEST_PG_BIN`` names another folder), in a temporary
folder, listening on 127.0.0.1 at a free port, without durability (fsync off: a test cluster
is thrown away), run as the ``postgres`` user when the tests run as root (``initdb`` refuses
root). ``.ci/run`` installs PostgreSQL when the machine lacks it, as does a run as root here.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import sqlite3
import subprocess
import tempfile
from pathlib import Path

from server.catalog import open_catalog
from server.settings import Settings

BACKEND = os.environ.get("ESFIS_TEST_CATALOG") or "sqlite"
if BACKEND not in ("sqlite", "postgresql"):
    raise RuntimeError(f"ESFIS_TEST_CATALOG must be sqlite or postgresql, not {BACKEND!r}")
DATABASE = "esfis"


class Cluster:
    """A throwaway PostgreSQL cluster, and a fresh schema in it for each catalog asked for."""

    # Without durability: a test cluster is thrown away (a subclass that needs PostgreSQL's own
    # defaults, fsync and synchronous_commit on, sets this to "").
    durability = " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"

    def __init__(self) -> None:
        self.bin = _binaries()
        self.root = Path(tempfile.mkdtemp(prefix="esfis-pg-"))
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self.port = _free_port()
        self._names = itertools.count(1)
        self._admin = None

    def _run(self, *argv: str) -> None:
        command = [*(["runuser", "-u", "postgres", "--"] if self.as_postgres else []), *argv]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed: {done.stdout}{done.stderr}")

    def start(self) -> Cluster:
        import psycopg

        data = self.root / "data"
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(data),
            "--username=postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
        )
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=400{self.durability}"
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(self.root / "log"),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "start",
        )
        self._admin = psycopg.connect(self.url("postgres"), autocommit=True)
        self._admin.execute(f"CREATE DATABASE {DATABASE}")
        self._admin.close()
        self._admin = psycopg.connect(self.url(DATABASE), autocommit=True)
        return self

    def url(self, database: str = DATABASE, schema: str | None = None) -> str:
        path = f"postgresql://postgres@127.0.0.1:{self.port}/{database}"
        return path if schema is None else f"{path}?options=-csearch_path%3D{schema}"

    def new_catalog(self) -> str:
        schema = f"catalog_{next(self._names)}"
        self._admin.execute(f"CREATE SCHEMA {schema}")
        return self.url(schema=schema)

    def database(self, name: str, icu_locale: str) -> str:
        """A database of its own whose default collation is a locale's (ICU), not byte order."""
        self._admin.execute(
            f"CREATE DATABASE {name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '{icu_locale}' LOCALE 'C.UTF-8'"
        )
        return self.url(name)

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


CLUSTER: Cluster | None = None  # started by conftest's session fixture when BACKEND is postgresql
_catalogs: dict[Path, str] = {}


def catalog_for(home: Path) -> str | None:
    """The ESFIS_CATALOG for ``home``: None on SQLite, else its own schema's URL."""
    if BACKEND == "sqlite":
        return None
    assert CLUSTER is not None, "the PostgreSQL cluster starts with the session"
    key = Path(home).absolute()
    if key not in _catalogs:
        _catalogs[key] = CLUSTER.new_catalog()
    return _catalogs[key]


def settings_for(home: Path, **fields) -> Settings:
    """The settings a service on ``home`` is built with, on the backend under test."""
    return Settings(home=Path(home), model=fields.pop("model", None), catalog=catalog_for(home), **fields)


def catalog_rows(home: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows read straight from the catalog of ``home``, as plain tuples (through esfis's own
    connection, on either backend, beside any process that writes)."""
    if BACKEND == "sqlite":  # read-only: never waits for a writer's lock, never migrates
        with sqlite3.connect(f"file:{Path(home) / 'esfis.db'}?mode=ro", uri=True) as conn:
            return conn.execute(sql, params).fetchall()
    catalog = open_catalog(settings_for(home))
    try:
        return [tuple(row) for row in catalog.all(sql, params)]
    finally:
        catalog.close()


def _binaries() -> Path:
    """Where initdb and pg_ctl lie; as root on Debian, PostgreSQL is installed when missing
    (as .ci/run does), so the run fails only where it cannot be had."""
    named = os.environ.get("ESFIS_TEST_PG_BIN")
    if named:
        return Path(named)
    found = _installed()
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "update", "-q"], check=False, capture_output=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-q", "postgresql"], check=False, capture_output=True, timeout=1200)
        found = _installed()
    if found is None:
        raise RuntimeError("ESFIS_TEST_CATALOG=postgresql needs PostgreSQL: apt-get install postgresql (as root)")
    return found


def _installed() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return versions[-1].parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
