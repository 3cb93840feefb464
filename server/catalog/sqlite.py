"""The catalog's default backend: one SQLite database (WAL) beside the vectors (``server.catalog``).

It never holds a memory's text: a forgotten text must leave no trace, and SQLite keeps deleted
bytes in free pages. Several processes (``esfis serve``, ``esfis mcp`` per agent, the CLI) share it: WAL lets readers
run beside one writer, writes take the lock up front (``BEGIN IMMEDIATE``) so the busy timeout
applies, and the rows that decide access are kept only under the access generation its
triggers move (``server.catalog.access``), so a policy the CLI adds applies at the next request.

What a forget clears (a digest, labels) must leave no copy behind: ``secure_delete`` zeroes
deleted and overwritten content in its page and in free pages, ``checkpoint`` copies the WAL
into the database and truncates it, so no old frame keeps the page as it was, and ``scrub``
rebuilds the file when a rebalanced page's gap still holds a copy (``server.catalog.stale``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from indexing import failpoints
from server.catalog.access import note_write
from server.catalog.scrub_rounds import ScrubRounds
from server.catalog.shared import SCHEMA_VERSION, Dialect
from server.catalog.sqlite_schema import SCHEMA, migrate
from server.home import make_private

SQLITE = Dialect(
    values="json_each(?)",
    rows="json_each(?)",
    item_template="json_extract(value, '$[{i}]')",
    find="instr",
)
BULK_CHECKPOINT_PAGES = 65536  # 256 MiB of 4 KiB pages
BACKGROUND_CHECKPOINT_S = 1.0  # a server's checkpoint thread: how often it copies the WAL back
WAL_BYTES = 16 << 20  # ... and past this size (or an eighth of the room left), truncates it
TRUNCATE_WAIT_MS = 500  # the most a truncation waits for readers (writers wait behind it)
PRESSED_CHECKPOINT_S = 0.1  # the checkpoint thread's round while the WAL is past its bound


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
        self._scrubs = ScrubRounds(self._scrub)  # one at a time; callers meanwhile share the next
        self._readers = threading.local()  # each thread's connection for reads (``_reader``)
        self._reader_conns: list[sqlite3.Connection] = []  # every thread's, closed with the catalog
        self._readers_lock = threading.Lock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            # FULL: each commit's WAL frames are fsynced before COMMIT returns, so an acknowledged
            # write survives a power cut too (NORMAL may lose the last commits; docs/guarantees.md).
            self._conn.execute("PRAGMA synchronous=FULL")
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
            migrate(tx)
            tx.executescript_safe(SCHEMA)
            # Once, when the table is new (a new store, or one made before version 4): from
            # then on the triggers keep it, in every process, old versions' writes included.
            tx.execute("INSERT OR IGNORE INTO totals (one, live) SELECT 1, coalesce(sum(live), 0) FROM partitions")
            tx.execute("INSERT OR IGNORE INTO access_generation (one, value) VALUES (1, random())")
            tx.execute("INSERT OR IGNORE INTO rate_rows (one, n) SELECT 1, count(*) FROM rate_counters")
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('schema', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[Tx]:
        """A write transaction that takes the database lock up front. ``durable=False``
        (``Catalog.transaction``): its commit is not fsynced (``synchronous=NORMAL`` for it alone)."""
        with self._lock:
            if not durable:
                self._conn.execute("PRAGMA synchronous=NORMAL")
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield Tx(self._conn)
                    failpoints.hit("catalog:commit")
                    self._conn.execute("COMMIT")
                except BaseException:
                    # A COMMIT that failed (a full disk: SQLITE_FULL) may leave the transaction
                    # open, or SQLite may have rolled it back itself: either way none of it stays,
                    # and the connection is free for the next writer (an open one would refuse
                    # every BEGIN).
                    if self._conn.in_transaction:
                        with suppress(sqlite3.Error):
                            self._conn.execute("ROLLBACK")
                    raise
            finally:
                if not durable:
                    self._conn.execute("PRAGMA synchronous=FULL")
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
                conn.execute(f"PRAGMA busy_timeout={TRUNCATE_WAIT_MS}")
                wait = every_s
                while not self._stopping.wait(wait):
                    wait = every_s
                    try:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                        if self._wal_too_large():
                            wait = min(every_s, PRESSED_CHECKPOINT_S)  # room is short: keep the WAL small
                            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    except sqlite3.Error:  # busy or closing: the next round tries again
                        pass
            finally:
                conn.close()

        self._checkpointer = threading.Thread(target=run, name="esfis-checkpoint", daemon=True)
        self._checkpointer.start()

    def _wal_too_large(self) -> bool:
        """Whether the WAL file should be truncated now, not only copied back. A PASSIVE
        checkpoint never shrinks the file, and under a steady load some reader always holds it,
        so SQLite never starts it over: it grew without end (124 MB in 40 s of recalls, each
        one's delivery a commit), and on a full disk it ate the room kept for reads. So past
        ``WAL_BYTES``, or past an eighth of the room left on its volume, it is truncated (which
        waits up to ``TRUNCATE_WAIT_MS`` for the readers on it)."""
        try:
            wal = os.stat(f"{self.path}-wal").st_size
            room = os.statvfs(self.path.parent)
        except OSError:
            return False
        return wal > min(WAL_BYTES, room.f_bavail * room.f_frsize // 8)

    def checkpoint(self) -> bool:
        """Copy the WAL into the database and truncate it to nothing. False when another
        connection kept it from finishing (a reader still on an old snapshot, a writer), within
        the busy timeout: the WAL may then still hold older versions of pages."""
        with self._lock:
            busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return busy == 0

    def scrub(self, cleared: Sequence[bytes] | None) -> bool:
        """After writes that cleared ``cleared`` (a digest, a text; None: not known), leave no
        copy of them in the file: checkpoint, and if a page's gap still holds a fragment of one
        (``server.catalog.stale``), rebuild the database and checkpoint again. False when
        another connection kept a checkpoint or the rebuild from finishing (the busy timeout):
        a copy may then remain, for the caller's next try. In rounds (``scrub_rounds``)."""
        return self._scrubs(cleared)

    def _scrub(self, cleared: Sequence[bytes] | None) -> bool:
        if not self.checkpoint():
            return False
        from server.catalog.stale import holds_fragment  # numpy: off the paths that never forget

        if cleared is not None and not holds_fragment(self._pages(), cleared):
            return True
        with self._lock:
            try:
                self._conn.execute("VACUUM")
            except sqlite3.OperationalError:  # locked past the busy timeout
                return False
        return self.checkpoint()

    def _pages(self) -> bytes:
        """The database's pages, read by a connection of its own (``server.catalog.stale`` says
        why never by opening the file), so this one's users do not wait on the read."""
        conn = sqlite3.connect(str(self.path), timeout=30.0)
        try:
            return conn.serialize()
        finally:
            conn.close()  # SQLite's own close keeps the process's locks on the file

    def write_returning(self, sql: str, params: tuple[Any, ...] = (), *, durable: bool = True) -> list[sqlite3.Row]:
        """One statement that writes (``Catalog.write_returning``), its rows read before the
        commit: SQLite finishes an INSERT … RETURNING only once they are."""
        with self._lock:
            if not durable:
                self._conn.execute("PRAGMA synchronous=NORMAL")
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    rows = self._conn.execute(sql, params).fetchall()
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
            finally:
                if not durable:
                    self._conn.execute("PRAGMA synchronous=FULL")
            return rows

    def all(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        reader = self._reader(sql)
        if reader is None:
            with self._lock:
                return self._conn.execute(sql, params).fetchall()
        return reader.execute(sql, params).fetchall()

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Row | None:
        reader = self._reader(sql)
        if reader is None:
            with self._lock:
                return self._conn.execute(sql, params).fetchone()
        cursor = reader.execute(sql, params)
        try:
            return cursor.fetchone()
        finally:
            cursor.close()  # the statement reset now: no read snapshot outlives the read

    def _reader(self, sql: str) -> sqlite3.Connection | None:
        """This thread's connection for a read outside a write. WAL serves readers beside the
        one writer, so a read (a token, a recall's candidates) never waits for another thread's
        commit and its fsync, as it did on the writer's connection under its lock. Each read is a
        statement of its own, so it sees every commit made before it, this thread's included.

        None (read on the writer's connection, under its lock): inside this thread's own write,
        which the read must see; a setting (a PRAGMA: the writer's connection is the catalog's);
        and when this thread's connection cannot be opened (no file descriptor left, say): the
        read is then answered as before, never refused for want of its own connection."""
        if self._lock._is_owned() or sql.lstrip()[:6].upper() == "PRAGMA":  # type: ignore[attr-defined]
            return None
        conn: sqlite3.Connection | None = getattr(self._readers, "conn", None)
        if conn is not None:
            return conn
        try:
            conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            return None  # tried again at this thread's next read
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA query_only=ON")  # a write never goes past the writer's lock
        except sqlite3.Error:
            conn.close()
            return None
        with self._readers_lock:
            if self._stopping.is_set():
                conn.close()
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            self._reader_conns.append(conn)
        self._readers.conn = conn
        return conn

    def reopen(self) -> SqliteCatalog:
        return SqliteCatalog(self.path)

    def close(self) -> None:
        self._stopping.set()
        if self._checkpointer is not None:
            self._checkpointer.join()
        with self._lock:
            self._conn.close()
        with self._readers_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()


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
