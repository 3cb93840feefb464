"""What an agent may read, listed a page at a time (``server.facade.browsing``): the spaces it
reads from where it stands, and the memories in them, newest first. Another space is never named
nor read; what a page of memories lists is read by the run exactly as a recall's results are: in
the delivery log before the answer leaves, and carried by the run (the data barrier). On the
hashing embedder: none of it ranks."""

from __future__ import annotations

import pytest

from server.errors import DataBarrier, InvalidInput, OutOfReach
from server.facade.browsing import SCANNED
from server.memories.listing import MAX_PAGE

SPACES = ["acme", "acme/platform", "acme/finance", "globex", "globex/platform"]


@pytest.fixture
def svc(fake_service):
    for name in SPACES:
        fake_service.operator.create_space(name)
    return fake_service


def seed(svc, space, text, **kw):
    return svc.remember(svc.caller("seeder", space=space), text, dedupe=False, **kw)


def every_memory(svc, caller, **kw):
    """Every page of the listing, followed by its cursor; and how many pages it took."""
    found, cursor, pages = [], None, 0
    while True:
        page = svc.list_memories(caller, cursor=cursor, **kw)
        found += page.memories
        pages += 1
        if page.next_cursor is None:
            return found, pages
        cursor = page.next_cursor


def every_space(svc, caller, **kw):
    found, cursor = [], None
    while True:
        page = svc.list_spaces(caller, cursor=cursor, **kw)
        found += page.spaces
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def test_spaces_are_those_the_caller_reads_from_where_it_stands(svc):
    acme = svc.caller("claude-code", space="acme", run="r1")
    page = svc.list_spaces(acme)
    assert (page.personal, page.spaces, page.next_cursor) == (True, ["acme", "acme/finance", "acme/platform"], None)
    platform = svc.list_spaces(svc.caller("claude-code", space="acme/platform", run="r2"))
    assert platform.spaces == ["acme/platform"]  # never its parent nor its sibling
    nowhere = svc.list_spaces(svc.caller("claude-code", run="r3"))
    assert (nowhere.personal, nowhere.spaces) == (True, [])
    svc.operator.deny("claude-code", "acme/finance")
    assert svc.list_spaces(svc.caller("claude-code", space="acme", run="r4")).spaces == ["acme", "acme/platform"]
    assert svc.list_spaces(svc.caller("cursor", space="acme", run="r5")).spaces == [
        "acme",
        "acme/finance",
        "acme/platform",
    ]


def test_spaces_come_a_keyset_page_at_a_time(svc):
    names = [f"acme/team-{i:03d}" for i in range(130)]
    svc.operator.create_spaces(names)
    acme = svc.caller("claude-code", space="acme", run="r1")
    first = svc.list_spaces(acme, limit=50)
    assert len(first.spaces) == 50 and first.next_cursor == first.spaces[-1]
    listed = every_space(svc, acme, limit=50)
    assert listed == sorted(["acme", "acme/finance", "acme/platform", *names])
    assert every_space(svc, acme, within="acme/platform") == ["acme/platform"]
    assert svc.list_spaces(acme, within="acme/team-007").personal is False


def test_an_acme_caller_never_sees_a_globex_space_or_memory(svc):
    seed(svc, "globex", "Globex authentication uses Clerk")
    seed(svc, "globex/platform", "Globex deploys on Fly")
    seed(svc, "acme", "Acme authentication uses Auth0")
    acme = svc.caller("claude-code", space="acme", run="r1")
    assert not any(s.startswith("globex") for s in every_space(svc, acme))
    memories, _ = every_memory(svc, acme)
    assert [m.text for m in memories] == ["Acme authentication uses Auth0"]
    for within in ("globex", "globex/platform", "acme2", "acme-corp", "nowhere"):  # alike, there or not
        with pytest.raises(OutOfReach, match=f"space '{within}' is not reachable from here"):
            svc.list_memories(acme, within=within)
        with pytest.raises(OutOfReach, match=f"space '{within}' is not reachable from here"):
            svc.list_spaces(acme, within=within)
    # A space a policy denies this AI answers as one that does not exist: its existence stays hidden.
    seed(svc, "acme/finance", "Acme's finance closes on the 25th")
    svc.operator.deny("claude-code", "acme/finance")
    for within in ("acme/finance", "acme/finance-old"):
        for listing in (svc.list_memories, svc.list_spaces):
            with pytest.raises(OutOfReach, match=f"space '{within}' is not reachable from here"):
                listing(svc.caller("claude-code", space="acme", run="r2"), within=within)
    # A cursor is a place in time, not a key to another space: a made-up one reads nothing else.
    assert svc.list_memories(acme, cursor=f"{2**62}.{2**62}").memories[0].space == "acme"


def test_memories_come_newest_first_a_keyset_page_at_a_time(svc, clock):
    written = []
    for i in range(7):
        clock.advance(seconds=1)
        written.append(seed(svc, "acme/platform" if i % 2 else "acme", f"fact number {i}").id)
    acme = svc.caller("claude-code", space="acme", run="r1")
    found, pages = every_memory(svc, acme, limit=3, within="acme")
    assert [m.id for m in found] == written[::-1] and pages == 3
    only_acme, _ = every_memory(svc, acme, within="acme", below=False)
    assert {m.space for m in only_acme} == {"acme"} and len(only_acme) == 4
    # Current memories only: a superseded one is not listed, its successor is.
    svc.replace(svc.caller("seeder", space="acme"), written[0], "fact number 0, corrected")
    texts = [m.text for m in every_memory(svc, svc.caller("claude-code", space="acme", run="r2"))[0]]
    assert "fact number 0" not in texts and texts[0] == "fact number 0, corrected"


def test_a_filter_selects_by_data_as_recall_does(svc):
    for i in range(12):
        seed(svc, "acme", f"decision {i}", data={"kind": "decision" if i % 3 == 0 else "habit", "n": i})
    acme = svc.caller("claude-code", space="acme", run="r1")
    found, pages = every_memory(svc, acme, where={"kind": "decision", "n": {"$gte": 3}}, limit=2)
    assert [m.data["n"] for m in found] == [9, 6, 3] and pages == 2
    with pytest.raises(InvalidInput) as bad:
        svc.list_memories(acme, where={"n": {"$near": 1}})
    assert bad.value.field == "filter"


def test_a_sparse_filter_answers_after_a_bounded_read_and_goes_on(svc, monkeypatch):
    monkeypatch.setattr("server.facade.browsing.SCANNED", 5)
    for i in range(8):
        seed(svc, "acme", f"note {i}", data={"wanted": i == 0})
    acme = svc.caller("claude-code", space="acme", run="r1")
    first = svc.list_memories(acme, where={"wanted": True})
    assert first.memories == [] and first.next_cursor is not None  # five read, none matched
    second = svc.list_memories(acme, where={"wanted": True}, cursor=first.next_cursor)
    assert [m.text for m in second.memories] == ["note 0"] and second.next_cursor is None
    assert SCANNED >= MAX_PAGE


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda s, c: s.list_memories(c, limit=0), "limit"),
        (lambda s, c: s.list_memories(c, limit=MAX_PAGE + 1), "limit"),
        (lambda s, c: s.list_memories(c, cursor="yesterday"), "cursor"),
        (lambda s, c: s.list_memories(c, within="Acme"), "within"),
        (lambda s, c: s.list_spaces(c, limit=True), "limit"),
        (lambda s, c: s.list_spaces(c, cursor="../globex"), "cursor"),
    ],
    ids=["limit 0", "limit 201", "memory cursor", "within", "limit bool", "space cursor"],
)
def test_a_bad_page_is_refused_naming_its_field(svc, call, field):
    with pytest.raises(InvalidInput) as refused:
        call(svc, svc.caller("claude-code", space="acme", run="r1"))
    assert refused.value.field == field


def test_listed_memories_are_in_the_delivery_log_by_id_never_by_text(svc):
    ids = [seed(svc, "acme", f"acme fact {i}").id for i in range(3)]
    seed(svc, "globex", "Globex authentication uses Clerk")
    acme = svc.caller("claude-code", space="acme", run="r1")
    page = svc.list_memories(acme, limit=2)
    delivery = svc.operator.deliveries(ai="claude-code", last=1)[0]
    assert [i.memory_id for i in delivery.items] == [m.id for m in page.memories] == ids[::-1][:2]
    assert all(i.outcome == "delivered" for i in delivery.items)
    assert delivery.cut["space"] == 1  # Globex's memory, counted, never read
    assert "acme fact" not in repr(delivery)


def test_a_run_that_listed_a_memory_is_barred_from_writing_it_elsewhere(svc):
    seed(svc, "acme/platform", "the staging database password is in vault path secret/acme-stg")
    run = svc.caller("claude-code", space="acme", run="session-1")
    assert svc.list_spaces(run).spaces  # naming spaces carries nothing
    assert svc.list_memories(run, within="acme/finance").memories == []  # seals the run in acme
    svc.remember(svc.caller("claude-code", space="acme/finance", run="session-1"), "finance closes on the 5th")
    listed = svc.list_memories(run, within="acme/platform")
    assert [m.space for m in listed.memories] == ["acme/platform"]
    with pytest.raises(DataBarrier, match="data_barrier.*'space:acme/platform'.*acme/finance"):
        svc.remember(svc.caller("claude-code", space="acme/finance", run="session-1"), "the password: secret/acme-stg")
    svc.remember(svc.caller("claude-code", space="acme", run="session-1"), "platform keeps its secrets in vault")
