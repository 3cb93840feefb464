"""Recall as a pipeline (``server/facade/recall.py``, issue 71): followed from the façade's verb,
a recall goes down the house and climbs back up in at most two places (a lower room calling into a
higher one: the group commit running the recall's bookkeeping, and on PostgreSQL the partitions'
sync the store is handed), and every stage the pipeline names is timed under that name."""

from __future__ import annotations

import sys
from pathlib import Path

import server
from server import metrics
from server.facade import recall as recalling

ROOT = Path(server.__file__).resolve().parent.parent


def _layer(module: str) -> int:
    """Interfaces 4, the façade 3, the core and the vocabulary 2, indexing 1."""
    if module.startswith(("server/http/", "server/cli/", "server/mcp/", "server/web/")):
        return 4
    if module.startswith("server/facade/"):
        return 3
    return 1 if module.startswith("indexing/") else 2


def _ours(filename: str) -> str | None:
    path = Path(filename)
    if not path.is_absolute() or ".venv" in path.parts:
        return None
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None


def _calls(call) -> list[tuple[str, str]]:
    """(caller's module, callee's module) of every call between this repository's modules."""
    seen: list[tuple[str, str]] = []

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = _ours(frame.f_code.co_filename)
        if callee is None:
            return
        back = frame.f_back
        while back is not None and _ours(back.f_code.co_filename) is None:
            back = back.f_back
        if back is not None:
            seen.append((_ours(back.f_code.co_filename), callee))  # type: ignore[arg-type]

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def test_a_recall_climbs_back_up_at_most_twice(fake_service):
    svc = fake_service
    svc.operator.create_space("acme")
    writer = svc.caller("writer", space="acme")
    for i in range(30):
        svc.remember(writer, f"acme deploys service {i} with argo", dedupe=False, data={"n": i})
    reader = svc.caller("reader", space="acme", run="r1")
    svc.recall(reader, "how does acme deploy?", where={"n": {"$gte": 3}})  # warm: the run opened
    calls = _calls(lambda: svc.recall(reader, "how does acme deploy?", where={"n": {"$gte": 3}}))
    assert any(callee == "server/facade/recall.py" for _, callee in calls)
    # Each place a lower room calls into a higher one, once however often: the group commit
    # running the recall's bookkeeping; on PostgreSQL, the partitions' sync a store is handed.
    climbs = {(a, b) for a, b in calls if _layer(b) > _layer(a) and not a.startswith("tests/")}
    assert len(climbs) <= 2, sorted(climbs)


def test_every_stage_the_pipeline_names_is_timed_under_its_name():
    import re

    named = set(re.findall(r'_stage\("(\w+)"\)', Path(recalling.__file__).read_text()))
    assert named == set(metrics.STAGES) - {"encoding"}, named  # encoding: the HTTP answer's JSON
