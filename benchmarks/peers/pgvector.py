"""pgvector in PostgreSQL: one table of every memory, ``WHERE space = …`` before ``ORDER BY
embedding <=> q LIMIT k``, as its README's filtering section describes.

PostgreSQL comes from ``pgserver`` (a wheel that carries PostgreSQL 16 and pgvector, started as a
child process on a Unix socket): the Debian packages hold no pgvector, and nothing is compiled.

The arms, measured in this order on the same table:
- ``pgvector-hnsw``: an HNSW index (``vector_cosine_ops``, its defaults m 16, ef_construction
  64), no index on ``space``, ef_search at its default 40;
- ``pgvector-hnsw-ef400``: the same with ``hnsw.ef_search = 400``, the documented remedy when
  a filter leaves too few rows;
- ``pgvector-hnsw-iterative``: iterative index scans (``hnsw.iterative_scan = relaxed_order``),
  where the version has them (0.8.0 and later); otherwise the arm reports why not;
- ``pgvector-hnsw-btree``: a B-tree on ``space`` added beside the HNSW index: the planner picks
  the B-tree (an exact scan of the space's rows) or the HNSW index by its own estimates;
- ``pgvector-btree-exact``: the HNSW index dropped, the B-tree alone: every query an exact scan
  of its space, the README's "exact search" with an index on the filter column.

The table and indexes are built with ``maintenance_work_mem`` at 1 GB (the README's advice:
an HNSW build is much faster when its graph fits), after the rows were copied in, then
``ANALYZE``d so the planner knows the spaces' sizes.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from benchmarks.peers import NotInThisVersion, Peer, PeerUnavailable, remove, space_names
from benchmarks.synthetic import Store

EF_RAISED = 400


class PgVector(Peer):
    system = "pgvector"
    networked = True  # PostgreSQL over its socket
    arms = (
        "pgvector-hnsw",
        "pgvector-hnsw-ef400",
        "pgvector-hnsw-iterative",
        "pgvector-hnsw-btree",
        "pgvector-btree-exact",
    )
    remedies = {"pgvector-hnsw-ef400": "pgvector-hnsw", "pgvector-hnsw-iterative": "pgvector-hnsw"}

    def __init__(self, root: Path) -> None:
        try:
            import pgserver
            import psycopg
            from pgvector.psycopg import register_vector
        except ImportError as e:
            raise PeerUnavailable(
                f"pgserver, psycopg or pgvector is not installed (pip install -e '.[peers]'): {e}"
            ) from e
        self.root = root
        try:
            self.server = pgserver.get_server(root / "pgdata", cleanup_mode=None)
            self.server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
            self.conn = psycopg.connect(self.server.get_uri(), autocommit=True)
        except Exception as e:  # pgserver's own start-up errors are of many kinds
            raise PeerUnavailable(f"pgserver's PostgreSQL did not start here: {e}") from e
        register_vector(self.conn)
        self.version = self._one("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        self.postgres = self._one("SHOW server_version")
        self.costs: dict[str, tuple[float, int]] = {}
        self.copy_seconds = 0.0
        self.hnsw_seconds = 0.0
        self.btree_seconds = 0.0

    def _one(self, sql: str) -> str:
        row = self.conn.execute(sql).fetchone()
        assert row is not None
        return str(row[0])

    def _size(self, relation: str) -> int:
        return int(self._one(f"SELECT pg_total_relation_size('{relation}')"))

    def load(self, store: Store) -> None:
        vectors, names = store.vectors, space_names(store)
        dim = vectors.shape[1]
        self.conn.execute(
            f"CREATE TABLE memories (id bigint PRIMARY KEY, space text NOT NULL, embedding vector({dim}))"
        )
        started = time.perf_counter()
        with self.conn.cursor() as cur:
            with cur.copy("COPY memories (id, space, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(["int8", "text", "vector"])
                for i, (space, vector) in enumerate(zip(names, vectors)):
                    copy.write_row((i, space, vector))
        self.conn.execute("ANALYZE memories")
        self.copy_seconds = time.perf_counter() - started
        self.conn.execute("SET maintenance_work_mem = '1GB'")
        started = time.perf_counter()
        self.conn.execute("CREATE INDEX memories_hnsw ON memories USING hnsw (embedding vector_cosine_ops)")
        self.hnsw_seconds = time.perf_counter() - started

    def _iterative(self) -> bool:
        major, minor = (int(p) for p in self.version.split(".")[:2])
        return (major, minor) >= (0, 8)

    def prepare(self, arm: str) -> str:
        self.conn.execute("RESET hnsw.ef_search")
        if self._iterative():
            self.conn.execute("RESET hnsw.iterative_scan")
        base = f"pgvector {self.version} on PostgreSQL {self.postgres} (pgserver)"
        if arm == "pgvector-hnsw-iterative" and not self._iterative():
            raise NotInThisVersion(f"pgvector {self.version} has no iterative index scans (they came in 0.8.0)")
        if arm in ("pgvector-hnsw-btree", "pgvector-btree-exact") and not self.btree_seconds:
            started = time.perf_counter()
            self.conn.execute("CREATE INDEX memories_space ON memories (space)")
            self.conn.execute("ANALYZE memories")
            self.btree_seconds = time.perf_counter() - started
        if arm == "pgvector-btree-exact":
            self.conn.execute("DROP INDEX IF EXISTS memories_hnsw")
        table = self._size("memories") - self._index_sizes()
        hnsw = self._index_size("memories_hnsw")
        btree = self._index_size("memories_space")
        if arm == "pgvector-btree-exact":
            self.costs[arm] = (self.copy_seconds + self.btree_seconds, table + btree)
            return f"{base}, B-tree on space, no vector index: an exact scan of the space's rows"
        if arm == "pgvector-hnsw-btree":
            self.costs[arm] = (self.copy_seconds + self.hnsw_seconds + self.btree_seconds, table + hnsw + btree)
            return f"{base}, HNSW (m 16, ef_construction 64) and a B-tree on space; the planner picks, ef_search 40"
        self.costs[arm] = (self.copy_seconds + self.hnsw_seconds, table + hnsw)
        if arm == "pgvector-hnsw-ef400":
            self.conn.execute(f"SET hnsw.ef_search = {EF_RAISED}")
            return f"{base}, HNSW (m 16, ef_construction 64), no index on space, ef_search {EF_RAISED}"
        if arm == "pgvector-hnsw-iterative":
            self.conn.execute("SET hnsw.iterative_scan = relaxed_order")
            return f"{base}, HNSW, no index on space, iterative scan (relaxed order), ef_search 40"
        return f"{base}, HNSW (m 16, ef_construction 64), no index on space, ef_search 40 (defaults)"

    def _index_size(self, name: str) -> int:
        row = (
            self.conn.execute("SELECT pg_relation_size(%s::regclass)", (name,)).fetchone() if self._has(name) else None
        )
        return int(row[0]) if row else 0

    def _has(self, name: str) -> bool:
        return self.conn.execute("SELECT 1 FROM pg_class WHERE relname = %s", (name,)).fetchone() is not None

    def _index_sizes(self) -> int:
        return int(self._one("SELECT pg_indexes_size('memories')")) - self._index_size("memories_pkey")

    def search(self, arm: str, spaces: list[str], query: np.ndarray, k: int) -> list[int]:
        if len(spaces) == 1:
            sql = "SELECT id FROM memories WHERE space = %s ORDER BY embedding <=> %s LIMIT %s"
            rows = self.conn.execute(sql, (spaces[0], query, k)).fetchall()
        else:
            sql = "SELECT id FROM memories WHERE space = ANY(%s) ORDER BY embedding <=> %s LIMIT %s"
            rows = self.conn.execute(sql, (spaces, query, k)).fetchall()
        return [int(r[0]) for r in rows]

    def disk_bytes(self) -> int:
        return self._size("memories")

    def cost(self, arm: str, load_seconds: float, disk_bytes: int) -> tuple[float, int]:
        return self.costs[arm]

    def close(self) -> None:
        try:
            self.conn.close()
            self.server.cleanup()
        finally:
            remove(self.root)
