"""A partition another process only appended to is brought up by its tail alone
(``tail.refresh``), and loaded whole whenever that cannot be told for sure: whichever store
wrote, every store sees what a fresh load sees, row for row and validity for validity."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from indexing.partitions import small_file, tail
from indexing.partitions.store import VectorStore, table_name
from indexing.rows import Row

KEY = "space:acme"
DIM = 16
VECTORS = np.random.default_rng(0).normal(size=(400, DIM)).astype(np.float32)
VECTORS /= np.linalg.norm(VECTORS, axis=1, keepdims=True)


@pytest.fixture(autouse=True)
def bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(small_file, "SMALL_ROWS", 8)
    monkeypatch.setattr(tail, "TAIL_ROWS", 5)


def row(i: int) -> Row:
    return Row(f"r{i}", f"note {i}", VECTORS[i], i, 0, None)


def store_at(root: Path) -> VectorStore:
    return VectorStore(root, model="m", dimension=DIM)


def view(store: VectorStore) -> dict[str, int]:
    """The live rows a store's search sees, with the end of their validity."""
    part = store.live_partition(KEY)
    return {id_: int(part.valid_until[part.row_of[id_]]) for id_ in part.live_ids()}


def tail_path(root: Path) -> Path:
    return root / f"{table_name(KEY)}.tail"


def test_a_reader_takes_the_rows_another_process_appended_to_the_tail_without_loading_again(tmp_path: Path):
    writer, reader = store_at(tmp_path), store_at(tmp_path)
    writer.add(KEY, [row(i) for i in range(20)])
    writer.add(KEY, [row(20)])
    assert view(reader) == view(store_at(tmp_path))
    loads = reader.stats.loaded[KEY]
    for i in range(21, 25):
        writer.add(KEY, [row(i)])
        assert view(reader) == view(store_at(tmp_path)) and f"r{i}" in view(reader)
    assert reader.stats.loaded[KEY] == loads and reader.stats.refreshed[KEY] == 4
    writer.add(KEY, [row(25)])  # the tail was full: folded into the table, so loaded whole
    assert view(reader) == view(store_at(tmp_path)) and reader.stats.loaded[KEY] == loads + 1


def test_a_fold_under_way_or_done_but_not_yet_announced_makes_the_reader_load_whole(tmp_path: Path):
    writer, reader = store_at(tmp_path), store_at(tmp_path)
    writer.add(KEY, [row(i) for i in range(20)])
    writer.add(KEY, [row(20)])
    view(reader)
    writer.add(KEY, [row(21)])  # the tail only: a refresh would do...
    os.replace(tail_path(tmp_path), tail.folding_of(tail_path(tmp_path)))  # ...but a fold is under way
    loads = reader.stats.loaded[KEY]
    assert "r21" in view(reader) and reader.stats.loaded[KEY] == loads + 1
    os.replace(tail.folding_of(tail_path(tmp_path)), tail_path(tmp_path))

    writer.add(KEY, [row(22)])
    held = tail.read(tail_path(tmp_path))
    assert held is not None
    # The fold's append and removal done, the version not yet moved (its writer is about to):
    writer.files.write_table(KEY, held.replace_schema_metadata(None), mode="append", fold=tail.id_of(held))
    os.unlink(tail_path(tmp_path))
    assert {"r20", "r21", "r22"} <= set(view(reader)) and reader.stats.loaded[KEY] == loads + 2


def test_a_forget_in_the_tail_whose_writer_died_before_announcing_it_is_never_taken_for_an_append(tmp_path: Path):
    writer, reader = store_at(tmp_path), store_at(tmp_path)
    writer.add(KEY, [row(i) for i in range(20)])
    writer.add(KEY, [row(20)])
    writer.add(KEY, [row(21)])
    assert "r20" in view(reader)
    held = tail.read(tail_path(tmp_path))
    assert held is not None
    tail.without(tail_path(tmp_path), held, ["r20"])  # the purge's rewrite; its writer killed before the version
    writer.add(KEY, [row(22)])  # the next write appends, and keeps the table's generation
    assert view(reader) == view(store_at(tmp_path)) and "r20" not in view(reader)


@pytest.mark.parametrize("seed", range(6))
def test_whichever_store_writes_every_store_sees_what_a_fresh_load_sees(tmp_path: Path, seed: int):
    rng = random.Random(seed)
    stores = [store_at(tmp_path) for _ in range(3)]
    stores[0].add(KEY, [row(i) for i in range(20)])
    n = 20
    for _ in range(60):
        store = rng.choice(stores)
        live = sorted(view(store))
        op = rng.choices(["one", "batch", "end", "forget"], weights=[8, 1, 1, 1])[0]
        if op == "one" or not live:
            store.add(KEY, [row(n)])
            n += 1
        elif op == "batch":  # past a tail's bound: straight into the table
            store.add(KEY, [row(i) for i in range(n, n + 7)])
            n += 7
        elif op == "end":
            store.end_validity(KEY, rng.choice(live), rng.randrange(1, 10**6))
        else:
            store.purge(KEY, [rng.choice(live)])
        fresh = view(store_at(tmp_path))
        for other in stores:
            assert view(other) == fresh
    assert sum(s.stats.refreshed[KEY] for s in stores) > 0  # the refresh was taken, not only loads


def test_a_refresh_that_finds_the_version_moved_meanwhile_leaves_the_partition_as_it_was(tmp_path: Path):
    writer, reader = store_at(tmp_path), store_at(tmp_path)
    writer.add(KEY, [row(i) for i in range(20)])
    writer.add(KEY, [row(20)])
    part = reader.live_partition(KEY)
    writer.add(KEY, [row(21)])
    assert not tail.refresh(tail_path(tmp_path), part, lambda: False)
    assert "r21" not in part.live_ids()
    assert tail.refresh(tail_path(tmp_path), part, lambda: True) and "r21" in part.live_ids()
