"""The write path under bulk imports: ids, the catalog's indexes, and a batch written whole or
not at all."""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from server.catalog import open_catalog
from server.catalog.sqlite import SqliteCatalog
from server.memories.input import ID_PATTERN, MemoryBatch, NewMemory, check_id, new_id, new_ids
from tests.catalogs import settings_for


def test_ids_are_well_formed_unique_and_later_ones_sort_after():
    first = new_ids(5000)
    time.sleep(0.002)
    later = new_ids(10)
    assert all(ID_PATTERN.fullmatch(i) and check_id(i) == i for i in first + later)
    assert len(set(first + later)) == 5010
    assert max(first) < min(later)
    assert ID_PATTERN.fullmatch(new_id()) and new_ids(0) == []


def test_ids_carry_80_random_bits_after_the_time():
    ids = new_ids(2000)
    tails = {i[-16:] for i in ids}  # the last 16 digits (80 bits) are random
    assert len(tails) == 2000
    digits = "".join(i[-16:] for i in ids)
    counts = np.array([digits.count(c) for c in "234567abcdefghijklmnopqrstuvwxyz"])
    assert counts.min() > 0.8 * counts.mean()  # every digit about equally likely


def test_a_catalog_made_before_the_index_change_is_upgraded_on_open(tmp_path: Path):
    """SQLite's: its planner is what the digest index serves (PostgreSQL's schema began after)."""
    path = tmp_path / "esfis.db"
    SqliteCatalog(path).close()
    with sqlite3.connect(path) as conn:  # as the first schema made them
        conn.execute("DROP INDEX memories_by_digest16")
        conn.execute("CREATE INDEX memories_by_digest ON memories (partition, digest)")
        conn.execute("CREATE INDEX memories_by_key ON memories (partition, key)")
        conn.execute("CREATE INDEX memories_superseded ON memories (partition, superseded_by)")
    catalog = SqliteCatalog(path)
    names = {
        r["name"] for r in catalog.all("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'memories'")
    }
    plan = catalog.all(
        "EXPLAIN QUERY PLAN SELECT digest FROM memories WHERE partition = ? AND substr(digest, 1, 16) IN (?, ?)",
        ("p", "a", "b"),
    )
    catalog.close()
    # The old three are gone; the digest's index and the memories page's (schema 10) are there.
    assert {n for n in names if not n.startswith("sqlite_autoindex")} == {"memories_by_digest16", "memories_by_written"}
    assert "memories_by_digest16" in " ".join(r["detail"] for r in plan)


def test_a_batch_whose_vectors_fail_leaves_no_catalog_row(tmp_path: Path):
    from concurrent.futures import ThreadPoolExecutor

    from indexing.partitions.store import VectorStore
    from server.memories import MemoryBook

    catalog = open_catalog(settings_for(tmp_path))
    store = VectorStore(tmp_path / "vectors", model="test", dimension=8)
    book = MemoryBook(catalog, store)
    now = datetime.now(UTC)
    memories = [
        NewMemory(
            id=i,
            space=None,
            text=f"t{n}",
            vector=np.full(8, np.nan if n == 3 else 1.0, dtype=np.float32),
            ai="import",
            created_at=now,
            valid_from=now,
            valid_until=None,
        )
        for n, i in enumerate(new_ids(5))
    ]
    with ThreadPoolExecutor(1) as thread, pytest.raises(Exception, match="finite"):
        book.write_batch(MemoryBatch.of(memories), vectors_in=thread)
    assert catalog.one("SELECT count(*) AS n FROM memories")["n"] == 0
    assert catalog.one("SELECT count(*) AS n FROM partitions")["n"] == 0
    assert store.row_ids("personal") == []


def test_an_import_of_many_small_batches_still_compacts_its_partition(tmp_path: Path, monkeypatch):
    """Appended to one row a time (no tail: as on S3, where every write is an append)."""
    import json

    import lance

    from indexing.embedding.testing import HashingEmbedder
    from indexing.partitions import tail
    from indexing.partitions.compaction import COMPACT_EVERY
    from indexing.partitions.small_file import SMALL_ROWS
    from server.bulk.importer import import_stream
    from server.facade import open_service

    monkeypatch.setattr(tail, "TAIL_ROWS", 0)

    service = open_service(settings_for(tmp_path / "home"), embedder=HashingEmbedder(64))
    try:
        rows = SMALL_ROWS + 2 * COMPACT_EVERY + 5  # a table from its 257th row, then appended to one row a time
        report = import_stream(service._parts, [json.dumps({"text": f"note {i}"}) for i in range(rows)], batch_size=1)
        assert report.imported == rows
        dataset = lance.dataset(str(next((tmp_path / "home" / "vectors").glob("*.lance"))))
        assert dataset.count_rows() == rows
        assert len(dataset.get_fragments()) <= 10  # one fragment per write without the compactions
    finally:
        service.close()


def _json_values():
    from hypothesis import strategies as st

    # Integers within 64 bits: past them orjson reads a float (json: an int), the one known
    # difference (a vector refuses either, for another reason; see the test below).
    scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text()
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=12,
    )


def test_lines_read_with_orjson_answer_as_the_json_module_does():
    """orjson is only a faster way in: every line gets the row (or the error) json would give."""
    import json as stdjson

    from hypothesis import given, settings
    from hypothesis import strategies as st

    import server.bulk.rows as import_rows

    now = datetime(2026, 11, 30, tzinfo=UTC)
    fields = st.fixed_dictionaries(
        {},
        optional={
            "text": _json_values(),
            "space": _json_values(),
            "key": _json_values(),
            "labels": _json_values(),
            "vector": st.lists(st.floats(width=32) | st.integers(-(2**63), 2**63 - 1), max_size=3),
            "valid_until": _json_values(),
        },
    )

    class JsonOnly:  # the json module in orjson's place: refuses everything, so json answers
        JSONDecodeError = stdjson.JSONDecodeError

        @staticmethod
        def loads(raw):
            raise stdjson.JSONDecodeError("refused", "", 0)

    @settings(max_examples=300, deadline=None)
    @given(fields, st.booleans())
    def check(row, raw_escapes):
        line = stdjson.dumps(row, ensure_ascii=raw_escapes, allow_nan=True)
        fast = import_rows.parse_line(1, line, now=now, dimension=3)
        real = import_rows.orjson
        import_rows.orjson = JsonOnly
        try:
            reference = import_rows.parse_line(1, line, now=now, dimension=3)
        finally:
            import_rows.orjson = real
        assert repr(fast) == repr(reference)

    check()


def test_the_one_difference_orjson_makes_is_the_reason_a_huge_integer_in_a_vector_is_refused():
    from server.bulk.rows import RowError, parse_line

    now = datetime(2026, 11, 30, tzinfo=UTC)
    with np.errstate(over="ignore"):
        row = parse_line(1, '{"text": "t", "vector": [1, 2, 18446744073709551616]}', now=now, dimension=3)
    assert isinstance(row, RowError) and "finite numbers" in row.reason  # json's way: "list of numbers"


def test_the_arena_cap_applies_here_and_yields_to_the_environment(monkeypatch):
    from server.arenas import limit_malloc_arenas

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_malloc_arenas() is True  # glibc, as on the machines esfis runs on
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False
