"""Held calls through the façade: a call that needs a person and has none at the call is held
for the operator, applied only when the operator approves it, never once its run or token is
gone, never past a policy, one per run, and its text leaves the catalog the moment it is
decided, withdrawn, expired or purged. Logic on the hashing embedder; the real server, MCP
clients and the page are in tests/http, tests/mcp and tests/web."""

from __future__ import annotations

import pytest

from server.barrier.approvals import Held
from server.errors import ApprovalDecided, ApprovalNotFound, ApprovalPending, DataBarrier, RunEnded
from server.models import Memory
from tests.helpers import file_bytes

SECRET = "the staging database password is in vault path secret/acme-stg"
SUMMARY = "staging db password: vault secret/acme-stg"


@pytest.fixture
def svc(fake_service):
    for name in ("acme", "acme/platform", "globex"):
        fake_service.operator.create_space(name)
    fake_service.remember(fake_service.caller("seeder", space="acme/platform"), SECRET)
    return fake_service


def reader(svc, *, ai="cursor", space=None):
    """An agent token's caller in acme/platform that has read the secret."""
    token, _ = svc.operator.create_token(ai=ai, space=space)
    caller = svc.caller(space="acme/platform", transport="http", token=token)
    assert svc.recall(caller, "staging database password").memories
    return token, caller


def hold_summary(svc, caller) -> Held:
    held = svc.remember(caller, SUMMARY, personal=True, hold=True)
    assert isinstance(held, Held)
    return held


def personal_texts(svc):
    globex = svc.caller("someone", space="globex")
    return [m.text for m in svc.recall(globex, "staging database password vault").memories]


def catalog_holds(svc, text: str) -> bool:
    """Whether the text is anywhere in the catalog: on SQLite, in its database files (the WAL
    included, bytes on disk); on PostgreSQL, in any approval's row."""
    svc.operator.settle_approvals()
    files = list(svc.home.glob("esfis.db*"))
    if not files:
        row = svc._parts.catalog.one("SELECT count(*) AS n FROM approvals WHERE text LIKE ?", (f"%{text}%",))
        return int(row["n"]) > 0
    return any(text.encode() in file_bytes(path) for path in files)


def test_a_write_nobody_can_approve_at_the_call_is_held_and_nothing_is_written(svc):
    _, caller = reader(svc)
    held = hold_summary(svc, caller)
    assert held.status == "pending" and held.target is None and held.action == "remember"
    assert SUMMARY not in personal_texts(svc)
    (view,) = svc.operator.approvals()
    assert view.approvable and view.held.id == held.id
    assert "│ staging db password: vault secret/acme-stg" in view.message
    assert "space:acme/platform" in view.message
    assert svc.check_approval(caller, held.id).status == "pending"
    _, trail = svc.operator.trail(caller.run_id)
    assert [(t.step.kind, t.step.decision) for t in trail][-1] == ("approval_requested", "held")


def test_without_hold_the_write_is_refused_as_before(svc):
    _, caller = reader(svc)
    with pytest.raises(DataBarrier):
        svc.remember(caller, SUMMARY, personal=True)
    assert svc.operator.approvals() == []


def test_the_operator_approves_and_the_write_lands_as_the_runs_step(svc):
    _, caller = reader(svc)
    held = hold_summary(svc, caller)
    decided = svc.operator.decide_approval(held.id, approve=True, by="operator tok_test")
    assert decided.status == "approved" and decided.result is not None and decided.text is None
    assert SUMMARY in personal_texts(svc)
    got = svc.get(svc.caller("someone", space="globex"), decided.result)
    assert got.labels.run == caller.run_id and got.labels.from_ == ("(elsewhere)",)  # a space it does not reach
    assert svc.check_approval(caller, held.id).result == decided.result
    _, trail = svc.operator.trail(caller.run_id)
    kinds = [(t.step.kind, t.step.decision, t.step.actor) for t in trail]
    assert ("approved", None, "operator tok_test") in kinds and kinds[-1][0] == "write"
    with pytest.raises(ApprovalDecided):
        svc.operator.decide_approval(held.id, approve=True, by="operator tok_test")


def test_a_declined_call_writes_nothing_and_its_text_leaves_the_catalog(svc):
    _, caller = reader(svc)
    odd = "zq-declined-marker-1234"
    held = svc.remember(caller, odd, personal=True, hold=True)
    assert catalog_holds(svc, odd)
    decided = svc.operator.decide_approval(held.id, approve=False, by="operator tok_test")
    assert decided.status == "declined" and decided.result is None
    assert not catalog_holds(svc, odd)
    assert svc.check_approval(caller, held.id).status == "declined"


def test_a_run_holds_one_call_at_a_time(svc):
    _, caller = reader(svc)
    first = hold_summary(svc, caller)
    with pytest.raises(ApprovalPending, match=first.id):
        svc.remember(caller, "another summary", personal=True, hold=True)
    svc.forget(caller, first.id)  # withdrawn by its own run
    assert svc.check_approval(caller, first.id).status == "withdrawn"
    assert isinstance(svc.remember(caller, "another summary", personal=True, hold=True), Held)


def test_a_withdrawn_call_leaves_no_text(svc):
    _, caller = reader(svc)
    odd = "zq-withdrawn-marker-5678"
    held = svc.remember(caller, odd, personal=True, hold=True)
    svc.forget(caller, held.id)
    assert not catalog_holds(svc, odd)
    with pytest.raises(ApprovalDecided):
        svc.operator.decide_approval(held.id, approve=True, by="op")


def test_another_token_cannot_see_or_withdraw_a_held_call(svc):
    _, caller = reader(svc)
    held = hold_summary(svc, caller)
    _, other = reader(svc, ai="claude-code")
    with pytest.raises(ApprovalNotFound):
        svc.check_approval(other, held.id)
    with pytest.raises(ApprovalNotFound):
        svc.forget(other, held.id)
    with pytest.raises(ApprovalNotFound):
        svc.check_approval(other, "apr_" + "0" * 24)
    assert svc.check_approval(caller, held.id).status == "pending"


def test_a_held_call_expires_and_its_text_goes(svc, clock):
    _, caller = reader(svc)
    odd = "zq-expired-marker-9012"
    held = svc.remember(caller, odd, personal=True, hold=True)
    clock.advance(hours=24, seconds=1)
    assert svc.check_approval(caller, held.id).status == "expired"
    assert not catalog_holds(svc, odd)
    with pytest.raises(ApprovalDecided, match="expired"):
        svc.operator.decide_approval(held.id, approve=True, by="op")
    assert svc.operator.approvals() == []


def test_never_applied_once_its_run_ended(svc):
    _, caller = reader(svc)
    held = hold_summary(svc, caller)
    svc.operator.end_run(caller.run_id, by="cli")
    assert svc.operator.decide_approval(held.id, approve=True, by="op").status == "void"
    assert SUMMARY not in personal_texts(svc)


def test_never_applied_once_its_token_is_revoked(svc):
    token, caller = reader(svc)
    held = hold_summary(svc, caller)
    svc.operator.revoke_token(token.id)
    assert svc.operator.decide_approval(held.id, approve=True, by="op").status == "void"
    assert svc.operator.approvals() == []
    assert SUMMARY not in personal_texts(svc)


def test_a_run_tokens_call_dies_with_its_opener(svc):
    opener, _ = svc.operator.create_token(ai="cursor", runs_only=True)
    run_token, _ = svc.open_run(opener)
    caller = svc.caller(space="acme/platform", transport="http", token=run_token)
    svc.recall(caller, "staging database password")
    held = hold_summary(svc, caller)
    svc.operator.revoke_token(opener.id)
    assert svc.operator.decide_approval(held.id, approve=True, by="op").status == "void"


def test_a_policy_deny_after_holding_voids_the_call(svc):
    _, caller = reader(svc)
    held = hold_summary(svc, caller)
    svc.operator.set_policy("cursor", "acme/platform", "deny")
    (view,) = svc.operator.approvals(status=None)
    assert not view.approvable and "policy" in (view.why_not or "")
    assert svc.operator.approvals() == []
    result = svc.check_approval(caller, held.id)
    assert result.status == "void"


def test_a_denied_ai_is_never_held(svc):
    _, caller = reader(svc)
    svc.operator.set_policy("cursor", "acme/platform", "deny")
    with pytest.raises(DataBarrier, match="policy"):
        svc.remember(caller, SUMMARY, personal=True, hold=True)
    assert svc.operator.approvals(status=None) == []


def test_purging_the_space_it_carries_clears_the_held_text(svc):
    _, caller = reader(svc)
    odd = "zq-purged-marker-3456"
    held = svc.remember(caller, odd, personal=True, hold=True)
    svc.operator.remove_space("acme/platform", purge=True)
    assert not catalog_holds(svc, odd)
    assert svc.operator.approval(held.id).held.status == "void"


def test_a_held_forget_of_untrusted_content_is_applied_on_approval(svc):
    slack = svc.remember(
        svc.caller("seeder", space="acme"), "the deploy channel is #acme-deploys", labels=["source:slack"]
    )
    token, _ = svc.operator.create_token(ai="cursor")
    caller = svc.caller(space="acme", transport="http", token=token)
    svc.recall(caller, "deploy channel")
    held = svc.forget(caller, slack.id, hold=True)
    assert isinstance(held, Held) and held.action == "forget" and held.text is None
    (view,) = svc.operator.approvals()
    assert "#acme-deploys" in view.message and "untrusted" in view.message
    assert svc.operator.decide_approval(held.id, approve=True, by="op").status == "approved"
    assert slack.id not in [m.id for m in svc.recall(caller, "deploy channel").memories]


def test_a_held_replace_is_void_when_its_memory_was_superseded_meanwhile(svc):
    token, caller = reader(svc)
    original = svc.recall(caller, "staging database password").memories[0]
    held = svc.replace(caller, original.id, "moved to vault path secret/acme-stg2", space=None, hold=True)
    assert isinstance(held, Memory)  # into its own space: no person needed
    personal_note = svc.remember(svc.caller("me"), "my own note", personal=True)
    held = svc.replace(caller, personal_note.id, "my own note, with acme's vault path", hold=True)
    assert isinstance(held, Held) and held.action == "replace"
    svc.replace(svc.caller("me"), personal_note.id, "my own note, revised")
    assert svc.operator.decide_approval(held.id, approve=True, by="op").status == "void"


def test_an_approval_for_a_run_that_ended_refuses_further_steps_too(svc):
    _, caller = reader(svc)
    hold_summary(svc, caller)
    svc.operator.end_run(caller.run_id, by="cli")
    with pytest.raises(RunEnded):
        svc.remember(caller, SUMMARY, personal=True, hold=True)
