"""Policies: the four-level order as a parametrized table, ancestors, default allow, and a deny
that blocks every verb (recall, remember, replace, forget, get)."""

from __future__ import annotations

import pytest

from server.errors import MemoryNotFound, PolicyDenied
from server.facade import EVERYWHERE
from server.spaces.policies import PolicySet, Rule

A, S = "claude-code", "acme/platform"

# (rules, ai, space, allowed) — each row names the level that decides.
MATRIX = [
    pytest.param([], A, S, True, id="5-no-rule-allows"),
    pytest.param([("*", None, "deny")], A, S, False, id="4-everyone-everywhere"),
    pytest.param([("*", None, "deny"), ("*", "acme", "allow")], A, S, True, id="3-beats-4"),
    pytest.param([("*", "acme", "deny")], A, S, False, id="3-ancestor-covers-subtree"),
    pytest.param([("*", "acme", "deny"), ("*", S, "allow")], A, S, True, id="3-nearest-ancestor-wins"),
    pytest.param([("*", "acme", "deny"), (A, None, "allow")], A, S, True, id="2-beats-3"),
    pytest.param([(A, None, "deny"), ("*", "acme", "allow")], A, S, False, id="2-deny-beats-3-allow"),
    pytest.param([(A, None, "deny"), (A, "acme", "allow")], A, S, True, id="1-beats-2"),
    pytest.param([(A, "acme", "deny"), (A, S, "allow")], A, S, True, id="1-nearest-ancestor-wins"),
    pytest.param([(A, S, "deny"), ("*", None, "allow")], A, S, False, id="1-deny-beats-4-allow"),
    pytest.param(
        [("*", "acme", "deny"), ("claude-code", "acme", "allow")], "cursor", S, False, id="seed-cursor-denied"
    ),
    pytest.param([("*", "acme", "deny"), ("claude-code", "acme", "allow")], A, S, True, id="seed-claude-allowed"),
    pytest.param([("*", "acme", "deny")], A, "acme2", True, id="no-prefix-match-acme2"),
    pytest.param([("*", "acme", "deny")], A, "acme-corp", True, id="no-prefix-match-acme-corp"),
    pytest.param([("*", "acme/platform", "deny")], A, "acme", True, id="child-rule-not-parent"),
    pytest.param([(A, None, "deny")], A, None, False, id="personal-ai-everywhere"),
    pytest.param([("*", "acme", "deny")], A, None, True, id="personal-ignores-space-rules"),
    pytest.param([("*", None, "deny")], A, None, False, id="personal-everyone-everywhere"),
]


@pytest.mark.parametrize("rules, ai, space, allowed", MATRIX)
def test_policy_order(rules, ai, space, allowed):
    policies = PolicySet(Rule(r[0], r[1], r[2]) for r in rules)
    decision = policies.decide(ai, space)
    assert decision.allowed is allowed
    assert decision.reason  # every decision says why


def test_seed_syntax_only_claude_code_may_use_acme(fake_service, folders):
    svc = fake_service
    svc.operator.add_space(folders["acme"])
    svc.operator.deny("*", "acme")
    svc.operator.allow("claude-code", "acme")
    claude = svc.caller("claude-code", cwd=folders["acme"])
    cursor = svc.caller("cursor", cwd=folders["acme"])
    svc.remember(claude, "acme uses postgres")
    assert [m.text for m in svc.recall(claude, "postgres").memories] == ["acme uses postgres"]
    assert svc.recall(cursor, "postgres").memories == []


VERBS = ["recall", "remember", "replace", "forget", "get"]


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("rule_space", ["acme", "acme/platform"], ids=["on-ancestor", "on-space"])
def test_deny_blocks_every_verb(fake_service, folders, verb, rule_space):
    svc = fake_service
    svc.operator.add_space(folders["acme"])
    svc.operator.add_space(folders["acme/platform"])
    writer = svc.caller("claude-code", cwd=folders["acme/platform"])
    memory = svc.remember(writer, "platform runs on kubernetes")
    svc.operator.deny("cursor", rule_space)
    cursor = svc.caller("cursor", cwd=folders["acme/platform"])
    if verb == "recall":
        assert svc.recall(cursor, "kubernetes").memories == []
        return
    if verb == "remember":
        with pytest.raises(PolicyDenied):
            svc.remember(cursor, "platform runs on nomad")
    else:
        with pytest.raises(MemoryNotFound) as denied:
            {
                "replace": lambda: svc.replace(cursor, memory.id, "nomad"),
                "forget": lambda: svc.forget(cursor, memory.id),
                "get": lambda: svc.get(cursor, memory.id),
            }[verb]()
        assert str(denied.value) == f"no memory {memory.id}"
    # nothing changed for the allowed writer
    assert [m.text for m in svc.recall(writer, "kubernetes").memories] == ["platform runs on kubernetes"]


def test_deny_on_personal_blocks_personal_writes(fake_service):
    fake_service.operator.deny("cursor")
    with pytest.raises(PolicyDenied):
        fake_service.remember(fake_service.caller("cursor"), "my editor theme is dark", personal=True)


# -- removing a space never loosens a policy -------------------------------------------------

REMOVAL_RULES = [
    pytest.param([("agent1", "acme", "deny")], id="deny-on-parent"),
    pytest.param([("*", "acme", "deny")], id="deny-everyone-on-parent"),
    pytest.param([("*", None, "deny"), ("claude-code", "acme", "allow")], id="allow-on-parent"),
    pytest.param([("*", "acme", "deny"), ("agent1", "acme/platform", "allow")], id="deny-parent-allow-child"),
]


@pytest.mark.parametrize("rules", REMOVAL_RULES)
def test_removing_a_parent_space_changes_no_decision_below_it(fake_service, folders, rules):
    svc = fake_service
    svc.operator.add_space(folders["acme"])
    svc.operator.add_space(folders["acme/platform"])
    svc.operator.add_space(folders["acme/platform/api"])
    for ai, space, effect in rules:
        svc.operator.set_policy(ai, EVERYWHERE if space is None else space, effect)
    below = ["acme/platform", "acme/platform/api"]
    ais = ["agent1", "claude-code", "cursor"]
    before = {(ai, s): svc.scope(svc.caller(ai, space=s)).sees(s) for ai in ais for s in below}
    svc.operator.remove_space("acme")  # empty: no --purge needed
    after = {(ai, s): svc.scope(svc.caller(ai, space=s)).sees(s) for ai in ais for s in below}
    assert after == before


def test_a_deny_on_a_removed_parent_still_keeps_its_children_out(fake_service, folders):
    svc = fake_service
    svc.operator.add_space(folders["acme"])
    svc.operator.add_space(folders["acme/platform"])
    writer = svc.caller("claude-code", cwd=folders["acme/platform"])
    svc.remember(writer, "the platform deploy key lives in vault")
    svc.operator.deny("agent1", "acme")
    svc.operator.remove_space("acme")
    agent1 = svc.caller("agent1", cwd=folders["acme/platform"])
    assert svc.recall(agent1, "platform deploy key vault").memories == []
    with pytest.raises(PolicyDenied):
        svc.remember(agent1, "the platform deploy key is rotated")


def test_rules_of_a_removed_space_go_with_the_last_space_below_it(fake_service, folders):
    svc = fake_service
    svc.operator.add_space(folders["acme"])
    svc.operator.add_space(folders["acme/platform"])
    svc.operator.add_space(folders["globex"])
    svc.operator.deny("agent1", "acme")
    svc.operator.deny("agent1", "acme/platform")
    svc.operator.deny("agent1", "globex")
    svc.operator.remove_space("acme")
    assert {r.space for r in svc.operator.policies()} == {"acme", "acme/platform", "globex"}
    svc.operator.remove_space("acme/platform")
    assert {r.space for r in svc.operator.policies()} == {"globex"}


def test_a_denied_partition_is_never_scored_not_only_absent(fake_service):
    """Permissions come before relevance: a partition a policy denies is not read at all."""
    svc = fake_service
    for name in ("acme", "acme/finance"):
        svc.operator.create_space(name)
    svc.remember(svc.caller("cli", space="acme"), "acme payroll runs monthly")
    svc.remember(svc.caller("cli", space="acme/finance"), "acme payroll runs on the 25th")
    svc.operator.deny("cursor", "acme/finance")
    svc._parts.store.stats.reset()
    answer = svc.recall(svc.caller("cursor", space="acme"), "payroll")
    assert [m.space for m in answer.memories] == ["acme"]
    assert svc._parts.store.stats.scored["space:acme/finance"] == 0
    assert svc._parts.store.stats.opened["space:acme/finance"] == 0
    assert svc._parts.store.stats.scored["space:acme"] == 1


def test_everywhere_and_personal_are_named_never_implied_by_none(fake_service):
    """A rule's place and a grant's target are a space or a named place; None is refused, so no
    call means "everywhere" or "personal" by leaving a value out of a variable."""
    from server.errors import InvalidInput, InvalidSpaceName
    from server.facade import PERSONAL

    svc = fake_service
    svc.operator.create_space("acme")
    with pytest.raises(InvalidInput):
        svc.operator.allow("cursor", None)
    with pytest.raises(InvalidSpaceName):
        svc.operator.add_grant("acme", None)
    assert svc.operator.deny("cursor").space is None  # the default: everywhere
    assert svc.operator.add_grant("acme", PERSONAL).to_space is None
