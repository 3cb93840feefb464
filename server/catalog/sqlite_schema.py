"""The SQLite catalog's schema (``server.catalog.sqlite``): its tables, indexes and triggers, and
the steps that bring a database made by an earlier esfis up to it.

The script is idempotent (``IF NOT EXISTS`` throughout): every open runs it, after ``migrate``
has added the columns an older database lacks. The schema's version lies in ``meta``; an esfis
refuses a database a newer one made (``shared.refuse_newer``).
"""

from __future__ import annotations

from typing import Any

from server.catalog.shared import (
    ACCESS_TABLES,
    APPROVALS_TABLE,
    FIELDS_DATED,
    OAUTH_TABLES,
    V6_COLUMNS,
    V7_COLUMNS,
    V8_COLUMNS,
    V11_COLUMNS,
    V13_COLUMNS,
    refuse_newer,
)

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
    from_spaces TEXT NOT NULL DEFAULT '[]', -- JSON: spaces whose data the writing run carried
    data TEXT                       -- JSON: the writer's data (server.memories.data); NULL: none
);
-- A digest's first 16 hex digits (64 bits) find a text: a smaller index than the whole digest
-- keeps bulk imports fast at a million memories. Queries compare the whole digest after it.
-- Every other lookup is by id: indexes nothing reads would only slow every insert.
DROP INDEX IF EXISTS memories_by_digest;
DROP INDEX IF EXISTS memories_by_key;
DROP INDEX IF EXISTS memories_superseded;
CREATE INDEX IF NOT EXISTS memories_by_digest16 ON memories (partition, substr(digest, 1, 16));
-- Version 10: the memories page reads a partition newest first, a page at a time (keyset on
-- created_at and the rowid the index ends with: server.memories.listing).
CREATE INDEX IF NOT EXISTS memories_by_written ON memories (partition, created_at);
-- Version 14: the fields of memories' data, for recall's filter (server.memories.data_index):
-- one row per path a filter may name, its value in the one column it is compared in. A forget
-- clears a memory's data: the trigger takes its fields with it, in the same transaction.
CREATE TABLE IF NOT EXISTS memory_fields (
    partition TEXT NOT NULL,
    path TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    kind TEXT NOT NULL,             -- n number, b boolean, z null, s string, t time, j object or array, x loose
    num REAL,                       -- n: the number; b: 0 or 1
    txt TEXT,                       -- s: the string
    instant INTEGER,                -- t: microseconds since the epoch
    created_at INTEGER,             -- the memory's (version 16): a value's matches newest first
    PRIMARY KEY (partition, path, memory_id)
) WITHOUT ROWID;
-- Version 16: each value index ends with the memory's time, so the newest memories holding one
-- value are read in order from the index, and a set's newest without a read of the memories.
DROP INDEX IF EXISTS memory_fields_by_num;
DROP INDEX IF EXISTS memory_fields_by_txt;
DROP INDEX IF EXISTS memory_fields_by_instant;
CREATE INDEX IF NOT EXISTS memory_fields_by_num_at ON memory_fields (partition, path, kind, num, created_at);
CREATE INDEX IF NOT EXISTS memory_fields_by_txt_at ON memory_fields (partition, path, txt, created_at)
    WHERE txt IS NOT NULL;
CREATE INDEX IF NOT EXISTS memory_fields_by_instant_at ON memory_fields (partition, path, instant, created_at)
    WHERE instant IS NOT NULL;
CREATE INDEX IF NOT EXISTS memory_fields_by_memory ON memory_fields (memory_id);
CREATE TRIGGER IF NOT EXISTS memory_fields_on_forget AFTER UPDATE OF data, forgotten_at ON memories
WHEN NEW.data IS NULL OR NEW.forgotten_at IS NOT NULL
BEGIN DELETE FROM memory_fields WHERE memory_id = OLD.id; END;
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
-- Version 10: a memory's page lists the deliveries that included it; a space's page plots its recalls.
CREATE INDEX IF NOT EXISTS delivery_items_by_memory ON delivery_items (memory_id);
CREATE INDEX IF NOT EXISTS deliveries_by_space ON deliveries (space, at);
-- Version 15: a recall's items land here first, where no index by memory is kept up (each item's
-- entry in one dirtied a random page: most of a recall's commit), and move into delivery_items in
-- batches (server.memories.delivery_moves). Every read goes through all_delivery_items.
CREATE TABLE IF NOT EXISTS recent_delivery_items (
    delivery_id INTEGER NOT NULL REFERENCES deliveries(id),
    memory_id TEXT NOT NULL,
    rank INTEGER NOT NULL,
    score REAL NOT NULL,
    outcome TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS recent_delivery_items_by_delivery ON recent_delivery_items (delivery_id);
CREATE VIEW IF NOT EXISTS all_delivery_items AS
    SELECT delivery_id, memory_id, rank, score, outcome FROM delivery_items
    UNION ALL SELECT delivery_id, memory_id, rank, score, outcome FROM recent_delivery_items;
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
-- Version 12: the run tokens a token opened, counted against their cap (server.spaces.tokens).
CREATE INDEX IF NOT EXISTS tokens_by_parent ON tokens (parent) WHERE parent IS NOT NULL;
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
# The rate counters' rows, counted by triggers (seeded at open, as totals is): a hit reads one
# row to know whether the table is full (server.spaces.rates), never a count of the table.
SCHEMA += """
CREATE TABLE IF NOT EXISTS rate_rows (one INTEGER PRIMARY KEY CHECK (one = 1), n INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS rate_rows_on_insert AFTER INSERT ON rate_counters
BEGIN UPDATE rate_rows SET n = n + 1 WHERE one = 1; END;
CREATE TRIGGER IF NOT EXISTS rate_rows_on_delete AFTER DELETE ON rate_counters
BEGIN UPDATE rate_rows SET n = n - 1 WHERE one = 1; END;
"""
SCHEMA += "".join(
    f"CREATE TRIGGER IF NOT EXISTS access_on_{event.lower()}_{table} AFTER {event} ON {table} "
    "BEGIN UPDATE access_generation SET value = random() WHERE one = 1; END;\n"
    for table in ACCESS_TABLES
    for event in ("INSERT", "UPDATE", "DELETE")
)


def migrate(tx: Any) -> None:
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
    for table, column, type_ in (*V6_COLUMNS, *V7_COLUMNS, *V8_COLUMNS, *V11_COLUMNS, *V13_COLUMNS):  # 6 to 8, 11, 13
        present = {r["name"] for r in tx.all(f"PRAGMA table_info({table})")}
        if present and column not in present:
            tx.execute(f"ALTER TABLE {table} ADD COLUMN {column} {type_.format(T='TEXT').replace('BIGINT', 'INTEGER')}")
    fields = {r["name"] for r in tx.all("PRAGMA table_info(memory_fields)")}
    if fields and "created_at" not in fields:  # version 16: each row its memory's time
        tx.execute("ALTER TABLE memory_fields ADD COLUMN created_at INTEGER")
        tx.execute(FIELDS_DATED)
