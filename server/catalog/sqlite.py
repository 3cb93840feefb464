"""The catalog's default backend: one SQLite database (WAL) beside the vectors (``server.catalog``).

It never holds a memory's text: a forgotten text must leave no trace, and SQLite keeps deleted
bytes in free pages. Several processes (``esfis serve``, ``esfis mcp`` per agent, the CLI) share it: WAL lets readers
run beside one writer, writes take the lock up front (``BEGIN IMMEDIATE``) so the busy timeout
applies, and the rows that decide access are kept only under the access generation its
triggers move (``server.catalog.access``), so a policy the CLI adds applies at the next request.

What a forget clears (a digest, labels) must leave no copy behind: ``secure_delete`` zeroes
deleted and overwritten content in its page and in free pages, and ``checkpoint`` copies the WAL
into the database and truncates it, so no old frame keeps the page as it was.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from server.catalog.access import note_write
from server.catalog.shared import (
    ACCESS_TABLES,
    APPROVALS_TABLE,
    OAUTH_TABLES,
    SCHEMA_VERSION,
    V6_COLUMNS,
    V7_COLUMNS,
    V8_COLUMNS,
    Dialect,
    refuse_newer,
)
from server.home import make_private

SQLITE = Dialect(
    values="json_each(?)",
    rows="json_each(?)",
    item_template="json_extract(value, '$[{i}]')",
    find="instr",
)
BULK_CHECKPOINT_PAGES = 65536  # 256 MiB of 4 KiB pages
BACKGROUND_CHECKPOINT_S = 1.0  # a server's checkpoint thread: how often it copies the WAL back

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS spaces (
    name TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS folders (
    path TEXT PRIMARY KEY,
    space TEXT NOT NULL REFERENCES spaces(name) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS policies (
    ai TEXT NOT NULL,
    space TEXT NOT NULL,            -- '' means everywhere
    effect TEXT NOT NULL CHECK (effect IN ('allow', 'deny')),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (ai, space)
);
-- Rows are never deleted (forget clears a row's digest and key): rowids follow the order of
-- writes, which the import's last duplicate check relies on (server.memories.MemoryBook.written_since).
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    partition TEXT NOT NULL,
    space TEXT,                     -- NULL: personal
    ai TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    valid_from INTEGER NOT NULL,
    valid_until INTEGER,
    superseded_by TEXT,
    supersedes TEXT,
    digest TEXT,                    -- sha256 of the text, cleared by forget
    labels TEXT NOT NULL DEFAULT '[]',
    key TEXT,
    run_id TEXT,
    forgotten_at INTEGER,
    from_spaces TEXT NOT NULL DEFAULT '[]'  -- JSON: spaces whose data the writing run carried
);
-- A digest's first 16 hex digits (64 bits) find a text: a smaller index than the whole digest
-- keeps bulk imports fast at a million memories. Queries compare the whole digest after it.
-- Every other lookup is by id: indexes nothing reads would only slow every insert.
DROP INDEX IF EXISTS memories_by_digest;
DROP INDEX IF EXISTS memories_by_key;
DROP INDEX IF EXISTS memories_superseded;
CREATE INDEX IF NOT EXISTS memories_by_digest16 ON memories (partition, substr(digest, 1, 16));
CREATE TABLE IF NOT EXISTS partitions (
    key TEXT PRIMARY KEY,
    live INTEGER NOT NULL DEFAULT 0,       -- memories not forgotten
    superseded INTEGER NOT NULL DEFAULT 0  -- of which superseded
);
-- The live total of all partitions, kept by the triggers below in the transaction that changes a
-- partition's count: a recall's "cut by space" reads one row, not a sum over every partition.
CREATE TABLE IF NOT EXISTS totals (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    live INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS totals_on_insert AFTER INSERT ON partitions
BEGIN UPDATE totals SET live = live + NEW.live; END;
CREATE TRIGGER IF NOT EXISTS totals_on_update AFTER UPDATE OF live ON partitions
BEGIN UPDATE totals SET live = live + NEW.live - OLD.live; END;
CREATE TRIGGER IF NOT EXISTS totals_on_delete AFTER DELETE ON partitions
BEGIN UPDATE totals SET live = live - OLD.live; END;
CREATE TABLE IF NOT EXISTS deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    ai TEXT NOT NULL,
    space TEXT,
    transport TEXT NOT NULL,
    run_id TEXT,
    query TEXT NOT NULL,
    limit_ INTEGER NOT NULL,
    reached TEXT NOT NULL,          -- JSON: partitions searched
    cut TEXT NOT NULL,              -- JSON: counts by reason
    token_scope TEXT                -- the caller's token's subtree, if any
);
CREATE TABLE IF NOT EXISTS delivery_items (
    delivery_id INTEGER NOT NULL REFERENCES deliveries(id),
    memory_id TEXT NOT NULL,
    rank INTEGER NOT NULL,
    score REAL NOT NULL,
    outcome TEXT NOT NULL           -- delivered | limit
);
CREATE INDEX IF NOT EXISTS delivery_items_by_delivery ON delivery_items (delivery_id);
CREATE TABLE IF NOT EXISTS tokens (
    id TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    ai TEXT,
    space TEXT,
    operator INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER,
    runs_only INTEGER NOT NULL DEFAULT 0,
    run_id TEXT,
    parent TEXT,
    parent_run TEXT,
    expires_at INTEGER,
    standing INTEGER NOT NULL DEFAULT 0,
    approvals TEXT NOT NULL DEFAULT 'queue',
    client TEXT,
    client_id TEXT,
    resource TEXT
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,            -- server.barrier.runs.run_id_for(owner, name)
    name TEXT NOT NULL,
    ai TEXT NOT NULL,
    transport TEXT NOT NULL,
    space TEXT,                     -- sealed at the first step, NULL: no space
    token_scope TEXT,
    opened_at INTEGER NOT NULL,
    kind TEXT NOT NULL DEFAULT 'session',
    token_id TEXT,
    parent TEXT,
    everywhere INTEGER NOT NULL DEFAULT 0,
    ended_at INTEGER,
    ended_by TEXT,
    expires_at INTEGER
);
CREATE INDEX IF NOT EXISTS runs_by_opened ON runs (opened_at);
CREATE TABLE IF NOT EXISTS run_labels (
    run TEXT NOT NULL,
    label TEXT NOT NULL,            -- a mark: personal, space:NAME, source:NAME
    PRIMARY KEY (run, label)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS run_steps (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run TEXT NOT NULL,
    at INTEGER NOT NULL,
    kind TEXT NOT NULL,
    labels TEXT NOT NULL,           -- JSON marks (ids, labels and rules, never texts)
    decision TEXT,
    rule TEXT,
    grant_id TEXT,
    target TEXT,
    memory_ids TEXT NOT NULL,
    actor TEXT
);
CREATE INDEX IF NOT EXISTS run_steps_by_run ON run_steps (run, id);
CREATE INDEX IF NOT EXISTS run_steps_by_at ON run_steps (at);
-- Web sessions signed out before they expire (server.web.session), kept until then.
CREATE TABLE IF NOT EXISTS ended_sessions (nonce TEXT PRIMARY KEY, expires INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS grants (
    id TEXT PRIMARY KEY,
    from_space TEXT NOT NULL,
    to_space TEXT,                  -- NULL: personal
    ai TEXT,                        -- NULL: every AI
    until INTEGER,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE TABLE IF NOT EXISTS trusted_sources (
    source TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS contexts (
    ref TEXT PRIMARY KEY,
    run TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    items TEXT NOT NULL             -- JSON: [{id, labels}] as shared
);
-- A forget under way (server.memories.MemoryBook.forget): written in the transaction that marks
-- the memory forgotten, removed once its text is purged from the partition and the catalog
-- checkpointed. What a dead process left here is finished when a service next opens.
CREATE TABLE IF NOT EXISTS forgetting (
    memory_id TEXT PRIMARY KEY,
    partition TEXT NOT NULL,
    since INTEGER NOT NULL          -- wall-clock microseconds, for finishing stale ones
);
CREATE TABLE IF NOT EXISTS import_keys (
    partition TEXT NOT NULL,
    key TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    PRIMARY KEY (partition, key)
);
-- Each partition's version, bumped after every write (server.catalog.partition_sync: the PostgreSQL
-- catalog's; on SQLite, one machine, a token file beside the partition serves).
CREATE TABLE IF NOT EXISTS partition_versions (key TEXT PRIMARY KEY, version INTEGER NOT NULL);
"""
SCHEMA += APPROVALS_TABLE.format(T="TEXT", I="INTEGER") + OAUTH_TABLES.format(T="TEXT", I="INTEGER")
# The access generation (server.catalog.access): any row written to an access table moves it to a
# new random value in the same transaction. SQLite's triggers fire per row; a row is cheap.
SCHEMA += (
    "CREATE TABLE IF NOT EXISTS access_generation (one INTEGER PRIMARY KEY CHECK (one = 1), value INTEGER NOT NULL);\n"
)
SCHEMA += "".join(
    f"CREATE TRIGGER IF NOT EXISTS access_on_{event.lower()}_{table} AFTER {event} ON {table} "
    "BEGIN UPDATE access_generation SET value = random() WHERE one = 1; END;\n"
    for table in ACCESS_TABLES
    for event in ("INSERT", "UPDATE", "DELETE")
)


class SqliteCatalog:
    """A thread-safe handle on the catalog database."""

    sql = SQLITE

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        make_private(self.path.parent)  # the database, its WAL and shared memory: 0600
        self._conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._bulk = 0  # imports under way through this connection
        self._autocheckpoint = 1000  # pages; 0 once checkpoints run in the background
        self._checkpointer: threading.Thread | None = None
        self._stopping = threading.Event()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA busy_timeout=30000")
            self._conn.execute("PRAGMA secure_delete=ON")
            # Up to 64 MiB of pages (taken as used): a bulk import's index inserts stay in memory.
            self._conn.execute("PRAGMA cache_size=-65536")
            try:
                self._open()
            except BaseException:
                self._conn.close()
                raise

    def _open(self) -> None:
        """Bring the schema up to this version, in one write transaction."""
        with self.transaction() as tx:
            _migrate(tx)
            tx.executescript_safe(SCHEMA)
            # Once, when the table is new (a new store, or one made before version 4): from
            # then on the triggers keep it, in every process, old versions' writes included.
            tx.execute("INSERT OR IGNORE INTO totals (one, live) SELECT 1, coalesce(sum(live), 0) FROM partitions")
            tx.execute("INSERT OR IGNORE INTO access_generation (one, value) VALUES (1, random())")
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('schema', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """A write transaction that takes the database lock up front."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield Tx(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")
                note_write()

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """For a bulk import: the WAL is copied back into the database rarely (``BULK_CHECKPOINT_PAGES``)
        instead of after every few commits, since each batch dirties pages all over the digest
        index. Imports at once in one process share the setting until the last one ends."""
        with self._lock:
            self._bulk += 1
            if self._bulk == 1:
                self._conn.execute(f"PRAGMA wal_autocheckpoint={BULK_CHECKPOINT_PAGES}")
        try:
            yield
        finally:
            with self._lock:
                self._bulk -= 1
                if self._bulk == 0:
                    self._conn.execute(f"PRAGMA wal_autocheckpoint={self._autocheckpoint}")
                    self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def checkpoint_in_background(self, every_s: float = BACKGROUND_CHECKPOINT_S) -> None:
        """For a long-lived server: copy the WAL back into the database from a thread of its own,
        on its own connection, instead of in whichever commit crosses the WAL's size limit. That
        commit was a request (a recall's delivery record) that then waited for the copy and its
        fsync: the slowest recall of every few hundred. A PASSIVE checkpoint blocks no reader
        or writer; other processes keep their own automatic checkpoints."""
        if self._checkpointer is not None:
            return
        with self._lock:
            self._autocheckpoint = 0
            if self._bulk == 0:
                self._conn.execute("PRAGMA wal_autocheckpoint=0")

        def run() -> None:
            conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
            try:
                conn.execute("PRAGMA busy_timeout=30000")
                while not self._stopping.wait(every_s):
                    try:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                    except sqlite3.Error:  # busy or closing: the next round tries again
                        pass
            finally:
                conn.close()

        self._checkpointer = threading.Thread(target=run, name="esfis-checkpoint", daemon=True)
        self._checkpointer.start()

    def checkpoint(self) -> bool:
        """Copy the WAL into the database and truncate it to nothing. False when another
        connection kept it from finishing (a reader still on an old snapshot, a writer), within
        the busy timeout: the WAL may then still hold older versions of pages."""
        with self._lock:
            busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return busy == 0

    def write_returning(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """One statement that writes (``Catalog.write_returning``), its rows read before the
        commit: SQLite finishes an INSERT … RETURNING only once they are."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                rows = self._conn.execute(sql, params).fetchall()
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return rows

    def all(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Row | None:
        with self._lock:
            return self._conn.execute(sql, params).fetchone()

    def reopen(self) -> SqliteCatalog:
        return SqliteCatalog(self.path)

    def close(self) -> None:
        self._stopping.set()
        if self._checkpointer is not None:
            self._checkpointer.join()
        with self._lock:
            self._conn.close()


def _migrate(tx: Tx) -> None:
    """Bring a store made by an earlier version up to this schema, before the script runs."""
    if tx.one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'") is not None:
        row = tx.one("SELECT value FROM meta WHERE key = 'schema'")
        refuse_newer(int(row["value"]) if row else 0)
    columns = {r["name"] for r in tx.all("PRAGMA table_info(memories)")}
    if columns and "from_spaces" not in columns:  # version 1
        tx.execute("ALTER TABLE memories ADD COLUMN from_spaces TEXT NOT NULL DEFAULT '[]'")
    delivery_columns = {r["name"] for r in tx.all("PRAGMA table_info(deliveries)")}
    if delivery_columns and "token_scope" not in delivery_columns:
        tx.execute("ALTER TABLE deliveries ADD COLUMN token_scope TEXT")
    for table, column, type_ in (*V6_COLUMNS, *V7_COLUMNS, *V8_COLUMNS):  # versions 6 to 8
        present = {r["name"] for r in tx.all(f"PRAGMA table_info({table})")}
        if present and column not in present:
            tx.execute(f"ALTER TABLE {table} ADD COLUMN {column} {type_.format(T='TEXT').replace('BIGINT', 'INTEGER')}")


class Tx:
    """The connection inside one transaction."""

    sql = SQLITE

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> sqlite3.Cursor:
        return self._conn.executemany(sql, rows)

    def executescript_safe(self, script: str) -> None:
        # executescript would COMMIT first; run the statements one by one inside the transaction.
        # A trigger's body holds semicolons: a statement is complete when sqlite3 says so.
        statement = ""
        for part in script.split(";"):
            statement += part + ";"
            if sqlite3.complete_statement(statement):
                if statement.strip(" \n;"):
                    self._conn.execute(statement)
                statement = ""

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Row | None:
        return self._conn.execute(sql, params).fetchone()

    def all(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        return self._conn.execute(sql, params).fetchall()
