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


# -- commits that need not wait for the disk (``durable=False``, docs/guarantees.md) ----------


def _sync(tx) -> object:
    """How this transaction's commit reaches the disk, read from the connection itself: SQLite's
    ``synchronous`` (2 FULL, 1 NORMAL), PostgreSQL's ``synchronous_commit``."""
    from tests.catalogs import BACKEND

    if BACKEND == "postgresql":
        row = tx.execute("SHOW synchronous_commit").fetchone()
        return row["synchronous_commit"] if isinstance(row, dict) else row[0]
    return tx.execute("PRAGMA synchronous").fetchone()[0]


LIGHT = {"sqlite": 1, "postgresql": "off"}


def _settings(catalog) -> tuple[object, object]:
    """(a durable commit's setting, a light one's): the test cluster may run PostgreSQL with
    ``synchronous_commit`` off throughout (tests/catalogs.py), SQLite runs FULL."""
    from tests.catalogs import BACKEND

    with catalog.transaction() as tx:
        return _sync(tx), LIGHT[BACKEND]


def _reading(key: str, seen: dict):
    def work(tx) -> str:
        seen[key] = _sync(tx)
        return _insert(key)(tx)

    return work


def test_a_group_waits_for_the_disk_when_any_of_its_pieces_must(catalog, home):
    commits = GroupCommit(catalog)
    durable, _ = _settings(catalog)
    seen: dict[str, object] = {}
    first, gate = _held_first(commits, catalog)
    boxes: list = []
    threads = []
    for key, flushed in (("gc-light", False), ("gc-heavy", True)):
        box: dict = {}
        boxes.append(box)
        t = threading.Thread(
            target=lambda k=key, d=flushed, b=box: b.setdefault("v", commits.run(_reading(k, seen), durable=d))
        )
        t.start()
        threads.append(t)
        _until(lambda n=len(threads): len(commits._queue) == n)
    gate.set()
    first.join(30)
    for t in threads:
        t.join(30)
    assert commits.groups == {1: 1, 2: 1}
    assert seen == {"gc-light": durable, "gc-heavy": durable}  # one transaction, flushed for both
    assert _keys(home, "gc-") == {"gc-held", "gc-light", "gc-heavy"}


def test_bookkeeping_alone_commits_without_waiting_for_the_disk_and_is_seen(catalog, home):
    commits = GroupCommit(catalog)
    durable, light = _settings(catalog)
    seen: dict[str, object] = {}
    assert commits.run(_reading("gc-light", seen), durable=False) == "gc-light"
    assert "gc-light" in _keys(home, "gc-")  # committed: another connection sees it
    assert commits.run(_reading("gc-heavy", seen)) == "gc-heavy"
    assert seen == {"gc-light": light, "gc-heavy": durable}  # the setting went back after it


def test_a_refused_light_commit_leaves_the_connection_waiting_for_the_disk(catalog, home):
    durable, light = _settings(catalog)
    seen: dict[str, object] = {}
    with pytest.raises(RuntimeError):
        with catalog.transaction(durable=False) as tx:
            seen["inside"] = _sync(tx)
            raise RuntimeError("refused")
    with catalog.transaction() as tx:
        seen["after"] = _sync(tx)
    assert catalog.write_returning("INSERT INTO meta (key, value) VALUES ('gc-r', 'v') RETURNING key", durable=False)
    with catalog.transaction() as tx:
        seen["after returning"] = _sync(tx)
    assert seen == {"inside": light, "after": durable, "after returning": durable}


def test_a_recall_waits_for_the_disk_only_when_its_run_opens_or_its_marks_grow(fake_service):
    """The barrier's memory (what a run read) is never left to a power cut; the delivery of a
    recall that adds nothing to it may be (docs/guarantees.md, "What a power cut may take")."""
    svc = fake_service
    for name in ("acme", "acme/platform"):
        svc.operator.create_space(name)
    svc.remember(svc.caller("writer", space="acme"), "Acme deploys with ArgoCD")
    commits = svc._parts.commits
    asked: list[bool] = []
    run = commits.run

    def spying(work, *, durable=True):  # forwards every call: only what each asked is noted
        asked.append(durable)
        return run(work, durable=durable)

    commits.run = spying  # type: ignore[method-assign]
    reader = svc.caller("reader", space="acme", run="r1")
    svc.recall(reader, "how does acme deploy?")  # opens the run, carries acme
    svc.recall(reader, "how does acme deploy?")  # nothing new: acme's mark is carried
    svc.remember(svc.caller("writer", space="acme/platform"), "Acme's platform deploys with Flux")
    svc.recall(reader, "how does acme deploy?")  # acme/platform's memory too: the marks grow
    svc.recall(reader, "how does acme deploy?")
    assert asked == [True, False, True, False]
