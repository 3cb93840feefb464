"""A search narrowed to an allow-set of ids (recall's filter over data, decided outside
``indexing``): the ``k`` best of the allowed rows valid now, as an exact scan of those rows finds
them, in a small partition (one file) and in a large one (a persisted image whose IVF lists
would hold none of them, and rows written since). The allowed rows are chosen far from the
query, so the top ``k`` by cosine over the whole partition holds none of them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import indexing.partitions.image_cache as image_cache
from indexing.partitions.store import VectorStore
from indexing.rows import Row

DIM = 32
KEY = "space:filtered"
NOW = 1_000


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def written(root: Path, n: int, *, since: int) -> tuple[VectorStore, np.ndarray, list[str]]:
    """``n`` rows in clusters, the last ``since`` of them written after the image (if any)."""
    rng = np.random.default_rng(7)
    centres = unit(rng.normal(size=(30, DIM)))
    vectors = unit(centres[rng.integers(0, 30, size=n)] + 0.15 * rng.normal(size=(n, DIM)))
    ids = [f"r{i}" for i in range(n)]
    store = VectorStore(root, model="m", dimension=DIM)
    first = n - since
    for start in range(0, first, 500):
        end = min(start + 500, first)
        store.add(KEY, [Row(ids[i], f"text {i}", vectors[i], 0, 0, None) for i in range(start, end)], compact=False)
    store.settle(KEY)
    if since:
        store.add(KEY, [Row(ids[i], f"text {i}", vectors[i], 0, 0, None) for i in range(first, n)])
    return store, vectors, ids


def exact(vectors: np.ndarray, ids: list[str], allowed: list[str], query: np.ndarray, k: int) -> list[str]:
    rows = [ids.index(i) for i in allowed]
    scores = vectors[rows] @ query
    return [allowed[j] for j in np.argsort(-scores, kind="stable")[:k]]


@pytest.mark.parametrize(("n", "since", "threshold"), [(200, 0, 10_000), (2_500, 40, 2_000)], ids=["small", "large"])
def test_allowed_search_is_the_exact_best_of_the_allowed_rows(tmp_path, monkeypatch, n, since, threshold):
    monkeypatch.setattr(image_cache, "ANN_THRESHOLD", threshold)
    store, vectors, ids = written(tmp_path, n, since=since)
    if since:
        assert store.live_partition(KEY).base is not None  # served from an image, IVF lists and all
    query = vectors[0]
    cosines = vectors @ query
    # The allowed rows: the farthest from the query, a few of them written since the image.
    far = list(dict.fromkeys([ids[i] for i in np.argsort(cosines)[:15]] + ids[-3:]))
    top = store.search(KEY, query, 10, now=NOW)
    assert not set(top.hits[j].id for j in range(len(top))) & set(far)
    narrowed = store.search(KEY, query, 10, now=NOW, allow=far)
    assert [h.id for h in narrowed.hits] == exact(vectors, ids, far, query, 10)
    everything = store.search(KEY, query, 100, now=NOW, allow=far)
    assert sorted(h.id for h in everything.hits) == sorted(far)  # never fewer while allowed rows remain
    assert everything.candidates == len(far)


def test_allowed_search_keeps_validity_and_ignores_unknown_ids(tmp_path):
    store, vectors, ids = written(tmp_path, 50, since=0)
    store.end_validity(KEY, "r3", NOW - 1)  # ended before now: no candidate, allowed or not
    result = store.search(KEY, vectors[3], 10, now=NOW, allow=["r3", "r4", "nowhere"])
    assert [h.id for h in result.hits] == ["r4"]
    assert store.search(KEY, vectors[3], 10, now=NOW, allow=[]).hits == []


def test_allowed_search_with_text_ranks_only_allowed_rows(tmp_path):
    store, vectors, ids = written(tmp_path, 120, since=0)
    allowed = ids[60:70]
    result = store.search(KEY, vectors[0], 5, now=NOW, text="text", allow=allowed)
    assert len(result) == 5 and {h.id for h in result.hits} <= set(allowed)
