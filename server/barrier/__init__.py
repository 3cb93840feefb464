"""The data barrier: whether a run may put what it carries where it asks to (docs/design.md §7).

Reading rules decide what a caller may see; the barrier decides where what it saw may go.
A target may hold data of itself and of the spaces below it, since whoever reads the target
already reaches them; personal data may go anywhere (every caller reaches it); a personal
target holds personal data only, because personal memories reach every space.

    run carries acme/platform →  acme/platform ✓  acme ✓  acme/finance ✗  globex/platform ✗  personal ✗

A crossing the rule refuses goes through only under a **grant** an operator recorded (data of
FROM's subtree into exactly TO, optionally for one AI, optionally until a time), or, into
personal, with a person's approval at the call. Neither goes past a policy: data of a space
that a policy denies this AI crosses under no grant and no approval. Opening a context
reference is judged the same way, with "the opener reaches it" in place of "the target may
hold it".

This module judges; ``server.barrier.gates`` asks the person and writes the trail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from server.records import Grant  # also named here: what the rule judges under
from server.spaces import contains


def covers(grant: Grant, space: str, target: str | None, *, ai: str, now: datetime) -> bool:
    """Whether ``grant`` lets data of ``space`` into ``target`` for ``ai`` at ``now``."""
    return (
        grant.revoked_at is None
        and contains(grant.from_space, space)
        and grant.to_space == target
        and (grant.ai is None or grant.ai == ai)
        and (grant.until is None or now < grant.until)
    )


@dataclass(frozen=True)
class Crossing:
    """The barrier's verdict on one write or one open."""

    blocked: tuple[str, ...]  # carried spaces the target may not hold and no grant covers
    grants: tuple[str, ...]  # ids of the grants the crossing relies on
    denied: tuple[str, ...] = ()  # of ``blocked``, those a policy denies this AI: no grant or approval helps

    @property
    def allowed(self) -> bool:
        return not self.blocked


def may_hold(target: str | None) -> Callable[[str], bool]:
    """Whether ``target`` (None: personal) may hold data of a space."""
    return lambda space: target is not None and contains(target, space)


def judge(
    spaces: Iterable[str],
    holds: Callable[[str], bool],
    *,
    target: str | None,
    grants: Iterable[Grant],
    ai: str,
    now: datetime,
    denied: Callable[[str], bool] = lambda space: False,
) -> Crossing:
    """Each carried space is held by the target, or crosses under a grant into ``target``, or
    is blocked. A space ``denied`` to this AI by a policy crosses under no grant. The first
    covering grant is named (grants are listed oldest first)."""
    live = [g for g in grants if g.revoked_at is None]
    blocked: list[str] = []
    refused: list[str] = []
    used: list[str] = []
    for space in sorted(set(spaces)):
        if holds(space):
            continue
        if denied(space):
            blocked.append(space)
            refused.append(space)
            continue
        grant = next((g for g in live if covers(g, space, target, ai=ai, now=now)), None)
        if grant is None:
            blocked.append(space)
        elif grant.id not in used:
            used.append(grant.id)
    return Crossing(tuple(blocked), tuple(used), tuple(refused))
