"""``server.catalog.stale``: which bytes of a SQLite file a rebuild would remove. The scan reads
the gaps SQLite leaves between a page's cell pointers and its cells, never a live cell; a
fragment of a cleared value there is found, whole or cut."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from server.catalog.stale import holds_fragment


def _digest_table(path: Path, rows: int) -> list[str]:
    """A table and a 16-digit prefix index as the catalog's, filled in random digest order."""
    rng = random.Random(7)
    digests = [f"{rng.getrandbits(256):064x}" for _ in range(rows)]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA secure_delete=ON")
    conn.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, digest TEXT)")
    conn.execute("CREATE INDEX m_d ON m (substr(digest, 1, 16))")
    for start in range(0, rows, 100):
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO m (digest) VALUES (?)", [(d,) for d in digests[start : start + 100]])
        conn.execute("COMMIT")
    conn.close()
    return digests


def test_a_copy_in_a_gap_is_found_whole_or_cut_and_a_live_cell_is_not(tmp_path):
    path = tmp_path / "c.db"
    digests = _digest_table(path, 6000)
    data = path.read_bytes()
    copied = [d for d in digests if data.count(d[:16].encode()) > 2]  # row + index cell + a copy
    assert copied
    value = copied[0]
    assert holds_fragment(data, [value.encode()])
    assert holds_fragment(data, [value[4:14].encode()])  # ten digits of it: still found
    # Digests held only by their live cells (the same operations lay out the same file).
    live = [d for d in digests if data.count(d[:16].encode()) == 2]
    assert live and not any(holds_fragment(data, [d.encode()]) for d in live[:200])
    assert not holds_fragment(data, [b"abc"])  # shorter than any window: never looked for


def test_a_database_shorter_than_its_header_holds_nothing():
    assert not holds_fragment(b"", [b"0123456789abcdef"])
