"""What a held call looks like: to the agent that made it (its id and outcome, never the
marks it was held for beyond its own reach), and to the operator (everything, with the text
rendered as the person must read it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from server.clock import iso
from server.models import Held
from server.shapes.agents import DATA_OUT, LabelsOut, MemoryOut, SimilarOut
from server.shapes.base import Shape

HOW = (
    "held for a person: the operator approves or declines it on Settings › Approvals. Nothing is written "
    "until then. Ask after it with check_approval (MCP) or GET /v1/approvals/{id}; it expires unanswered."
)


class ApprovalOut(Shape):
    id: str = Field(description="the approval's id (apr_…)")
    status: Literal["pending", "approved", "declined", "expired", "void", "withdrawn"]
    action: Literal["remember", "replace", "forget"]
    target: str | None = Field(description="where it writes; null: personal")
    created_at: str
    expires_at: str
    decided_at: str | None
    memory: str | None = Field(description="approved: the memory it wrote (or, for a forget, forgot)")
    reason: str | None = Field(description="declined, expired, void or withdrawn: why")

    @classmethod
    def of(cls, held: Held) -> ApprovalOut:
        return cls(
            id=held.id,
            status=held.status,
            action=held.action,
            target=held.target,
            created_at=iso(held.created_at),
            expires_at=iso(held.expires_at),
            decided_at=iso(held.decided_at),
            memory=held.result,
            reason=held.reason,
        )


class HeldOut(Shape):
    """The answer to a call held for a person (HTTP 202, an MCP tool's result)."""

    approval: ApprovalOut
    message: str = Field(description="what happens next")

    @classmethod
    def of(cls, held: Held) -> HeldOut:
        return cls(approval=ApprovalOut.of(held), message=HOW)


# -- the operator's ---------------------------------------------------------------------------


class HeldCallOut(ApprovalOut):
    ai: str
    run: str
    token_id: str | None
    space: str | None = Field(description="where the caller stood")
    carried: list[str] = Field(description="every mark the run carried when it was held")
    needs: list[str] = Field(description="the marks that need a person")
    rule: str
    decided_by: str | None
    approvable: bool
    rendering: str = Field(description="the request as the person reads it: the text escaped and quoted")

    @classmethod
    def of_view(cls, held: Held, *, rendering: str, approvable: bool) -> HeldCallOut:
        return cls(
            **ApprovalOut.of(held).model_dump(),
            ai=held.ai,
            run=held.run_id,
            token_id=held.token_id,
            space=held.space,
            carried=list(held.carried),
            needs=list(held.blocked),
            rule=held.rule,
            decided_by=held.decided_by,
            approvable=approvable,
            rendering=rendering,
        )


class HeldCallsOut(Shape):
    approvals: list[HeldCallOut] = Field(description="newest first")


# -- MCP: one object whether the call was applied or held -------------------------------------
# A tool's structured output is one object type, so a call that may be held answers the
# memory's fields (null while held) beside ``approval`` (null when applied).

_WHILE_HELD = "null while the call is held for approval"


class WrittenOut(Shape):
    id: str | None = Field(None, description="the memory's id; " + _WHILE_HELD)
    text: str | None = Field(None, description="null once forgotten, or " + _WHILE_HELD)
    space: str | None = None
    ai: str | None = Field(None, description="the AI that wrote it")
    created_at: str | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    superseded_by: str | None = None
    labels: LabelsOut | None = None
    data: dict[str, Any] | None = Field(None, description=DATA_OUT + "; " + _WHILE_HELD)
    duplicate_of: str | None = Field(
        None,
        description="remember: set when the space already held this fact; nothing new was stored, and this "
        "is the memory already there",
    )
    similar: list[SimilarOut] = Field(
        default_factory=list,
        description="remember: current memories of the same space close to this one but not the same fact "
        "(id, score), best first; when one is an outdated version of it, replace that one",
    )
    approval: ApprovalOut | None = Field(
        None, description="set when the call was held for a person's approval: nothing is written yet"
    )
    message: str | None = Field(None, description="while held: what happens next")

    @classmethod
    def held(cls, held: Held) -> WrittenOut:
        return cls(approval=ApprovalOut.of(held), message=HOW)

    @classmethod
    def written(cls, memory: MemoryOut) -> WrittenOut:
        return cls(**memory.model_dump())


class ReplacedOrHeldOut(WrittenOut):
    replaced: str | None = Field(None, description="the id of the memory it supersedes; " + _WHILE_HELD)


class ForgottenOrHeldOut(Shape):
    id: str
    forgotten: bool = Field(description="false while the forget is held for approval")
    approval: ApprovalOut | None = Field(None, description="set when the forget was held for a person's approval")
    message: str | None = None
