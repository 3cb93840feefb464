"""What the policies and the barrier keep, as every layer reads it: a policy's rule, a grant, a
run (and how its id is made), the steps of its trail.

Plain frozen records, so that the operator's answers (``server.shapes.operator``) and their text
forms (``server.render``) can name them without importing the core. The books that decide and
store stay in the core: ``server.spaces.policies`` orders the rules, ``server.barrier`` judges a
crossing under the grants (``covers``), ``server.barrier.runs`` opens, seals (``admits``,
``reaches``) and ends runs, ``server.barrier.trail`` writes the steps.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from server.labels import Carried
from server.models import RunKind, Token

# -- a policy's rule (server.spaces.policies) ------------------------------------------------

Effect = Literal["allow", "deny"]


@dataclass(frozen=True)
class Rule:
    ai: str  # an AI name or "*"
    space: str | None  # None: everywhere
    effect: Effect

    def describe(self) -> str:
        where = self.space if self.space is not None else "everywhere"
        return f"{self.effect} {self.ai} {where}"


# -- a grant (server.barrier) ----------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """Data of ``from_space`` (and below) may be written into ``to_space`` (None: personal)."""

    id: str
    from_space: str
    to_space: str | None
    ai: str | None  # None: every AI
    until: datetime | None  # None: until revoked
    created_at: datetime
    revoked_at: datetime | None = None


# -- a run's trail (server.barrier.trail) ----------------------------------------------------

StepKind = Literal[
    "recall",
    "get",
    "share",
    "context_open",
    "gate",
    "approval_requested",
    "approved",
    "declined",
    "write",
    "duplicate",  # a remember answered with the memory of the same fact already there
    "forget",
    "end",
]
STEP_KINDS: tuple[StepKind, ...] = get_args(StepKind)


@dataclass(frozen=True)
class Step:
    kind: StepKind
    labels: tuple[str, ...] = ()
    decision: str | None = None  # gates: allowed | refused
    rule: str | None = None
    grant: str | None = None
    target: str | None = None  # a space mark
    memory_ids: tuple[str, ...] = ()
    actor: str | None = None  # who took a step that is not the run's own (an operator ending it)


@dataclass(frozen=True)
class TrailStep:
    at: datetime
    step: Step


# -- a run (server.barrier.runs) -------------------------------------------------------------


def run_id_for(owner: str, name: str) -> str:
    """A run's id, from who owns the name and the name: an id another owner uses is another run."""
    return "run_" + hashlib.sha256(f"{owner}\n{name}".encode()).hexdigest()[:24]


RUN_ID = re.compile(r"run_[0-9a-f]{24}")


def standing_run(token: Token) -> tuple[str, str]:
    """The id and name of an agent token's current standing run."""
    name = f"standing-{token.standing}"
    return run_id_for(f"token:{token.id}", name), name


@dataclass(frozen=True)
class Run:
    id: str
    name: str
    ai: str
    transport: str
    space: str | None  # sealed at the first step
    token_scope: str | None
    opened_at: datetime | None  # None: not opened yet (no step recorded)
    carried: Carried
    steps: int = 0
    kind: RunKind = "session"
    token_id: str | None = None
    parent: str | None = None  # a run whose carried labels this one shares
    everywhere: bool = False  # sealed with no bound: an unscoped token's standing run
    ended_at: datetime | None = None
    ended_by: str | None = None
    expires_at: datetime | None = None

    @property
    def opened(self) -> bool:
        return self.opened_at is not None
