"""Who sees what, as the operator's page shows it: for one space (or everywhere), each AI's own
rule there and the *effective* decision, with the rule that makes it and its place in the order
of DESIGN §3 (the same ``PolicySet.decide`` that recall and every write run).

    1. this AI in this space (a rule on the space or on its nearest ancestor that has one)
    2. this AI everywhere
    3. everyone in this space (nearest ancestor likewise)
    4. everyone everywhere
    5. no rule: allowed

"Everywhere" is asked as the decision for personal memories, which only the everywhere rules
govern. The everyone row (``*``) answers for an AI that has no rule of its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from server.records import Effect, Rule
from server.spaces.policies import EVERYONE, Decision, PolicySet

STEPS = {
    1: "this AI in this space",
    2: "this AI everywhere",
    3: "everyone in this space",
    4: "everyone everywhere",
    5: "no rule: allowed by default",
}


@dataclass(frozen=True)
class Access:
    """One row of the page: an AI (or ``*``) in a space (None: everywhere)."""

    ai: str
    space: str | None
    here: Effect | None  # the rule set at exactly this place; None: inherit
    decision: Decision
    step: int  # 1..5, the place in DESIGN §3 of the rule that decides

    @property
    def allowed(self) -> bool:
        return self.decision.allowed

    @property
    def reason(self) -> str:
        """The decision as a permission check with its reason, e.g. ``deny cursor acme (1. this
        AI in this space, on acme)``."""
        rule = self.decision.rule
        if rule is None:
            return STEPS[5]
        where = "" if rule.space is None or rule.space == self.space else f", inherited from {rule.space}"
        return f"{rule.describe()} ({self.step}. {STEPS[self.step]}{where})"


def step_of(rule: Rule | None) -> int:
    if rule is None:
        return 5
    if rule.ai != EVERYONE:
        return 1 if rule.space is not None else 2
    return 3 if rule.space is not None else 4


def access_rows(policies: PolicySet, ais: Iterable[str], space: str | None) -> list[Access]:
    """Each AI, then everyone (``*``), with its rule here and its effective decision."""
    rules = {(r.ai, r.space): r.effect for r in policies.rules()}
    rows = []
    for ai in [*sorted(set(ais) - {EVERYONE}), EVERYONE]:
        decision = policies.decide(ai, space)
        rows.append(Access(ai, space, rules.get((ai, space)), decision, step_of(decision.rule)))
    return rows
