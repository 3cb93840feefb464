"""A large partition's persisted image: built when data is written, mapped (not copied) by every
process that reads it, kept exact for rows written since, rebuilt by forget so no file keeps a
forgotten text, and published atomically so a build killed half-way leaves the old one serving.

The threshold is lowered to 2,000 rows here so the images stay small; the code paths are the
ones a million rows take."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import indexing.partitions.image_cache as image_cache
from indexing.partitions import compaction, image
from indexing.partitions.store import VectorStore, table_name
from indexing.rows import Row

DIM = 32
THRESHOLD = 2000
KEY = "space:big"
REPO = Path(__file__).resolve().parents[2]


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def clustered(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = unit(rng.normal(size=(40, DIM)))
    return unit(centres[rng.integers(0, 40, size=n)] + 0.2 * rng.normal(size=(n, DIM)))


def rows(vectors: np.ndarray, start: int = 0, text=lambda i: f"text {i}") -> list[Row]:
    return [Row(f"r{start + i}", text(start + i), v, 0, 0, None) for i, v in enumerate(vectors)]


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch):
    monkeypatch.setattr(image_cache, "ANN_THRESHOLD", THRESHOLD)


def imported(root: Path, vectors: np.ndarray, text=lambda i: f"text {i}") -> VectorStore:
    """Written as the importer writes: batches without routine compaction, then settle."""
    store = VectorStore(root, model="m", dimension=DIM)
    for start in range(0, len(vectors), 500):
        store.add(KEY, rows(vectors[start : start + 500], start, text), compact=False)
    store.settle(KEY)
    return store


def image_folder(root: Path) -> Path:
    return root / f"{table_name(KEY)}.image"


def test_the_index_is_built_at_import_and_a_reader_maps_it_without_building(tmp_path):
    vectors = clustered(3000)
    writer = imported(tmp_path, vectors)
    assert writer.stats.built[KEY] == 1
    assert (image_folder(tmp_path) / "current").is_file()
    reader = VectorStore(tmp_path, model="m", dimension=DIM)  # another process, in effect
    result = reader.search(KEY, vectors[5], 10, now=1)
    assert reader.stats.built[KEY] == 0  # the first read builds nothing
    snap = reader.live_partition(KEY)
    assert snap.base is not None and isinstance(snap.base.vectors, np.memmap)  # mapped, not copied
    assert result.hits[0].id == "r5"
    assert result.scored < len(vectors)  # the IVF lists narrowed the rows scored


def test_recall_at_10_through_the_image_against_an_exact_scan(tmp_path):
    vectors = clustered(4000, seed=2)
    store = imported(tmp_path, vectors)
    rng = np.random.default_rng(3)
    found = 0
    for qi in rng.choice(len(vectors), size=40, replace=False):
        query = unit(vectors[qi] + 0.05 * rng.normal(size=DIM))
        truth = {f"r{i}" for i in np.argsort(-(vectors @ query))[:10]}
        found += len(truth & {h.id for h in store.search(KEY, query, 10, now=1).hits})
    assert found / 400 >= 0.95


def test_rows_written_replaced_and_forgotten_elsewhere_are_seen_exactly(tmp_path):
    vectors = clustered(3000)
    writer = imported(tmp_path, vectors)
    reader = VectorStore(tmp_path, model="m", dimension=DIM)
    assert reader.search(KEY, vectors[7], 1, now=1).hits[0].id == "r7"
    extra = unit(np.random.default_rng(9).normal(size=DIM))
    writer.add(KEY, [Row("fresh", "written after the build", extra, 0, 0, None)])
    writer.end_validity(KEY, "r7", 5)  # a row of the image, ended in the other process
    assert reader.search(KEY, extra, 1, now=10).hits[0].id == "fresh"
    assert "r7" not in {h.id for h in reader.search(KEY, vectors[7], 10, now=10).hits}
    assert reader.search(KEY, vectors[7], 1, now=2).hits[0].id == "r7"  # still valid before 5
    assert reader.live_partition(KEY).base is not None  # served by the image plus what came since
    assert len(reader.row_ids(KEY)) == 3001


def test_forget_rebuilds_the_image_so_no_file_keeps_the_text(tmp_path):
    secret = "zebrasecret4471"  # one word: its lexical term is the whole text
    vectors = clustered(3000)
    store = imported(tmp_path, vectors, text=lambda i: secret if i == 123 else f"filler {i}")
    reader = VectorStore(tmp_path, model="m", dimension=DIM)
    assert reader.search(KEY, vectors[123], 1, now=1).hits[0].text == secret
    assert reader.search(KEY, vectors[0], 1, now=1, text=secret).hits[0].id == "r123"  # the image's postings
    assert [p for p in tmp_path.rglob("lex_terms.arrow") if secret.encode() in p.read_bytes()]
    store.purge(KEY, ["r123"])
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert reader.text(KEY, "r123") is None
    assert "r123" not in {h.id for h in reader.search(KEY, vectors[123], 10, now=1).hits}
    assert store.stats.built[KEY] == 2  # the import's build, and the forget's


def test_a_partition_that_shrinks_below_the_threshold_loses_its_image(tmp_path):
    vectors = clustered(2100)
    store = imported(tmp_path, vectors)
    assert (image_folder(tmp_path) / "current").exists()
    store.purge(KEY, [f"r{i}" for i in range(200)])
    assert not image_folder(tmp_path).exists()
    assert len(VectorStore(tmp_path, model="m", dimension=DIM).row_ids(KEY)) == 1900


def test_small_writes_past_the_threshold_build_the_image_at_compaction(tmp_path, monkeypatch):
    monkeypatch.setattr(compaction, "COMPACT_EVERY", 4)
    store = VectorStore(tmp_path, model="m", dimension=DIM)
    vectors = clustered(2400)
    for start in range(0, 2400, 600):
        store.add(KEY, rows(vectors[start : start + 600], start))
    assert store.stats.built[KEY] == 1  # at the 4th write's compaction, past 2,000 rows
    assert VectorStore(tmp_path, model="m", dimension=DIM).live_partition(KEY).base is not None


def test_a_large_partition_without_an_image_gets_one_on_its_first_load_once(tmp_path):
    vectors = clustered(2500)
    store = VectorStore(tmp_path, model="m", dimension=DIM)
    store.add(KEY, rows(vectors), compact=False)  # no settle: as a store from before images
    assert not image_folder(tmp_path).exists()
    first = VectorStore(tmp_path, model="m", dimension=DIM)
    assert first.search(KEY, vectors[3], 1, now=1).hits[0].id == "r3"
    assert first.stats.built[KEY] == 1
    second = VectorStore(tmp_path, model="m", dimension=DIM)
    assert second.search(KEY, vectors[3], 1, now=1).hits[0].id == "r3"
    assert second.stats.built[KEY] == 0


KILLED_BUILD = textwrap.dedent(
    """
    import sys
    import indexing.partitions.image_cache as image_cache
    import indexing.partitions.store as store_module
    from indexing import failpoints
    from indexing.rows import Row
    import numpy as np
    image_cache.ANN_THRESHOLD = 2000
    store = store_module.VectorStore(sys.argv[1], model="m", dimension=32)
    rng = np.random.default_rng(5)
    v = rng.normal(size=(100, 32)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    store.add("space:big", [Row(f"n{i}", f"new {i}", v[i], 0, 0, None) for i in range(100)], compact=False)
    failpoints.arm([sys.argv[2]])
    store.purge("space:big", ["r1"])  # killed where the test says
    """
)


def test_a_build_killed_before_publishing_leaves_the_old_version_serving(tmp_path):
    """The build's process is killed as ``kill -9`` would, after writing its files, before the
    rename that publishes them."""
    vectors = clustered(3000)
    imported(tmp_path, vectors)
    before = (image_folder(tmp_path) / "current").read_text()
    done = subprocess.run(
        [sys.executable, "-c", KILLED_BUILD, str(tmp_path), "image:before-publish"],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
    )
    # The build runs in a process of its own: that one is killed, and the forget says so.
    assert done.returncode == 1 and "ImageBuildFailed" in done.stderr and "killed by signal 9" in done.stderr
    assert (image_folder(tmp_path) / "current").read_text() == before
    assert [p.name for p in image_folder(tmp_path).iterdir() if p.name.startswith("tmp-")]  # the half-built one
    reader = VectorStore(tmp_path, model="m", dimension=DIM)
    snap = reader.live_partition(KEY)
    assert snap.base is not None and snap.base.folder.name == before
    assert "r1" not in reader.row_ids(KEY) and "n5" in reader.row_ids(KEY)  # the table has the last word
    # The forget is retried (its intent is kept by the catalog): the image is rebuilt and swept.
    reader.purge(KEY, ["r1"])
    names = [p.name for p in image_folder(tmp_path).iterdir()]
    assert "current" in names and len(names) == 2 and before not in names


def test_an_image_of_another_format_is_rebuilt_not_misread(tmp_path):
    vectors = clustered(2500)
    imported(tmp_path, vectors)
    folder = image_folder(tmp_path)
    meta = folder / (folder / "current").read_text() / "meta.json"
    meta.write_text(meta.read_text().replace(f'"format": {image.IMAGE_FORMAT}', '"format": 99'))
    assert image.open_image(folder) is None
    store = VectorStore(tmp_path, model="m", dimension=DIM)
    assert store.search(KEY, vectors[4], 1, now=1).hits[0].id == "r4"
    assert store.stats.built[KEY] == 1


def test_rows_deleted_in_an_image_fragment_by_a_forget_killed_half_way_are_gone(tmp_path):
    """Killed after the table's delete, before its rewrite and the image's rebuild: the image
    still holds the row, the table's deletion file says it is gone, and the table wins."""
    vectors = clustered(3000)
    imported(tmp_path, vectors)
    done = subprocess.run(
        [sys.executable, "-c", KILLED_BUILD, str(tmp_path), "purge:after-delete"],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO)},
    )
    assert done.returncode == -9
    reader = VectorStore(tmp_path, model="m", dimension=DIM)
    assert "r1" not in reader.row_ids(KEY) and reader.text(KEY, "r1") is None
    assert "r1" not in {h.id for h in reader.search(KEY, vectors[1], 10, now=1).hits}
    assert len(reader.row_ids(KEY)) == 3099


def test_the_image_cut_counts_by_binary_search_match_a_pass_over_the_rows():
    from indexing.partitions.validity import ValidityCounts, validity_counts
    from indexing.rows import OPEN_END

    rng = np.random.default_rng(11)
    n = 5000
    starts = rng.integers(0, 100, size=n)
    ends = np.where(rng.random(n) < 0.5, OPEN_END, rng.integers(0, 120, size=n))  # some end before they start
    live = rng.random(n) < 0.9
    counts = ValidityCounts(live, starts, ends)
    for step in range(300):
        now = int(rng.integers(-5, 130))
        assert counts.at(now) == validity_counts(live, valid_from=starts, valid_until=ends, now=now), step
        row = int(rng.integers(0, n))
        if live[row] and step % 3 == 0:  # a forget
            counts.change(int(starts[row]), int(ends[row]), None)
            live[row] = False
        elif live[row]:  # a row's validity closed
            new_end = int(rng.integers(0, 120))
            counts.change(int(starts[row]), int(ends[row]), (int(starts[row]), new_end))
            ends[row] = new_end


def test_bm25_over_the_image_and_the_rows_written_since_finds_a_rare_word_no_probe_reached(tmp_path):
    vectors = clustered(3000)
    imported(tmp_path, vectors, text=lambda i: "quokka habitat notes" if i == 2222 else f"filler {i}")
    writer = VectorStore(tmp_path, model="m", dimension=DIM)
    extra = unit(np.random.default_rng(4).normal(size=DIM))
    writer.add(KEY, [Row("late", "wombat burrow notes", extra, 0, 0, None)])
    reader = VectorStore(tmp_path, model="m", dimension=DIM)
    far = -vectors[2222]  # a query vector pointing away from the row: only its words can find it
    assert reader.search(KEY, far, 3, now=1, text="quokka").hits[0].id == "r2222"
    assert reader.search(KEY, far, 3, now=1, text="wombat").hits[0].id == "late"  # a held row, same index
    assert reader.stats.postings[KEY] > 0
    assert reader.live_partition(KEY).base is not None


def test_the_cosine_spread_comes_from_the_images_contiguous_sample(tmp_path):
    # BM25's fusion scales by the cosine's spread over the valid rows. Taken by stride from the
    # mapped vectors.npy it paged most of the file into every reader (the report has the figure);
    # the image keeps an even sample of rows, contiguous, and the rows written since add theirs.
    from indexing.relevance.fusion import SPREAD_SAMPLE

    store = imported(tmp_path, clustered(20_000, seed=9))
    store.add(KEY, rows(clustered(30, seed=10), start=50_000), compact=False)
    snap = store.live_partition(KEY)
    base = snap.base
    assert base is not None and len(base.spread_rows) >= SPREAD_SAMPLE
    assert np.array_equal(np.asarray(base.spread_vectors), np.asarray(base.vectors)[base.spread_rows])
    valid = np.ones(base.rows + snap.rows, dtype=bool)
    valid[base.spread_rows[::2]] = False  # rows no longer valid leave the sample
    sample = snap.numbered().spread_sample(valid)
    kept = np.asarray(base.spread_vectors)[valid[base.spread_rows]]
    assert np.array_equal(sample, np.concatenate([kept, snap.vectors[: snap.rows]]))
