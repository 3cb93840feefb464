"""Scope: the partitions a caller reaches, and which of them policy lets it use.

This is steps 1 and 2 of recall (space → permissions), and the same test guards every write,
replace, forget and get, so one rule decides what an AI can see and touch.

A caller standing in space S reaches personal, S, and every registered space below S. A token
scoped to a subtree T narrows that to the spaces inside T, and drops personal (a scoped token
acts only inside its subtree).
"""

from __future__ import annotations

from dataclasses import dataclass

from server.models import Caller
from server.spaces import contains, reached_spaces
from server.spaces.policies import Decision, PolicySet


@dataclass(frozen=True)
class Scope:
    caller: Caller
    reached: tuple[str | None, ...]  # None is personal
    allowed: tuple[str | None, ...]
    denied: tuple[tuple[str | None, Decision], ...]
    policies: PolicySet

    def sees(self, space: str | None) -> bool:
        """Whether the caller may read and touch memories of ``space``."""
        return space in self.allowed

    def reaches(self, space: str | None) -> bool:
        """Whether the caller reaches data of ``space``, registered now or not (a label may name a
        space since removed): inside its subtree and the token's, and allowed by policy."""
        if space is None or space in self.allowed:
            return space in self.allowed
        inside = self.caller.space is not None and contains(self.caller.space, space)
        if self.caller.scope is not None:
            inside = inside and contains(self.caller.scope, space)
        return inside and self.policies.decide(self.caller.ai, space).allowed

    def decision_for(self, space: str | None) -> Decision | None:
        for denied_space, decision in self.denied:
            if denied_space == space:
                return decision
        return None


def scope_for(caller: Caller, registered: list[str], policies: PolicySet) -> Scope:
    """``registered`` holds at least the registered spaces of the caller's subtree. A caller is
    checked against its token's subtree once, where it is resolved (``Esfis.caller``); here the
    subtree only narrows what it reaches."""
    spaces: list[str | None] = [
        s for s in reached_spaces(caller.space, registered) if caller.scope is None or contains(caller.scope, s)
    ]
    reached: list[str | None] = spaces if caller.scope is not None else [None, *spaces]
    allowed: list[str | None] = []
    denied: list[tuple[str | None, Decision]] = []
    for space in reached:
        decision = policies.decide(caller.ai, space)
        if decision.allowed:
            allowed.append(space)
        else:
            denied.append((space, decision))
    return Scope(caller, tuple(reached), tuple(allowed), tuple(denied), policies)
