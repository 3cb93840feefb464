"""The operator's memories (``server.facade.curation``): keyset pages that show every memory of
a selection once, newest first, over a space and the spaces below; filters by AI, origin mark,
time written and state; a forget by filter that forgets exactly what its preview counted, with
a near miss on each side of every condition left whole, that finishes after a kill half way,
and that leaves no forgotten text on disk; the operator's search logged as the operator's;
a correction that supersedes. Runs on both catalogs (every test opens one)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from server.errors import InvalidInput, MemoryNotFound
from server.facade import PERSONAL, MemoryFilter
from tests.conftest import ESFIS_BIN, cli_env
from tests.helpers import files_containing

ROOT = Path(__file__).resolve().parents[1]


def seed(service, clock) -> dict[str, str]:
    """acme (with acme/platform below), globex; two AIs; slack and email marks; two days."""
    op = service.operator
    for name in ("acme", "acme/platform", "globex"):
        op.create_space(name)
    ids: dict[str, str] = {}
    claude, cursor = service.caller("claude", space="acme"), service.caller("cursor", space="acme")
    for i in range(12):  # day one: plain facts, both AIs, the same instant for every other pair (ties)
        if i % 2 == 0:
            clock.advance(seconds=1)
        ids[f"plain{i}"] = service.remember(claude if i % 3 else cursor, f"acme plain fact number {i}").id
    clock.advance(days=1)
    day_two = clock()
    ids["target"] = service.remember(cursor, "slack says acme deploys friday", labels=["source:slack"]).id
    ids["target2"] = service.remember(cursor, "slack says acme freezes in december", labels=["source:slack"]).id
    # Near misses, one on each side of each condition of {acme, cursor, source:slack, since day two}:
    ids["other_ai"] = service.remember(claude, "slack says acme uses argo", labels=["source:slack"]).id
    ids["other_mark"] = service.remember(cursor, "email says acme uses argo", labels=["source:slack-archive"]).id
    below = service.caller("cursor", space="acme/platform")
    ids["below"] = service.remember(below, "slack says platform uses helm", labels=["source:slack"]).id
    ids["globex"] = service.remember(
        service.caller("cursor", space="globex"), "slack says globex uses clerk", labels=["source:slack"]
    ).id
    clock.advance(seconds=1)
    ids["personal"] = service.remember(cursor, "slack says I like tea", labels=["source:slack"], personal=True).id
    ids["day_two"] = day_two.isoformat()
    return ids


def every_page(op, f: MemoryFilter, limit: int) -> list[str]:
    seen, cursor = [], None
    while True:
        page = op.memory_page(f, cursor=cursor, limit=limit)
        seen += [item.memory.id for item in page.memories]
        assert len(page.memories) <= limit
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor


def test_keyset_pages_show_each_memory_once_newest_first_across_the_spaces_below(fake_service, clock):
    ids = seed(fake_service, clock)
    op = fake_service.operator
    whole = op.memory_page(MemoryFilter(space="acme", below=True), limit=200).memories
    assert len(whole) == 12 + 4 + 1  # acme's 16 and acme/platform's one; never globex's or personal
    times = [(item.memory.created_at, item.rowid) for item in whole]
    assert times == sorted(times, reverse=True)
    for limit in (1, 2, 5, 7):  # page edges on ties of time and across the two partitions
        assert every_page(op, MemoryFilter(space="acme", below=True), limit) == [i.memory.id for i in whole]
    assert ids["below"] not in every_page(op, MemoryFilter(space="acme"), 3)
    assert every_page(op, MemoryFilter(space=PERSONAL), 3) == [ids["personal"]]
    assert all(item.memory.text for item in whole)  # the page reads the texts it shows


def test_filters_select_by_ai_origin_time_and_state(fake_service, clock):
    ids = seed(fake_service, clock)
    op = fake_service.operator
    slack = every_page(op, MemoryFilter(space="acme", origin="source:slack"), 50)
    assert set(slack) == {ids["target"], ids["target2"], ids["other_ai"]}  # a whole mark, never a prefix
    assert every_page(op, MemoryFilter(space="acme", origin="slack"), 50) == slack  # a bare name is source:…
    recent_cursor = every_page(op, MemoryFilter(space="acme", ai="cursor", since=ids["day_two"]), 50)
    assert set(recent_cursor) == {ids["target"], ids["target2"], ids["other_mark"]}
    assert len(every_page(op, MemoryFilter(space="acme", before=ids["day_two"]), 50)) == 12
    new = op.correct_memory(ids["plain0"], "acme plain fact number 0, corrected")
    assert every_page(op, MemoryFilter(space="acme", state="superseded"), 50) == [ids["plain0"]]
    assert new.id in every_page(op, MemoryFilter(space="acme", state="current", ai="operator"), 50)
    assert op.memory(new.id).supersedes == ids["plain0"]
    assert op.memory(ids["plain0"]).memory.superseded_by == new.id
    for bad, field in (
        (MemoryFilter(space="acme", state="stale"), "state"),
        (MemoryFilter(space="acme", origin="source:Slack Export!"), "origin"),
        (MemoryFilter(space="acme", since="last tuesday"), "since"),
        (MemoryFilter(space="nowhere"), None),
    ):
        with pytest.raises(Exception) as raised:
            op.memory_page(bad)
        assert field is None or (isinstance(raised.value, InvalidInput) and raised.value.field == field)
    with pytest.raises(InvalidInput, match="cursor"):
        op.memory_page(MemoryFilter(space="acme"), cursor="page-2")


def test_forget_by_filter_forgets_what_the_preview_counted_and_no_near_miss(fake_service, clock, home):
    ids = seed(fake_service, clock)
    op = fake_service.operator
    chosen = MemoryFilter(space="acme", ai="cursor", origin="source:slack", since=ids["day_two"])
    preview = op.preview_forget(chosen)
    assert preview.count == 2
    later = fake_service.remember(
        fake_service.caller("cursor", space="acme"), "slack says late", labels=["source:slack"]
    )
    assert op.forget_where(chosen, up_to=preview.up_to) == 2  # the one written after the preview is not touched
    for gone in ("target", "target2"):
        with pytest.raises(MemoryNotFound):
            op.memory(ids[gone])
    for kept in ("other_ai", "other_mark", "below", "globex", "personal", "plain3"):
        assert op.memory(ids[kept]).memory.text
    assert op.memory(later.id).memory.text == "slack says late"
    assert files_containing(home, "slack says acme deploys friday") == []
    assert files_containing(home, "slack says acme uses argo") != []  # the check can see a text that is there
    assert op.preview_forget(chosen).count == 1  # the late one, now


_KILLED = textwrap.dedent(
    """
    import dataclasses, json, sys
    from indexing.embedding.testing import HashingEmbedder
    from server.facade import MemoryFilter, open_service
    from server.settings import Settings
    svc = open_service(dataclasses.replace(Settings.from_env(), model=None), embedder=HashingEmbedder())
    where = json.loads(sys.argv[1])
    chosen = MemoryFilter(**where)
    print(svc.operator.forget_where(chosen, up_to=svc.operator.preview_forget(chosen).up_to))
    """
)


def test_a_forget_by_filter_killed_half_way_is_finished_by_the_next_open(fake_service, clock, home):
    from server.facade import open_service
    from tests.catalogs import settings_for

    ids = seed(fake_service, clock)
    fake_service.close()
    where = {"space": "acme", "origin": "source:slack"}
    env = cli_env(home, ESFIS_FAILPOINT="forget-where:after-intents")
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, json.dumps(where)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr[-2000:]  # killed after marking, before any text was purged
    assert files_containing(home, "slack says acme deploys friday") != []
    from indexing.embedding.testing import HashingEmbedder

    with open_service(settings_for(home), embedder=HashingEmbedder(), clock=clock) as reopened:
        for gone in ("target", "target2", "other_ai"):
            with pytest.raises(MemoryNotFound):
                reopened.operator.memory(ids[gone])
        for kept in ("other_mark", "below", "globex", "personal"):
            assert reopened.operator.memory(ids[kept]).memory.text
    for text in ("slack says acme deploys friday", "slack says acme freezes in december", "slack says acme uses argo"):
        assert files_containing(home, text) == []


def test_the_operators_search_is_logged_as_the_operators_and_counts_as_no_agents(fake_service, clock):
    ids = seed(fake_service, clock)
    op = fake_service.operator
    found, delivery_id = op.search_memories("acme deploys friday", MemoryFilter(space="acme", below=True))
    assert found and all(f.memory.space in ("acme", "acme/platform") for f in found)
    assert ids["globex"] not in {f.memory.id for f in found}
    assert all(abs(f.cosine) <= 1.0 for f in found)
    delivery = op.delivery(delivery_id)
    assert (delivery.ai, delivery.transport) == ("operator", "operator")
    assert "operator" not in op.known_ais()  # never an agent's, nor a step of any run
    assert any(d["delivery_id"] == delivery_id for d in op.memory(found[0].memory.id).deliveries)
    written, recalls = op.space_days("acme")
    assert sum(d.counts.get("cursor", 0) for d in written) == 7 and sum(d.counts.get("claude", 0) for d in written) == 9
    assert recalls == []  # the operator stands in no space: no recall from acme
    fake_service.recall(fake_service.caller("claude", space="acme"), "acme plain fact")
    fake_service.recall(fake_service.caller("claude", space="acme/platform"), "nothing at all here")
    _, recalls = op.space_days("acme")
    assert [d.counts for d in recalls] == [{"recalls": 1, "empty": 0}]


def test_the_cli_lists_shows_and_forgets_by_filter(service, clock, home):
    op = service.operator
    op.create_space("acme")
    cursor = service.caller("cursor", space="acme")
    kept = service.remember(cursor, "acme deploys with argo").id
    gone = service.remember(cursor, "slack says acme deploys on fridays", labels=["source:slack"]).id
    service.close()

    def esfis(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([ESFIS_BIN, *argv], env=cli_env(home), capture_output=True, text=True, timeout=120)

    listed = json.loads(esfis("memories", "list", "--where", '{"space": "acme"}', "--json").stdout)
    assert [m["id"] for m in listed["memories"]] == [gone, kept] and listed["next_cursor"] is None
    shown = esfis("memories", "show", gone)
    assert shown.stdout.strip() == "slack says acme deploys on fridays" and "source:slack" in shown.stderr
    where = '{"space": "acme", "origin": "slack"}'
    assert json.loads(esfis("forget", "--where", where, "--dry-run", "--json").stdout)["matched"] == 1
    refused = esfis("forget", "--where", where)  # no terminal to confirm at, and no --yes
    assert refused.returncode != 0 and "--yes" in refused.stderr
    bad = esfis("forget", "--where", '{"space": "acme", "colour": "red"}', "--dry-run")
    assert bad.returncode != 0 and "unknown key 'colour'" in bad.stderr
    assert esfis("forget", "--where", where, "--yes").stdout.strip() == "forgot 1 memory"
    left = json.loads(esfis("memories", "list", "--where", '{"space": "acme"}', "--json").stdout)["memories"]
    assert [m["id"] for m in left] == [kept]
    assert files_containing(home, "slack says acme deploys on fridays") == []


def test_a_forget_by_filter_marks_in_bounded_steps_and_a_rerun_finishes_one_cut_short(fake_service, monkeypatch):
    """Each step commits at most FORGET_BATCH marks (other writers pass between); a forget cut
    after two steps (here: the disk refuses the third) leaves exactly those forgotten, the rest
    whole, and running it again forgets the rest."""
    from indexing import failpoints
    from server.memories import forgetting

    monkeypatch.setattr(forgetting, "FORGET_BATCH", 3)
    fake_service.operator.create_space("acme")
    caller = fake_service.caller("cursor", space="acme")
    ids = [fake_service.remember(caller, f"acme batch fact {i} about deploy {i * 13}").id for i in range(10)]
    op = fake_service.operator
    chosen = MemoryFilter(space="acme", ai="cursor")
    failpoints.arm(["forget-where:after-step@2=enospc"])
    try:
        with pytest.raises(OSError):
            op.forget_where(chosen, up_to=op.preview_forget(chosen).up_to)
    finally:
        failpoints.arm(())
    assert op.preview_forget(chosen).count == 4  # two steps of three committed, the rest untouched
    assert op.forget_where(chosen, up_to=op.preview_forget(chosen).up_to) == 4
    for id_ in ids:
        with pytest.raises(MemoryNotFound):
            op.memory(id_)
