"""Policies: which AI may use which space.

A rule is ``(ai or '*', space or everywhere, allow|deny)``. For an AI and a space, the first rule
that matches, in this order, decides (docs/design.md §3):

1. this AI in this space: a rule on the space, or on its nearest ancestor that has one;
2. this AI everywhere;
3. everyone (``*``) in this space, nearest ancestor likewise;
4. everyone everywhere;
5. no rule: allowed.

Personal memories belong to no space, so only the "everywhere" levels (2 and 4) govern them.
A deny covers every verb: recall, remember, replace, forget and get. Every decision carries the
rule that made it, for the trail.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from server.errors import InvalidInput
from server.records import Rule  # also named here: the rules this module orders
from server.spaces import ancestors

EVERYONE = "*"
AI_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
AI_RULE = "an AI name is 1 to 64 of [a-z0-9._-], starting with a lower-case letter or digit"


def validate_ai(name: object, *, wildcard: bool = False, field: str = "ai") -> str:
    if isinstance(name, str) and (AI_NAME.fullmatch(name) or (wildcard and name == EVERYONE)):
        return name
    extra = " (or '*' for every AI)" if wildcard else ""
    raise InvalidInput(f"invalid AI name {name!r}: {AI_RULE}{extra}", field=field)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    rule: Rule | None  # None: no rule matched, allowed by default

    @property
    def reason(self) -> str:
        return "no rule: allowed by default" if self.rule is None else self.rule.describe()


class PolicySet:
    """An immutable view of the rules, answering decisions in the documented order."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self._rules = {(r.ai, r.space): r for r in rules}

    def decide(self, ai: str, space: str | None) -> Decision:
        chain = ancestors(space) if space is not None else []
        for who in (ai, EVERYONE):
            for where in chain:
                if (rule := self._rules.get((who, where))) is not None:
                    return Decision(rule.effect == "allow", rule)
            if (rule := self._rules.get((who, None))) is not None:
                return Decision(rule.effect == "allow", rule)
        return Decision(True, None)

    def rules(self) -> list[Rule]:
        return sorted(self._rules.values(), key=lambda r: (r.space or "", r.ai))
