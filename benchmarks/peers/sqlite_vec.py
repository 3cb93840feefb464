"""sqlite-vec: one ``vec0`` virtual table with ``space`` as its partition key, queried with
``embedding MATCH ? AND k = ? AND space = ?``: what mcp-memory-service and the sqlite-vec
documentation's multi-tenant example do. ``vec0`` scans exactly (no ANN index): a partition
key keeps each space's vectors in chunks of their own, so a query reads only its space's.

The interpreter's own ``sqlite3`` here cannot load extensions (CPython built without
``enable_load_extension``), so the connection is ``apsw``'s, with SQLite bundled, as
sqlite-vec's Python guide suggests in that case.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.peers import Peer, PeerUnavailable, remove, space_names
from benchmarks.synthetic import Store


class SqliteVec(Peer):
    system = "sqlite-vec"
    arms = ("sqlite-vec-partition-key",)

    def __init__(self, root: Path) -> None:
        try:
            import apsw
            import sqlite_vec
        except ImportError as e:
            raise PeerUnavailable(f"sqlite-vec or apsw is not installed (pip install -e '.[peers]'): {e}") from e
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.path = root / "memories.db"
        self.conn = apsw.Connection(str(self.path))
        self.conn.enable_load_extension(True)
        self.conn.load_extension(sqlite_vec.loadable_path())
        self.conn.enable_load_extension(False)
        self.version = str(self.conn.execute("SELECT vec_version()").fetchone()[0])  # type: ignore[index]
        self.sqlite = apsw.sqlite_lib_version()

    def load(self, store: Store) -> None:
        vectors, names = store.vectors, space_names(store)
        dim = vectors.shape[1]
        self.conn.execute(
            f"CREATE VIRTUAL TABLE memories USING vec0(space text partition key, "
            f"embedding float[{dim}] distance_metric=cosine)"
        )
        with self.conn:
            self.conn.executemany(
                "INSERT INTO memories (rowid, space, embedding) VALUES (?, ?, ?)",
                ((i, space, vector.tobytes()) for i, (space, vector) in enumerate(zip(names, vectors))),
            )

    def prepare(self, arm: str) -> str:
        return f"sqlite-vec {self.version} (SQLite {self.sqlite}, apsw), vec0 with space as the partition key, exact"

    def search(self, arm: str, spaces: list[str], query: np.ndarray, k: int) -> list[int]:
        if len(spaces) == 1:
            sql = "SELECT rowid FROM memories WHERE embedding MATCH ? AND k = ? AND space = ? ORDER BY distance"
            rows = self.conn.execute(sql, (query.tobytes(), k, spaces[0]))
        else:
            marks = ", ".join("?" for _ in spaces)
            sql = (
                f"SELECT rowid FROM memories WHERE embedding MATCH ? AND k = ? AND space IN ({marks}) ORDER BY distance"
            )
            rows = self.conn.execute(sql, (query.tobytes(), k, *spaces))
        return [int(r[0]) for r in rows]

    def disk_bytes(self) -> int:
        return self.path.stat().st_size

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            remove(self.root)
