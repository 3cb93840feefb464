"""A partition loaded again (another process wrote; a write here was undone) starts its lexical
index from the one it had, when its first rows are the same, and indexes only the rows after
them (``loading._reuse_lexicon``): its fused ranking is the one a fresh load builds, row for row
and score for score, and an index whose rows changed is built again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from indexing.partitions.store import VectorStore
from indexing.relevance import lexical
from indexing.rows import Row

KEY = "space:acme"
DIM = 16
VECTORS = np.random.default_rng(1).normal(size=(60, DIM)).astype(np.float32)
VECTORS /= np.linalg.norm(VECTORS, axis=1, keepdims=True)
WORDS = ["deploy", "auth", "okta", "billing", "invoice", "queue", "cache", "gateway", "ledger", "runner"]


def row(i: int) -> Row:
    text = " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)) + f" item{i}"
    return Row(f"r{i}", text, VECTORS[i], i, 0, None)


def store_at(root: Path) -> VectorStore:
    return VectorStore(root, model="m", dimension=DIM)


def ranked(store: VectorStore, text: str) -> list[tuple[str, float]]:
    result = store.search(KEY, VECTORS[0], 20, now=10**6, text=text)
    return [(hit.id, round(hit.score, 6)) for hit in result.hits]


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows each ``LexicalIndex.build`` indexed from scratch."""
    seen: list[int] = []
    build = lexical.LexicalIndex.build.__func__  # type: ignore[attr-defined]

    def counted(cls, texts, *args, **kwargs):
        seen.append(len(texts))
        return build(cls, texts, *args, **kwargs)

    monkeypatch.setattr(lexical.LexicalIndex, "build", classmethod(counted))
    return seen


def test_a_partition_another_process_wrote_keeps_its_index_and_ranks_as_a_fresh_load(tmp_path: Path, builds):
    reader, writer = store_at(tmp_path), store_at(tmp_path)
    writer.add(KEY, [row(i) for i in range(30)])
    assert ranked(reader, "okta gateway") == ranked(store_at(tmp_path), "okta gateway")
    builds.clear()
    writer.add(KEY, [row(i) for i in range(30, 35)])  # the reader's partition is loaded again
    again = ranked(reader, "okta gateway ledger")
    assert builds == [], "the reader built its index again from scratch"
    builds.clear()
    assert again == ranked(store_at(tmp_path), "okta gateway ledger")  # a fresh load: built whole
    assert builds == [35] and any(id_ in {f"r{i}" for i in range(30, 35)} for id_, _ in again)


def test_a_partition_whose_rows_changed_builds_its_index_again(tmp_path: Path, builds):
    reader, writer = store_at(tmp_path), store_at(tmp_path)
    writer.add(KEY, [row(i) for i in range(30)])
    ranked(reader, "okta gateway")
    builds.clear()
    writer.purge(KEY, ["r3"])  # a forget: the rows the index was built over are not there
    writer.add(KEY, [row(40), row(41)])  # as many rows as before, or more: numbered otherwise
    again = ranked(reader, "okta gateway")
    assert builds, "an index over rows that changed was kept"
    assert again == ranked(store_at(tmp_path), "okta gateway") and "r3" not in dict(again)


def test_a_partition_let_go_after_a_write_here_keeps_its_index(tmp_path: Path, builds):
    store = store_at(tmp_path)
    store.add(KEY, [row(i) for i in range(30)])
    before = ranked(store, "billing invoice")
    builds.clear()
    store.live.drop(KEY)  # as a write that failed and was undone lets it go
    assert ranked(store, "billing invoice") == before and builds == []


def test_a_partition_removed_from_disk_leaves_nothing_of_its_texts_in_memory(tmp_path: Path):
    store = store_at(tmp_path)
    store.add(KEY, [row(i) for i in range(30)])
    ranked(store, "billing invoice")
    store.live.drop(KEY)
    assert store.live._left  # a let-go partition's index, kept for its next load
    store.drop(KEY)  # the space purged: its texts leave this process too
    assert not store.live._left and store.live.held(KEY) is None


def test_a_forget_in_a_partition_let_go_leaves_no_index_of_the_forgotten_text(tmp_path: Path):
    store = store_at(tmp_path)
    store.add(KEY, [row(i) for i in range(30)])
    ranked(store, "billing invoice")
    store.live.drop(KEY)
    store.purge(KEY, ["r5"])  # forgotten while the partition was let go
    assert not store.live._left
    assert "r5" not in dict(ranked(store, "billing invoice"))
