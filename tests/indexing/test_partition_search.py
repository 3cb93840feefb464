"""Search inside one partition: validity before ranking, exact below the ANN threshold, and the
IVF index above it keeping recall@10 high on clustered vectors."""

from __future__ import annotations

import numpy as np
import pytest

from indexing.partitions.partition import LivePartition
from indexing.partitions.store import VectorStore, table_name
from indexing.relevance import ann
from indexing.relevance.ann import IvfLists, list_count_for, nearest, train, training_sample
from indexing.rows import Row, RowBatch

DIM = 32


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def clustered(n: int, dim: int, clusters: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = unit(rng.normal(size=(clusters, dim)))
    labels = rng.integers(0, clusters, size=n)
    return unit(centres[labels] + 0.35 * rng.normal(size=(n, dim)) / np.sqrt(dim) * 3)


def rows(vectors: np.ndarray, valid_until=None) -> list[Row]:
    return [Row(f"r{i}", f"text {i}", v, 0, 0, valid_until) for i, v in enumerate(vectors)]


def test_expired_rows_never_take_a_place_in_the_top_k():
    rng = np.random.default_rng(1)
    snap = LivePartition(dimension=DIM)
    query = unit(rng.normal(size=DIM))
    near = unit(np.tile(query, (5, 1)) + 0.01 * rng.normal(size=(5, DIM)))
    snap.append(RowBatch.of([Row(f"old{i}", "old", v, 0, 0, 100) for i, v in enumerate(near)]))
    snap.append(RowBatch.of(rows(unit(rng.normal(size=(20, DIM))))))
    result = snap.search(query, 3, now=100)
    assert len(result.hits) == 3 and not any(h.id.startswith("old") for h in result.hits)
    assert result.ended == 5 and result.candidates == 20


def test_rows_not_yet_valid_are_excluded():
    snap = LivePartition(dimension=DIM)
    v = unit(np.ones(DIM))
    snap.append(RowBatch.of([Row("future", "f", v, 0, 500, None), Row("now", "n", v, 0, 0, None)]))
    assert [h.id for h in snap.search(v, 5, now=100).hits] == ["now"]
    assert snap.search(v, 5, now=100).pending == 1


def test_exact_search_is_best_first_and_exact():
    vectors = clustered(3000, DIM, 20)
    snap = LivePartition(dimension=DIM)
    snap.append(RowBatch.of(rows(vectors)))
    query = vectors[7]
    hits = snap.search(query, 10, now=1).hits
    truth = np.argsort(-(vectors @ query))[:10]
    assert [h.id for h in hits] == [f"r{i}" for i in truth]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_ivf_recall_at_10_on_clustered_vectors():
    vectors = clustered(60_000, 64, 300, seed=3)
    centroids = train(vectors[training_sample(len(vectors))], list_count_for(len(vectors)))
    lists, order = IvfLists.of(centroids, nearest(vectors, centroids))
    grouped = vectors[order]
    lists.calibrate(grouped)
    rng = np.random.default_rng(4)
    recalls = []
    for qi in rng.choice(len(vectors), size=50, replace=False):
        query = unit(vectors[qi] + 0.05 * rng.normal(size=64))
        truth = set(np.argsort(-(grouped @ query))[:10])
        rows_, scores = lists.candidates(grouped, query)
        got = set(rows_[np.argsort(-scores)[:10]])
        recalls.append(len(truth & got) / 10)
    assert np.mean(recalls) >= 0.95
    assert lists.nprobe < len(lists.centroids)  # an index, not a scan


def skewed(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Rows as one person's notes cluster: a few topics, sub-topics of very unequal weight inside
    them, so some regions are far denser than others."""
    rng = np.random.default_rng(seed)
    topics = unit(rng.normal(size=(4, dim)))
    subtopics = unit(topics[rng.integers(0, 4, size=200)] + 0.3 * rng.normal(size=(200, dim)) / np.sqrt(dim))
    weights = rng.pareto(1.0, size=200) + 0.05
    picks = rng.choice(200, size=n, p=weights / weights.sum())
    return unit(subtopics[picks] + 0.4 * rng.normal(size=(n, dim)) / np.sqrt(dim))


def test_crowded_lists_are_split_so_a_question_scores_fewer_rows_for_the_same_recall():
    vectors = skewed(60_000, DIM, seed=5)
    sample = vectors[training_sample(len(vectors))]
    lists = list_count_for(len(vectors))
    plain = ann._kmeans(np.ascontiguousarray(sample), lists, np.random.default_rng(0), ann.KMEANS_ITERATIONS)
    split = train(sample, lists)
    sizes = np.bincount(nearest(sample, split), minlength=len(split))
    assert len(split) > lists and sizes.max() <= 2 * ann.CROWDED_LIST * len(sample) / lists
    rng = np.random.default_rng(6)
    questions = unit(vectors[rng.choice(len(vectors), size=60, replace=False)] + 0.3 * rng.normal(size=(60, DIM)) / 6)
    scored, recall = {}, {}
    for name, centroids in (("plain", plain), ("split", split)):
        index, order = IvfLists.of(centroids, nearest(vectors, centroids))
        grouped = vectors[order]
        index.calibrate(grouped)
        counts, found = [], []
        for q in questions:
            rows_, scores = index.candidates(grouped, q)
            counts.append(len(rows_))
            found.append(len(set(np.argsort(-(grouped @ q))[:10]) & set(rows_[np.argsort(-scores)[:10]])) / 10)
        scored[name], recall[name] = np.mean(counts), np.mean(found)
    assert scored["split"] < 0.67 * scored["plain"], scored
    assert recall["split"] >= 0.95, recall


def test_a_crowd_of_one_repeated_text_adds_no_copies_of_a_centroid():
    """Rows that are all the same vector (one text stored many times) crowd a list that no split
    can divide: the split adds no centroid that another already is."""
    vectors = skewed(60_000, DIM, seed=7)
    vectors[:20_000] = vectors[0]
    centroids = train(vectors[training_sample(len(vectors))], list_count_for(len(vectors)))
    assert len(np.unique(centroids, axis=0)) == len(centroids)


def test_table_names_are_injective_and_valid():
    keys = ["personal", "space:acme", "space:acme/platform", "space:acme_2fplatform", "space:a_b", "space:a/b"]
    names = [table_name(k) for k in keys]
    assert len(set(names)) == len(names)
    assert all(set(n) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-") for n in names)


def test_a_write_in_another_process_is_seen_on_the_next_search(tmp_path):
    first = VectorStore(tmp_path, model="m", dimension=DIM)
    second = VectorStore(tmp_path, model="m", dimension=DIM)  # another process, in effect
    v = unit(np.ones(DIM))
    first.add("space:acme", [Row("a", "one", v, 0, 0, None)])
    assert [h.id for h in second.search("space:acme", v, 5, now=1).hits] == ["a"]
    first.add("space:acme", [Row("b", "two", v, 0, 0, None)])
    assert {h.id for h in second.search("space:acme", v, 5, now=1).hits} == {"a", "b"}
    second.end_validity("space:acme", "a", 1)
    assert [h.id for h in first.search("space:acme", v, 5, now=2).hits] == ["b"]


@pytest.mark.parametrize("key", ["space:globex", "personal"])
def test_searching_a_partition_never_written_is_empty(tmp_path, key):
    store = VectorStore(tmp_path, model="m", dimension=DIM)
    assert store.search(key, unit(np.ones(DIM)), 5, now=1).hits == []
    assert not store.exists(key)


def test_purge_rewrites_a_large_fragment_that_held_the_row(tmp_path):
    """A fragment past the compaction target still gets rewritten when it holds a deletion."""
    store = VectorStore(tmp_path, model="m", dimension=8)
    rng = np.random.default_rng(0)
    n = 70_000
    vectors = unit(rng.normal(size=(n, 8)))
    secret = "zebra-secret-4471"
    store.add(
        "space:big", [Row(f"r{i}", secret if i == 123 else f"filler {i}", vectors[i], 0, 0, None) for i in range(n)]
    )
    store.purge("space:big", ["r123"])
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert len(store.row_ids("space:big")) == n - 1


def test_a_search_runs_numpy_blas_on_one_thread(tmp_path):
    """OpenBLAS's spinning threads slow a search on a busy machine; the store limits them."""
    from threadpoolctl import ThreadpoolController

    store = VectorStore(tmp_path, model="m", dimension=DIM)
    store.search("space:acme", unit(np.ones(DIM)), 5, now=1)
    libraries = ThreadpoolController().select(internal_api="openblas").info()
    numpys = [
        lib["num_threads"] for lib in libraries if "numpy" in lib["filepath"]
    ]  # another library may bring its own
    assert numpys == [1]


def _uncached(snap: LivePartition, query: np.ndarray, k: int, now: int):
    kept = snap._validity, snap._base_valid
    snap._validity = snap._base_valid = None
    result = snap.search(query, k, now=now)
    snap._validity, snap._base_valid = kept  # the next search meets the cache as it was
    return [h.id for h in result.hits], (result.candidates, result.ended, result.pending)


def test_the_validity_kept_between_searches_is_the_one_a_fresh_search_computes():
    # Searches remember which rows are valid until the clock passes a row's start or end, or a
    # row changes; any clock (backwards too) and any change must give what a fresh pass gives.
    rng = np.random.default_rng(5)
    snap = LivePartition(dimension=DIM)
    n = 300
    starts = rng.integers(0, 1000, size=n)
    ends = [None if rng.random() < 0.5 else int(s + rng.integers(1, 400)) for s in starts]
    snap.append(
        RowBatch.of(
            [Row(f"r{i}", "t", v, 0, int(starts[i]), ends[i]) for i, v in enumerate(unit(rng.normal(size=(n, DIM))))]
        )
    )
    query = unit(rng.normal(size=DIM))
    for step in range(600):
        now = int(rng.integers(-10, 1500))
        got = snap.search(query, 8, now=now)  # fills the cache, or meets it
        assert ([h.id for h in got.hits], (got.candidates, got.ended, got.pending)) == _uncached(snap, query, 8, now)
        change = step % 4
        if change == 1:
            snap.end(f"r{rng.integers(n)}", now + int(rng.integers(-2, 3)))
        elif change == 2:
            snap.remove([f"r{rng.integers(n)}"])
        elif change == 3:
            snap.append(
                RowBatch.of([Row(f"new{step}", "t", unit(rng.normal(size=DIM)), 0, now + int(rng.integers(-2, 3)))])
            )
        later = now + int(rng.integers(0, 3))  # inside the cached window, mostly
        again = snap.search(query, 8, now=later)
        assert ([h.id for h in again.hits], (again.candidates, again.ended, again.pending)) == _uncached(
            snap, query, 8, later
        )


def test_a_row_becomes_valid_when_the_clock_reaches_its_start_though_nothing_changed():
    snap = LivePartition(dimension=DIM)
    v = unit(np.ones(DIM))
    snap.append(RowBatch.of([Row("soon", "t", v, 0, 100), Row("now", "t", v, 0, 0, 200)]))
    assert [h.id for h in snap.search(v, 5, now=99).hits] == ["now"]
    assert {h.id for h in snap.search(v, 5, now=100).hits} == {"soon", "now"}
    assert [h.id for h in snap.search(v, 5, now=200).hits] == ["soon"]
    assert {h.id for h in snap.search(v, 5, now=150).hits} == {"soon", "now"}  # the clock set back


def test_merge_reads_only_the_rows_it_keeps_and_keeps_ties_in_partition_order():
    from indexing.rows import merge_best

    v = unit(np.ones(DIM))
    first, second = LivePartition(dimension=DIM), LivePartition(dimension=DIM)
    first.append(RowBatch.of([Row(f"a{i}", "t", v, 0, 0) for i in range(3)]))
    second.append(RowBatch.of([Row(f"b{i}", "t", v, 0, 0) for i in range(3)]))
    results = [first.search(v, 3, now=1), second.search(v, 3, now=1)]
    merged = merge_best(results, 4)
    assert [(i, h.id) for i, h in merged] == [(0, "a0"), (0, "a1"), (0, "a2"), (1, "b0")]


def test_a_write_holding_one_partition_keeps_no_other_partition_waiting(tmp_path):
    """Each partition has its own thread lock: a search (or a write) of one space never waits
    on a write of another, so an import writes partitions side by side and recall goes on."""
    import threading

    store = VectorStore(tmp_path, model="test", dimension=DIM)
    vector = unit(np.ones(DIM))
    store.add("beta", [Row("b1", "beta", vector, 0, 0, None)])
    held, release = threading.Event(), threading.Event()

    def hold_alpha() -> None:
        with store.locks.exclusive("alpha"):  # as a write of alpha holds it
            held.set()
            release.wait(30)

    writer = threading.Thread(target=hold_alpha)
    writer.start()
    try:
        assert held.wait(10)
        done: list[object] = []
        other = threading.Thread(
            target=lambda: done.extend(
                [store.search("beta", vector, 1, now=1), store.add("gamma", [Row("g1", "g", vector, 0, 0, None)])]
            )
        )
        other.start()
        other.join(10)
        assert done and [h.id for h in done[0].hits] == ["b1"], "beta waited on alpha's write"
    finally:
        release.set()
        writer.join()
