"""The data barrier (docs/design.md §7) through the façade: what a run read cannot be written where it
may not go, context references open only where their labels are reached, runs are sealed at
their first step, untrusted content taints what a run writes and gates its forget, and every
step lands in the trail. Logic on the hashing embedder; the laundering case on the real model."""

from __future__ import annotations

import pytest

from server.errors import DataBarrier, MemoryNotFound, OutOfReach, RunNotFound, UntrustedSource
from server.facade import PERSONAL
from server.labels import ELSEWHERE

SPACES = ["acme", "acme/platform", "acme/finance", "globex", "globex/platform"]
SECRET = "the staging database password is in vault path secret/acme-stg"


@pytest.fixture
def svc(fake_service):
    for name in SPACES:
        fake_service.operator.create_space(name)
    return fake_service


def at(svc, space, run, ai="claude-code"):
    return svc.caller(ai, space=space, run=run)


def seed(svc, space="acme/platform", text=SECRET, **kw):
    return svc.remember(svc.caller("seeder", space=space), text, **kw)


def steps(svc, caller, kind=None):
    _, trail = svc.operator.trail(caller.run_id)
    return [t.step for t in trail if kind is None or t.step.kind == kind]


def personal_count(svc):
    return svc._parts.memories.counts(["personal"])[0].get("personal", (0, 0))[0]


# -- laundering -----------------------------------------------------------------------------


def test_a_run_that_read_a_space_cannot_write_it_into_personal(service):
    """The seed's case, on the real model: acme/platform's secret never reaches a Globex run."""
    for name in SPACES:
        service.operator.create_space(name)
    service.remember(service.caller("seeder", space="acme/platform"), SECRET)
    run = at(service, "acme/platform", "session-1")
    assert [m.text for m in service.recall(run, "where is the staging database password?").memories] == [SECRET]
    with pytest.raises(DataBarrier, match="data_barrier.*'space:acme/platform'.*personal"):
        service.remember(run, "staging db password lives at secret/acme-stg in vault", personal=True)
    assert personal_count(service) == 0
    gate = steps(service, run, "gate")[-1]
    assert (gate.decision, gate.rule, gate.target) == ("refused", "data_barrier", "personal")
    globex = at(service, "globex", "session-2")
    assert all("vault" not in m.text for m in service.recall(globex, "staging database password vault").memories)


def test_an_approved_write_into_personal_goes_through_and_names_the_approval(svc):
    seed(svc)
    run = at(svc, "acme/platform", "r")
    svc.recall(run, "staging database password")
    asked = []
    memory = svc.remember(run, "staging password: see vault", personal=True, ask=lambda r: asked.append(r) or True)
    assert memory.space is None and memory.from_spaces == ("acme/platform",)
    assert asked[0].text == "staging password: see vault" and asked[0].target is None
    assert "personal" in asked[0].message() and "space:acme/platform" in asked[0].message()
    kinds = [(s.kind, s.decision) for s in steps(svc, run)]
    assert kinds[-4:] == [("approval_requested", None), ("approved", None), ("gate", "allowed"), ("write", None)]


@pytest.mark.parametrize("answer, declined", [(False, True), (None, False)], ids=["declined", "nobody-to-ask"])
def test_a_declined_or_unaskable_approval_refuses_the_write(svc, answer, declined):
    seed(svc)
    run = at(svc, "acme/platform", "r")
    svc.recall(run, "staging database password")
    with pytest.raises(DataBarrier):
        svc.remember(run, "summary of the secret", personal=True, ask=lambda r: answer)
    assert personal_count(svc) == 0
    kinds = [s.kind for s in steps(svc, run)]
    assert ("declined" in kinds) is declined and kinds[-1] == "gate"


def test_a_grant_into_personal_lets_the_write_through_and_the_trail_names_it(svc):
    seed(svc)
    grant = svc.operator.add_grant("acme/platform", PERSONAL)
    run = at(svc, "acme/platform", "r")
    svc.recall(run, "staging database password")
    memory = svc.remember(run, "staging password: see vault", personal=True)
    assert memory.space is None
    gate = steps(svc, run, "gate")[-1]
    assert (gate.decision, gate.grant) == ("allowed", grant.id)
    svc.operator.revoke_grant(grant.id)
    with pytest.raises(DataBarrier):
        svc.remember(run, "again", personal=True)


def test_a_grant_is_one_way_for_its_ai_and_until_its_time(svc, clock):
    seed(svc)
    svc.operator.add_grant("acme/platform", PERSONAL, ai="cursor", until="1h")
    claude = at(svc, "acme/platform", "r1")
    svc.recall(claude, "staging database password")
    with pytest.raises(DataBarrier):
        svc.remember(claude, "x", personal=True)  # the grant is cursor's
    cursor = at(svc, "acme/platform", "r2", ai="cursor")
    svc.recall(cursor, "staging database password")
    svc.remember(cursor, "x", personal=True)
    clock.advance(hours=2)
    with pytest.raises(DataBarrier):
        svc.remember(cursor, "y", personal=True)


# -- the seed's table: label acme/platform against where it goes -----------------------------

WRITE_ROWS = [
    pytest.param("acme/platform", True, id="acme/platform-holds-itself"),
    pytest.param("acme", True, id="acme-holds-its-subtree"),
    pytest.param("acme/finance", False, id="sibling-refused"),
    pytest.param(None, False, id="personal-refused"),
]


@pytest.mark.parametrize("target, allowed", WRITE_ROWS)
def test_writes_of_data_labelled_acme_platform(svc, target, allowed):
    seed(svc)
    run = at(svc, "acme", "r")  # a run in acme reaches acme/platform's data and every target
    assert svc.recall(run, "staging database password").memories[0].space == "acme/platform"
    where = at(svc, target, "r") if target is not None else run
    write = lambda: svc.remember(where, "a summary of it", personal=target is None)  # noqa: E731
    if allowed:
        assert write().space == target
    else:
        with pytest.raises(DataBarrier, match="data_barrier"):
            write()


def test_replace_into_a_sibling_carries_the_old_memory_and_is_refused(svc):
    old = seed(svc)
    run = at(svc, "acme", "r")
    with pytest.raises(DataBarrier):
        svc.replace(run, old.id, "moved", space="acme/finance")
    assert svc.get(run, old.id).superseded_by is None
    moved = svc.replace(run, old.id, "moved up", space="acme")
    assert moved.space == "acme" and moved.from_spaces == ("acme/platform",)


def test_writes_across_clients_stay_out_of_reach_before_the_barrier(svc):
    old = seed(svc)
    with pytest.raises(OutOfReach):
        svc.replace(at(svc, "acme", "r"), old.id, "x", space="globex/platform")


OPEN_ROWS = [
    pytest.param("acme/platform", True, id="acme/platform"),
    pytest.param("acme", True, id="acme"),
    pytest.param("acme/finance", False, id="acme/finance"),
    pytest.param("globex/platform", False, id="globex/platform"),
    pytest.param(None, False, id="personal-only"),
]


@pytest.mark.parametrize("opener, allowed", OPEN_ROWS)
def test_opening_a_reference_labelled_acme_platform(svc, opener, allowed):
    memory = seed(svc)
    ref = svc.share(at(svc, "acme/platform", "sharer"), [memory.id])
    run = at(svc, opener, "opener")
    if allowed:
        _, opened = svc.open_context(run, ref.ref)
        assert [(o.id, o.text) for o in opened] == [(memory.id, SECRET)]
        assert "space:acme/platform" in svc._parts.runs.current(run).carried.marks()
    else:
        with pytest.raises(DataBarrier, match="outside this run's reach") as refused:
            svc.open_context(run, ref.ref)
        assert "acme/platform" not in str(refused.value)
        with pytest.raises(RunNotFound):  # its first step was refused: the run was never opened
            svc.operator.trail(run.run_id)


def test_a_grant_covers_opening_a_reference_and_writing_what_it_holds(svc):
    memory = seed(svc)
    ref = svc.share(at(svc, "acme/platform", "sharer"), [memory.id])
    run = at(svc, "globex/platform", "opener")
    with pytest.raises(DataBarrier):
        svc.open_context(run, ref.ref)
    grant = svc.operator.add_grant("acme/platform", "globex/platform")
    _, opened = svc.open_context(run, ref.ref)
    assert opened[0].text == SECRET
    assert opened[0].labels.space == ELSEWHERE  # the agent is never told where it came from
    written = svc.remember(run, "what acme told us")
    assert written.from_spaces == (ELSEWHERE,)
    assert svc._parts.memories.load(written.id).from_spaces == ("acme/platform",)  # but the label is there
    assert [s.grant for s in steps(svc, run, "gate")] == [grant.id, grant.id]
    with pytest.raises(DataBarrier):  # globex may not hold it: the grant was into globex/platform only
        svc.remember(at(svc, "globex/platform", "opener"), "x", personal=True)


def test_a_forgotten_memory_in_a_reference_reads_as_forgotten(svc):
    memory = seed(svc)
    ref = svc.share(at(svc, "acme/platform", "sharer"), [memory.id])
    svc.forget(at(svc, "acme/platform", "cleaner"), memory.id)
    reference, opened = svc.open_context(at(svc, "acme", "opener"), ref.ref)
    # No text to check, so no digest either: it could only confirm a guess of the text.
    assert (opened[0].text, opened[0].labels.digest) == (None, None)
    assert reference.items[0][1].space == "acme/platform"
    assert not [r for r in svc._parts.catalog.all("SELECT items FROM contexts") if memory.digest in r["items"]]


def test_share_names_only_memories_the_sharer_sees(svc):
    globex = seed(svc, space="globex", text="Globex authentication uses Clerk")
    with pytest.raises(MemoryNotFound):
        svc.share(at(svc, "acme", "r"), [globex.id])


# -- sealing --------------------------------------------------------------------------------


def test_a_run_is_sealed_at_its_first_step(svc):
    run = at(svc, "acme/platform", "r")
    svc.recall(run, "anything")
    with pytest.raises(DataBarrier, match="sealed in space 'acme/platform'"):
        svc.recall(at(svc, "globex", "r"), "anything")
    with pytest.raises(DataBarrier):
        svc.recall(at(svc, "acme", "r"), "anything")  # the parent lies outside acme/platform too
    svc.recall(at(svc, "acme/platform", "r"), "still fine")
    assert [(s.kind, s.decision) for s in steps(svc, run)][1:3] == [("gate", "refused"), ("gate", "refused")]


def test_the_same_run_name_from_another_ai_is_another_run(svc):
    claude, cursor = at(svc, "acme/platform", "shared-name"), at(svc, "globex", "shared-name", ai="cursor")
    svc.recall(claude, "anything")
    svc.recall(cursor, "anything")  # not sealed in acme/platform: it is a run of its own
    assert claude.run_id != cursor.run_id
    assert [svc.operator.trail(c.run_id)[0].space for c in (claude, cursor)] == ["acme/platform", "globex"]


# -- untrusted content ----------------------------------------------------------------------


def test_what_a_run_writes_after_reading_slack_carries_source_slack(svc):
    seed(svc, space="acme", text="deploy freeze this friday", labels=["source:slack"])
    run = at(svc, "acme", "r")
    svc.recall(run, "deploy freeze")
    written = svc.remember(run, "no deploys on friday")
    assert written.origin == ("source:slack",)
    labels = svc.get(run, written.id).labels
    assert (labels.space, labels.origin, labels.run, labels.from_) == ("acme", ("source:slack",), run.run_id, ())


def test_forget_from_a_run_carrying_untrusted_content_needs_a_person(svc):
    slack = seed(svc, space="acme", text="deploy freeze this friday", labels=["source:slack"])
    victim = seed(svc, space="acme", text="the release checklist lives in the wiki")
    run = at(svc, "acme", "r")
    svc.recall(run, "deploy freeze")
    with pytest.raises(UntrustedSource, match="source:slack"):
        svc.forget(run, victim.id)
    assert svc.get(run, victim.id).text is not None
    with pytest.raises(UntrustedSource):
        svc.forget(run, victim.id, ask=lambda r: False)
    svc.forget(run, victim.id, ask=lambda r: True)
    assert [s.rule for s in steps(svc, run, "gate")] == ["untrusted_source"] * 3
    svc.operator.trust("source:slack")
    svc.forget(run, slack.id)  # a trusted source needs no person


def test_origin_marks_are_source_marks_only(svc):
    from server.errors import InvalidInput

    for bad in (["space:globex"], ["source:"], ["source:Slack"], ["a b"]):
        with pytest.raises(InvalidInput, match="origin mark"):
            svc.remember(at(svc, "acme", "r"), "x", labels=bad)
    assert svc.remember(at(svc, "acme", "r"), "x", labels=["slack"]).origin == ("source:slack",)


# -- what agents see ------------------------------------------------------------------------


def test_agents_never_see_the_name_of_a_from_space_they_do_not_reach(svc):
    seed(svc)
    run = at(svc, "acme/platform", "r")
    svc.recall(run, "staging database password")
    svc.remember(run, "personal note about staging", personal=True, ask=lambda r: True)
    globex = at(svc, "globex", "g")
    [note] = [m for m in svc.recall(globex, "personal note about staging").memories if m.space is None]
    assert note.labels.from_ == (ELSEWHERE,)
    assert "space:acme/platform" in svc._parts.runs.current(globex).carried.marks()  # but it carries it
    with pytest.raises(DataBarrier, match="outside this run's reach") as refused:
        svc.remember(globex, "globex now knows it")
    assert "acme" not in str(refused.value)
    asked = []
    with pytest.raises(DataBarrier):  # the person at a Globex call is not told where it came from either
        svc.remember(globex, "a personal note again", personal=True, ask=lambda r: asked.append(r) or False)
    assert "acme" not in asked[0].message() and "outside this run's reach" in asked[0].message()
    assert "space:acme/platform" in steps(svc, globex, "declined")[-1].labels  # the operator is


def test_the_trail_holds_ids_labels_and_rules_never_texts(svc):
    seed(svc)
    run = at(svc, "acme/platform", "r")
    svc.recall(run, "staging database password")
    with pytest.raises(DataBarrier):
        svc.remember(run, "leak it", personal=True)
    raw = svc._parts.catalog.all("SELECT * FROM run_steps")
    assert raw and not any("vault" in str(tuple(r)) or "leak it" in str(tuple(r)) for r in raw)
    delivery = svc.operator.deliveries(last=1)[0]
    assert delivery.run_id == run.run_id
