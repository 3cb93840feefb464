"""A small partition is one Arrow file until it outgrows it (``indexing.partitions.small_file``):
every row kept, searched as before, its texts gone from disk when purged, and a promotion to a
LanceDB table that a kill cannot leave half done."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from indexing.partitions import small_file
from indexing.partitions.store import VectorStore, table_name
from indexing.rows import Row
from tests.helpers import files_containing

KEY = "space:tenant-7"
DIM = 16
SECRET = "the vault key of tenant seven is kiwi-4411"


def unit(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def rows(start: int, stop: int, vectors: np.ndarray) -> list[Row]:
    return [Row(f"r{i}", f"note {i}", vectors[i], i, 0, None) for i in range(start, stop)]


def store_at(root: Path) -> VectorStore:
    return VectorStore(root, model="m", dimension=DIM)


def forms(root: Path) -> tuple[bool, bool]:
    """(whether the small file lies there, whether the table does)."""
    name = table_name(KEY)
    return (root / f"{name}.arrow").exists(), (root / f"{name}.lance").exists()


def test_a_partition_is_one_file_until_it_outgrows_it_then_a_table_with_every_row(tmp_path: Path):
    vectors = unit(small_file.SMALL_ROWS + 40)
    store = store_at(tmp_path)
    store.add(KEY, rows(0, 100, vectors))
    store.add(KEY, rows(100, small_file.SMALL_ROWS, vectors))
    assert forms(tmp_path) == (True, False)
    assert sorted(store_at(tmp_path).row_ids(KEY)) == sorted(f"r{i}" for i in range(small_file.SMALL_ROWS))
    store.add(KEY, rows(small_file.SMALL_ROWS, small_file.SMALL_ROWS + 40, vectors))  # past it
    assert forms(tmp_path) == (False, True)
    fresh = store_at(tmp_path)  # read back from disk, not from the writer's memory
    assert sorted(fresh.row_ids(KEY)) == sorted(f"r{i}" for i in range(len(vectors)))
    found = fresh.search(KEY, vectors[7], 5, now=10)
    assert found.hits[0].id == "r7" and found.hits[0].text == "note 7"
    assert [h.id for h in found.hits] == [f"r{i}" for i in np.argsort(-(vectors @ vectors[7]), kind="stable")[:5]]


def test_another_process_sees_each_write_to_a_small_partition(tmp_path: Path):
    vectors = unit(10)
    writer, reader = store_at(tmp_path), store_at(tmp_path)
    assert reader.row_ids(KEY) == []
    writer.add(KEY, rows(0, 5, vectors))
    assert sorted(reader.row_ids(KEY)) == [f"r{i}" for i in range(5)]
    writer.end_validity(KEY, "r3", 5)
    assert [h.id for h in reader.search(KEY, vectors[3], 10, now=6).hits if h.id == "r3"] == []
    writer.purge(KEY, ["r4"])
    assert sorted(reader.row_ids(KEY)) == [f"r{i}" for i in range(4)]


def test_an_ended_validity_is_on_disk(tmp_path: Path):
    vectors = unit(6)
    store_at(tmp_path).add(KEY, rows(0, 6, vectors))
    store_at(tmp_path).end_validity(KEY, "r2", 50)
    fresh = store_at(tmp_path)
    assert "r2" in {h.id for h in fresh.search(KEY, vectors[2], 6, now=49).hits}
    assert "r2" not in {h.id for h in fresh.search(KEY, vectors[2], 6, now=50).hits}
    stored = {b["id"]: b["valid_until"] for batch in fresh.stream(KEY) for b in batch.to_pylist()}
    assert stored["r2"] == 50 and stored["r1"] is None


def test_a_purge_leaves_the_text_in_no_file_a_killed_write_left_included(tmp_path: Path):
    vectors = unit(4)
    store = store_at(tmp_path)
    store.add(KEY, rows(0, 3, vectors) + [Row("secret", SECRET, vectors[3], 3, 0, None)])
    # A write killed before its rename leaves its temporary file, which may hold the text.
    small = tmp_path / f"{table_name(KEY)}.arrow"
    small_file.temp_of(small).write_bytes(small.read_bytes())
    assert len(files_containing(tmp_path, SECRET)) == 2
    store.purge(KEY, ["secret"])
    assert files_containing(tmp_path, SECRET) == []
    assert sorted(store_at(tmp_path).row_ids(KEY)) == ["r0", "r1", "r2"]
    # A partition's first write killed before its rename: only the temporary file holds the row,
    # and the purge of the orphans it left (``server.bulk.journal``) removes it.
    other = "space:tenant-8"
    first = tmp_path / f"{table_name(other)}.arrow"
    small_file.temp_of(first).write_bytes(SECRET.encode())
    store.purge(other, ["secret"])
    assert files_containing(tmp_path, SECRET) == [] and not first.exists()


def test_stream_and_ids_written_before_read_a_small_partition(tmp_path: Path):
    vectors = unit(5)
    store = store_at(tmp_path)
    store.add(KEY, rows(0, 5, vectors))
    assert store.ids_written_before(KEY, 3) == ["r0", "r1", "r2"]
    streamed = [b for b in store.stream(KEY, batch_size=2)]
    assert [len(b) for b in streamed] == [2, 2, 1]
    assert np.allclose(np.stack([np.asarray(v) for b in streamed for v in b.column("vector").to_pylist()]), vectors)
    assert store.partitions() == [KEY]
    store.drop(KEY)
    assert forms(tmp_path) == (False, False) and store.partitions() == []


KILLED_PROMOTION = textwrap.dedent(
    """
    import sys
    import numpy as np
    from indexing import failpoints
    from indexing.partitions import small_file
    from indexing.partitions.store import VectorStore
    from indexing.rows import Row
    small_file.SMALL_ROWS = 8
    store = VectorStore(sys.argv[1], model="m", dimension=16)
    v = np.random.default_rng(0).normal(size=(12, 16)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    rows = [Row(f"r{i}", f"note {i}", v[i], i, 0, None) for i in range(12)]
    store.add("space:tenant-7", rows[:6])
    failpoints.arm(["promote:after-table"])
    store.add("space:tenant-7", rows[6:])  # killed between the table's commit and the file's removal
    """
)


def test_a_promotion_killed_after_the_tables_commit_keeps_each_row_once(tmp_path: Path, monkeypatch):
    killed = subprocess.run([sys.executable, "-c", KILLED_PROMOTION, str(tmp_path)], cwd=Path(__file__).parents[2])
    assert killed.returncode == -9
    assert forms(tmp_path) == (True, True)  # both forms lie there
    monkeypatch.setattr(small_file, "SMALL_ROWS", 8)
    store = store_at(tmp_path)
    assert sorted(store.row_ids(KEY)) == sorted(f"r{i}" for i in range(12))  # the table's, each once
    store.add(KEY, [Row("r12", "note 12", unit(13)[12], 12, 0, None)])  # the next writer settles it
    assert forms(tmp_path) == (False, True)
    assert sorted(store_at(tmp_path).row_ids(KEY)) == sorted(f"r{i}" for i in range(13))


def test_a_promotion_killed_before_the_tables_commit_keeps_the_files_rows(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(small_file, "SMALL_ROWS", 8)
    vectors = unit(12)
    store_at(tmp_path).add(KEY, rows(0, 6, vectors))
    # What a kill inside Lance's create leaves: data written, no version committed.
    partial = tmp_path / f"{table_name(KEY)}.lance" / "data"
    partial.mkdir(parents=True)
    (partial / "half.lance").write_bytes(b"\0" * 64)
    store = store_at(tmp_path)
    assert sorted(store.row_ids(KEY)) == [f"r{i}" for i in range(6)]  # read from the file meanwhile
    store.add(KEY, rows(6, 12, vectors))  # the next writer removes the half table, then promotes
    assert forms(tmp_path) == (False, True)
    assert not (partial / "half.lance").exists()  # a half write's file may hold texts: it goes
    assert sorted(store_at(tmp_path).row_ids(KEY)) == sorted(f"r{i}" for i in range(12))


@pytest.mark.parametrize("batch", [1, 7])
def test_recall_over_a_small_partition_is_the_exact_answer(tmp_path: Path, batch: int):
    vectors = unit(60, seed=3)
    store = store_at(tmp_path)
    for start in range(0, 60, batch):
        store.add(KEY, rows(start, min(start + batch, 60), vectors))
    fresh = store_at(tmp_path)
    for q in (0, 17, 59):
        got = [h.id for h in fresh.search(KEY, vectors[q], 10, now=100).hits]
        assert got == [f"r{i}" for i in np.argsort(-(vectors @ vectors[q]), kind="stable")[:10]]


def test_long_texts_make_a_space_a_table_before_256_rows(tmp_path: Path):
    """A remember rewrites the whole file: its bytes are bounded, not only its rows."""
    vectors = unit(60)
    long = "x" * 30_000  # under the 32 KiB a memory may hold
    store = store_at(tmp_path)
    store.add(KEY, [Row(f"r{i}", f"{i} {long}", vectors[i], i, 0, None) for i in range(20)])
    assert forms(tmp_path) == (True, False)
    store.add(KEY, [Row(f"r{i}", f"{i} {long}", vectors[i], i, 0, None) for i in range(20, 40)])  # past 1 MiB
    assert forms(tmp_path) == (False, True)
    assert sorted(store_at(tmp_path).row_ids(KEY)) == sorted(f"r{i}" for i in range(40))


def test_several_partitions_written_at_once_each_hold_only_their_own_rows(tmp_path: Path):
    """``add_many`` (an import's thin spaces) makes one Arrow table of every partition's rows
    and writes each partition its slice: a row in the wrong slice would be another space's
    memory. Partitions of either form, one new and past the bounds at once, one a table already."""
    from indexing.rows import RowBatch

    vectors = unit(1000)
    store = store_at(tmp_path)
    store.add("space:was-a-table", rows(0, small_file.SMALL_ROWS + 1, vectors))
    store.add("space:was-small", rows(300, 305, vectors))
    plan = {"space:was-a-table": (400, 403), "space:was-small": (403, 410), "space:new": (410, 412)}
    plan["space:new-and-large"] = (500, 500 + small_file.SMALL_ROWS + 3)
    plan["space:new-and-one"] = (900, 901)
    store.add_many([(key, RowBatch.of(rows(a, b, vectors))) for key, (a, b) in plan.items()])
    fresh = store_at(tmp_path)
    expected = {
        "space:was-a-table": [*range(0, small_file.SMALL_ROWS + 1), *range(400, 403)],
        "space:was-small": [*range(300, 305), *range(403, 410)],
        "space:new": [*range(410, 412)],
        "space:new-and-large": [*range(500, 500 + small_file.SMALL_ROWS + 3)],
        "space:new-and-one": [900],
    }
    for key, numbers in expected.items():
        assert sorted(fresh.row_ids(key)) == sorted(f"r{i}" for i in numbers), key
        for i in numbers[-2:]:  # each row's own text and vector, not a neighbour's
            hit = fresh.search(key, vectors[i], 1, now=10).hits[0]
            assert (hit.id, hit.text) == (f"r{i}", f"note {i}")
    assert (tmp_path / f"{table_name('space:new-and-large')}.lance").exists()
    assert (tmp_path / f"{table_name('space:new')}.arrow").exists()
