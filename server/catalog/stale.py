"""What SQLite's ``secure_delete`` leaves behind, and finding it (``SqliteCatalog.scrub``).

``secure_delete`` zeroes a cell when it is deleted or overwritten, and a page when it is freed.
It does not zero the unallocated gap of a page that a rebalance rebuilt: SQLite writes the
page's cells anew from its end and leaves the bytes between the cell pointers and the new
content as they were, copies of cells that moved to a sibling. A cell that moved and is later
deleted survives as a stale copy in that gap. Measured: after 10,000 inserts in random order,
a few rows in a thousand had their digest index cell twice; after forgetting 2,000 of 20,000,
two prefixes stayed on disk. SQLite's own answer is a rebuild (VACUUM, or its ``scrub.c``).

A rebuild costs the whole file under the write lock, so it runs only when needed:
``holds_fragment`` walks every B-tree page's gap (page headers read as one array, then only
the gaps' non-zero bytes kept) and says whether any of them holds ``WINDOW`` consecutive
bytes of a cleared value. Live cells are not read: a cleared value is in none of them, and a
value some live row shares (a query text in the delivery log) would call for a rebuild that
could not remove it.

The pages come from SQLite (``Connection.serialize``), never from opening the file: closing
any descriptor of a database file drops every POSIX lock this process holds on it, its SQLite
connections' included, and another process may then take the database for unused and reset
its WAL index under them (the stale reads and "disk I/O error" that a first version, which
read the file, caused in the test suite).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

WINDOW = 8  # bytes of a cleared value that, found in a gap, call for a rebuild
SHORTEST = 4  # a value shorter than this is found by chance anywhere: not looked for
CHUNK_PAGES = 4096  # pages whose headers are read as one array (16 MiB of 4 KiB pages)
BTREE_PAGES = (2, 5, 10, 13)  # interior index, interior table, leaf index, leaf table
HEADER = 100  # page 1 starts with the database's header


def holds_fragment(database: bytes, values: Sequence[bytes]) -> bool:
    """Whether any page's unallocated gap in ``database`` (a database's pages, as
    ``sqlite3.Connection.serialize`` gives them) holds ``WINDOW`` consecutive bytes of one of
    ``values`` (a value shorter than that: the whole of it)."""
    long = [v for v in values if len(v) >= WINDOW]
    short = [v for v in values if SHORTEST <= len(v) < WINDOW]
    if not long and not short or len(database) < HEADER:
        return False
    needles = np.unique(np.concatenate([_windows(v) for v in long])) if long else None
    page_size = int.from_bytes(database[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    view = memoryview(database)
    for first in range(0, len(database) // page_size, CHUNK_PAGES):
        chunk = view[first * page_size : (first + CHUNK_PAGES) * page_size]
        pages = np.frombuffer(chunk, dtype=np.uint8, count=len(chunk) // page_size * page_size)
        parts = [bytes(chunk[a:b]).strip(b"\0") for a, b in _gaps(pages.reshape(-1, page_size), first)]
        stale = (b"\0" * WINDOW).join(p for p in parts if p)
        if any(v in stale for v in short):
            return True
        if needles is not None and len(stale) >= WINDOW and np.isin(_windows(stale), needles).any():
            return True
    return False


def _windows(data: bytes) -> np.ndarray:
    """Every ``WINDOW``-byte window of ``data`` as one 64-bit integer (a view, one byte apart)."""
    buffer = np.frombuffer(data, dtype=np.uint8)
    return np.ndarray((len(data) - WINDOW + 1,), dtype="<u8", buffer=buffer, strides=(1,))


def _gaps(chunk: np.ndarray, first: int) -> list[tuple[int, int]]:
    """Offsets in the chunk (start, end) of the gaps of its pages (one row a page), the first
    of them page ``first`` (0-based) of the file."""
    page_size = chunk.shape[1]
    rows = np.arange(len(chunk))
    header = np.zeros(len(chunk), dtype=np.int64)
    if first == 0:
        header[0] = HEADER
    kind = chunk[rows, header]
    header_size = np.where((kind == 2) | (kind == 5), 12, 8)
    cells = chunk[rows, header + 3].astype(np.int64) * 256 + chunk[rows, header + 4]
    content = chunk[rows, header + 5].astype(np.int64) * 256 + chunk[rows, header + 6]
    content = np.where(content == 0, 65536, content)
    start = header + header_size + 2 * cells
    # Any other page (overflow, free list) holds no gap: secure_delete zeroed it when freed.
    keep = np.isin(kind, BTREE_PAGES) & (start < content) & (content <= page_size)
    base = rows * page_size
    return list(zip((base + start)[keep].tolist(), (base + content)[keep].tolist(), strict=True))
