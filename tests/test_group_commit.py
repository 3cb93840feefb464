"""Group commit (``server.memories.group_commit``) on the real catalog, either backend: pieces of work that
meet share one transaction, each caller returns only once its own piece is committed, and a
piece that fails fails only its caller.
"""

from __future__ import annotations

import threading
import time

import pytest

from server.catalog import open_catalog
from server.memories.group_commit import GroupCommit
from tests.catalogs import catalog_rows, settings_for


@pytest.fixture
def catalog(home):
    handle = open_catalog(settings_for(home))
    yield handle
    handle.close()


def _insert(key: str):
    def work(tx) -> str:
        tx.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, "v"))
        return key

    return work


def _keys(home, prefix: str) -> set[str]:
    """Through another connection: only what is committed."""
    return {r[0] for r in catalog_rows(home, "SELECT key FROM meta WHERE key LIKE ?", (prefix + "%",))}


def _until(condition) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.001)


def _held_first(commits: GroupCommit, catalog):
    """A first piece that holds its transaction open until the gate opens."""
    gate, entered = threading.Event(), threading.Event()

    def held(tx) -> str:
        entered.set()
        assert gate.wait(60)
        return _insert("gc-held")(tx)

    thread = threading.Thread(target=commits.run, args=(held,))
    thread.start()
    assert entered.wait(30)
    return thread, gate


def _run_all(commits: GroupCommit, works, home) -> list[dict]:
    boxes: list[dict] = [{} for _ in works]

    def one(i: int) -> None:
        try:
            boxes[i]["value"] = commits.run(works[i])
            boxes[i]["seen"] = boxes[i]["value"] in _keys(home, "gc-")
        except BaseException as exc:
            boxes[i]["error"] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(works))]
    for t in threads:
        t.start()
    return [boxes, threads]  # type: ignore[list-item]


def test_pieces_that_queue_behind_a_commit_share_the_next_transaction(catalog, home):
    commits = GroupCommit(catalog)
    first, gate = _held_first(commits, catalog)
    boxes, threads = _run_all(commits, [_insert(f"gc-{i}") for i in range(10)], home)
    _until(lambda: len(commits._queue) == 10)
    assert _keys(home, "gc-") == set()  # nothing committed while the first holds its transaction
    gate.set()
    first.join(30)
    for t in threads:
        t.join(30)
    assert [b.get("value") for b in boxes] == [f"gc-{i}" for i in range(10)]
    assert all(b["seen"] for b in boxes)  # each caller returned with its row committed
    assert commits.groups == {1: 1, 10: 1}
    assert _keys(home, "gc-") == {"gc-held", *(f"gc-{i}" for i in range(10))}


def test_a_failing_piece_fails_only_its_caller(catalog, home):
    commits = GroupCommit(catalog)
    first, gate = _held_first(commits, catalog)

    def failing(tx) -> str:
        _insert("gc-doomed")(tx)
        raise RuntimeError("refused")

    works = [_insert("gc-a"), failing, _insert("gc-b")]
    boxes, threads = _run_all(commits, works, home)
    _until(lambda: len(commits._queue) == 3)
    gate.set()
    first.join(30)
    for t in threads:
        t.join(30)
    assert isinstance(boxes[1].get("error"), RuntimeError)
    assert boxes[0]["value"] == "gc-a" and boxes[2]["value"] == "gc-b"
    assert _keys(home, "gc-") == {"gc-held", "gc-a", "gc-b"}  # the failed piece left nothing


def test_a_lone_piece_commits_at_once_alone(catalog, home):
    commits = GroupCommit(catalog)
    for i in range(3):
        assert commits.run(_insert(f"gc-lone-{i}")) == f"gc-lone-{i}"
        assert f"gc-lone-{i}" in _keys(home, "gc-lone-")
    assert commits.groups == {1: 3}
