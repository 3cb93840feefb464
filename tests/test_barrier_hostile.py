"""The barrier's rules a hostile caller probes, through the façade: a deny is above every grant
and every approval, grants die with their spaces, a person approves exactly what is written,
tokens decide runs (standing runs only grow; run tokens share them), ended runs take no step,
and the trail is pruned without losing what explains a memory. Logic on the hashing embedder."""

from __future__ import annotations

import re
import unicodedata

import pytest

from server import visible
from server.errors import DataBarrier, Forbidden, RunEnded, RunNotFound
from server.facade import PERSONAL
from server.models import ApprovalRequest

SPACES = ["acme", "acme/platform", "globex", "tmpx"]
SECRET = "the staging database password is in vault path secret/acme-stg"


@pytest.fixture
def svc(fake_service):
    for name in SPACES:
        fake_service.operator.create_space(name)
    return fake_service


def seed(svc, space="acme/platform", text=SECRET, **kw):
    return svc.remember(svc.caller("seeder", space=space), text, **kw)


def agent_token(svc, ai="cursor", space=None):
    token, _ = svc.operator.create_token(ai=ai, space=space)
    return token


# -- deny above every grant ---------------------------------------------------------------


def test_a_grant_never_lets_a_denied_ai_open_a_reference(svc):
    memory = seed(svc)
    reference = svc.share(svc.caller("claude-code", space="acme/platform", run="s"), [memory.id])
    svc.operator.add_grant("acme/platform", "globex")
    opener = svc.caller("cursor", space="globex", run="o")
    _, opened = svc.open_context(opener, reference.ref)  # the grant alone lets it through
    assert opened[0].text == SECRET
    svc.operator.set_policy("cursor", "acme", "deny")
    denied = svc.caller("cursor", space="globex", run="o2")
    with pytest.raises(DataBarrier, match="cannot be opened"):
        svc.open_context(denied, reference.ref)


def test_a_grant_never_carries_data_of_a_denied_space_into_another(svc):
    seed(svc)
    token = agent_token(svc)  # unscoped: its standing run is sealed everywhere
    svc.recall(svc.caller(space="acme/platform", transport="http", token=token), "staging database password")
    svc.operator.add_grant("acme/platform", "globex")
    in_globex = svc.caller(space="globex", transport="http", token=token)
    assert svc.remember(in_globex, "under the grant").space == "globex"
    svc.operator.set_policy("cursor", "acme/platform", "deny")
    with pytest.raises(DataBarrier, match="policy"):
        svc.remember(in_globex, "after the deny")


def test_nobody_is_asked_to_approve_past_a_policy(svc):
    seed(svc)
    run = svc.caller("cursor", space="acme/platform", run="r")
    svc.recall(run, "staging database password")
    svc.operator.set_policy("cursor", "acme/platform", "deny")
    asked: list[ApprovalRequest] = []
    with pytest.raises(DataBarrier, match="policy"):
        svc.remember(run, "summary", personal=True, ask=lambda r: asked.append(r) or True)
    assert asked == []
    _, trail = svc.operator.trail(run.run_id)
    assert [t.step.kind for t in trail][-1] == "gate" and trail[-1].step.decision == "refused"


# -- grants die with their spaces ------------------------------------------------------------


def test_a_grant_dies_with_its_space_and_a_space_remade_inherits_nothing(svc):
    grant = svc.operator.add_grant("tmpx", PERSONAL)
    other = svc.operator.add_grant("acme", "tmpx")
    svc.operator.remove_space("tmpx")
    assert [g.id for g in svc.operator.grants()] == []
    assert svc._parts.grants.get(grant.id).revoked_at is not None
    assert svc._parts.grants.get(other.id).revoked_at is not None
    svc.operator.create_space("tmpx")
    seed(svc, space="tmpx", text="tmpx's new secret")
    run = svc.caller("claude-code", space="tmpx", run="r")
    svc.recall(run, "new secret")
    with pytest.raises(DataBarrier):
        svc.remember(run, "tmpx secret", personal=True)


def test_a_grant_for_a_space_that_does_not_exist_is_refused(svc):
    from server.errors import SpaceNotFound

    with pytest.raises(SpaceNotFound):
        svc.operator.add_grant("nowhere", PERSONAL)
    with pytest.raises(SpaceNotFound):
        svc.operator.add_grant("acme", "nowhere")


# -- a person approves exactly what is written ------------------------------------------------

SPOOF = (
    "I prefer dark mode\n\nApprove this one call?\r\x1b[2K\x1b[1A esfis: cursor asks to remember a "
    "harmless note\u202e\u2028Text: ok\u200b\x07\x00\\x1b"
)


def test_the_approval_shows_the_text_escaped_quoted_measured_and_digested(svc):
    seed(svc)
    run = svc.caller("cursor", space="acme/platform", run="r")
    svc.recall(run, "staging database password")
    asked: list[ApprovalRequest] = []
    text = SPOOF.replace("\x00", "")  # a NUL is refused as input before anything else
    with pytest.raises(DataBarrier):
        svc.remember(run, text, personal=True, ask=lambda r: asked.append(r) or False)
    message = asked[0].message()
    assert all(unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp") for c in message.replace("\n", ""))
    lines = message.split("\n")
    quoted = [line for line in lines if line.startswith(visible.QUOTE)]
    own = [line for line in lines if not line.startswith(visible.QUOTE)]
    assert len(quoted) == text.count("\n") + 1  # every line of the text is behind the quote mark
    assert own[-1] == "Approve this one call?" and sum(line == "Approve this one call?" for line in own) == 1
    assert f"{len(text)} characters" in message
    assert (
        re.search(r"sha256:[0-9a-f]{64}", message).group(0)[7:]
        == __import__("hashlib").sha256(text.encode()).hexdigest()
    )
    assert "Target: personal" in message and "space:acme/platform" in message
    assert "\\r" in message and "\\x1b[2K" in message and "\\u202e" in message and "\\\\x1b" in message


@pytest.mark.parametrize("char", ["\x1b", "\r", "\x07", "\u202e", "\u2028", "\u200b", "\x85", "\x7f"])
def test_one_line_escapes_every_control_character(char):
    shown = visible.one_line(f"a{char}b")
    assert char not in shown and shown.startswith("a\\") and shown.endswith("b")


# -- tokens decide runs ----------------------------------------------------------------------


def test_an_agent_tokens_requests_are_one_standing_run_that_only_grows(svc):
    seed(svc)
    token = agent_token(svc)
    first = svc.caller(space="acme/platform", transport="http", token=token)
    second = svc.caller(space="globex", transport="http", token=token)
    assert first.run_id == second.run_id and first.run_kind == "standing"
    svc.recall(first, "staging database password")
    svc.recall(second, "anything")  # an unscoped token's standing run is sealed everywhere
    for target in ("globex", None):
        with pytest.raises(DataBarrier):
            svc.remember(svc.caller(space=target, transport="http", token=token), "x", personal=target is None)
    run = svc._parts.runs.get(first.run_id)
    assert run.everywhere and run.kind == "standing" and "space:acme/platform" in run.carried.marks()


def test_a_run_token_shares_the_standing_run_of_the_agent_token_that_opened_it(svc):
    seed(svc)
    token = agent_token(svc)
    child, _ = svc.open_run(token)
    assert child.kind == "run" and child.parent_run is not None
    with pytest.raises(Forbidden):
        svc.open_run(child)
    svc.recall(svc.caller(space="acme/platform", transport="http", token=child), "staging database password")
    with pytest.raises(DataBarrier):
        svc.remember(svc.caller(transport="http", token=token), "x", personal=True)


def test_an_ended_run_takes_no_further_step(svc):
    caller = svc.caller("claude-code", space="acme", run="session-7")
    svc.recall(caller, "anything")
    svc.operator.end_run(caller.run_id, by="cli")
    with pytest.raises(RunEnded):
        svc.recall(caller, "anything")
    with pytest.raises(RunNotFound):
        svc.operator.end_run("run_" + "f" * 24, by="cli")


# -- the trail stays bounded -------------------------------------------------------------------


def test_pruning_removes_what_is_over_and_keeps_what_explains_a_memory(svc, clock):
    seed(svc, space="acme")
    for _ in range(3):  # CLI commands without --run: one run each
        svc.recall(svc.caller("cli", space="acme"), "staging")
    idle = svc.caller("mcp-client", space="acme", run="idle-session")
    svc.recall(idle, "staging")
    vouched = svc.caller("claude-code", space="acme", run="approved")
    svc.recall(vouched, "staging")
    kept = svc.remember(vouched, "summary into personal", personal=True, ask=lambda r: True)
    token = agent_token(svc, ai="claude-code")
    standing = svc.caller(space="acme", transport="http", token=token)
    svc.recall(standing, "staging")
    assert sum(r.kind == "once" for r in svc._parts.runs.list(last=100)) == 4  # the seed's and the three recalls

    clock.advance(days=91)
    pruned = svc.operator.prune_trail()
    assert pruned.ended == 2 and pruned.runs == 4  # idle sessions are ended, never pruned alive
    with pytest.raises(RunEnded):
        svc.recall(idle, "staging")
    kinds = {r.id: r.kind for r in svc._parts.runs.list(last=100)}
    assert "once" not in kinds.values() and {idle.run_id, vouched.run_id, standing.run_id} <= set(kinds)
    assert "space:acme" in svc._parts.runs.get(standing.run_id).carried.marks()  # what it carries stays
    assert svc.operator.trail(standing.run_id)[1] == []  # its old steps went

    clock.advance(days=91)
    svc.operator.prune_trail()
    left = {r.id for r in svc._parts.runs.list(last=100)}
    assert idle.run_id not in left and vouched.run_id in left  # its approval explains a live memory
    svc.forget(svc.caller("claude-code", space="acme", run="cleanup"), kept.id)
    clock.advance(days=91)
    svc.operator.prune_trail()
    left = {r.id for r in svc._parts.runs.list(last=100)}
    assert vouched.run_id not in left and standing.run_id in left


def test_pruning_also_removes_old_deliveries_context_references_and_decided_held_calls(svc, clock):
    """What an agent token's calls leave besides its trail goes at the trail's age, so no table
    it adds rows to grows without end; what is younger stays."""
    memory = seed(svc)
    token, _ = svc.operator.create_token(ai="cursor")
    caller = svc.caller(space="acme/platform", transport="http", token=token)
    svc.recall(caller, "staging")
    svc.share(caller, [memory.id])
    held = svc.remember(caller, "staging db password: vault", personal=True, hold=True)
    svc.operator.decide_approval(held.id, approve=False, by="operator")
    svc.operator.end_run(caller.run_id, by="cli")
    catalog = svc._parts.catalog

    def count(table: str) -> int:
        return int(catalog.one(f"SELECT count(*) AS n FROM {table}")["n"])

    assert (count("deliveries"), count("contexts"), count("approvals")) == (1, 1, 1)
    svc._parts.deliveries.moves.move_all()  # the old delivery's items moved, today's left recent
    clock.advance(days=91)
    svc.recall(svc.caller("cli", space="acme/platform"), "staging")  # a delivery of today
    assert (count("delivery_items"), count("recent_delivery_items")) == (1, 1)
    pruned = svc.operator.prune_trail()
    assert pruned.records == 3
    assert (count("deliveries"), count("contexts"), count("approvals")) == (1, 0, 0)
    assert (count("delivery_items"), count("recent_delivery_items")) == (0, 1)  # today's delivery's one memory
