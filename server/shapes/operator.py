"""What an operator receives: spaces, rules, deliveries and their why, grants, trusted sources,
tokens, runs and their trails, imports and backups."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from server.clock import iso
from server.inputs import ERRORS_KEPT
from server.models import (
    Delivery,
    Space,
    Token,
    TrustedSource,
    Why,
)
from server.records import Grant, Rule, Run, TrailStep
from server.shapes.base import Shape


class SpaceOut(Shape):
    name: str
    folders: list[str]
    memories: int
    created_at: str | None

    @classmethod
    def of(cls, s: Space) -> SpaceOut:
        return cls(name=s.name, folders=list(s.folders), memories=s.memories, created_at=iso(s.created_at))


class RuleOut(Shape):
    ai: str
    space: str | None
    effect: Literal["allow", "deny"]

    @classmethod
    def of(cls, r: Rule) -> RuleOut:
        return cls(ai=r.ai, space=r.space, effect=r.effect)


class DeliveryItemOut(Shape):
    memory_id: str
    rank: int
    score: float
    outcome: str


class DeliveryOut(Shape):
    id: int
    at: str | None
    ai: str
    space: str | None
    transport: str
    run_id: str | None
    query: str
    limit: int
    searched: list[str] = Field(description="the partitions searched: personal, or a space")
    items: list[DeliveryItemOut]
    cut: dict[str, int] = Field(description="counts by reason: space, policy, superseded, expired, relevance, …")

    @classmethod
    def of(cls, d: Delivery) -> DeliveryOut:
        return cls(
            id=d.id,
            at=iso(d.at),
            ai=d.ai,
            space=d.space,
            transport=d.transport,
            run_id=d.run_id,
            query=d.query,
            limit=d.limit,
            searched=["personal" if s is None else s for s in d.searched],
            items=[
                DeliveryItemOut(memory_id=i.memory_id, rank=i.rank, score=i.score, outcome=i.outcome) for i in d.items
            ],
            cut=d.cut,
        )


class WentInOut(Shape):
    memory_id: str
    rank: int
    score: float
    space: str | None
    text: str | None = Field(description="today's text; null: forgotten")
    forgotten: bool


class CutByLimitOut(Shape):
    memory_id: str
    rank: int
    score: float
    forgotten: bool


class OtherMatchOut(Shape):
    memory_id: str
    space: str | None
    score: float
    text: str
    reason: Literal["space", "policy"]


class OtherSpacesOut(Shape):
    note: str = "scored now for the operator; never seen by the agent"
    top: list[OtherMatchOut]
    more: int


class WhyOut(Shape):
    delivery: DeliveryOut
    went_in: list[WentInOut]
    cut_by_limit: list[CutByLimitOut]
    other_spaces: OtherSpacesOut

    @classmethod
    def of(cls, w: Why) -> WhyOut:
        return cls(
            delivery=DeliveryOut.of(w.delivery),
            went_in=[
                WentInOut(
                    memory_id=i.item.memory_id,
                    rank=i.item.rank,
                    score=i.item.score,
                    space=i.space,
                    text=i.text,
                    forgotten=i.text is None,
                )
                for i in w.items
                if i.item.outcome == "delivered"
            ],
            cut_by_limit=[
                CutByLimitOut(
                    memory_id=i.item.memory_id, rank=i.item.rank, score=i.item.score, forgotten=i.text is None
                )
                for i in w.items
                if i.item.outcome == "limit"
            ],
            other_spaces=OtherSpacesOut(
                top=[
                    OtherMatchOut(memory_id=o.memory_id, space=o.space, score=o.score, text=o.text, reason=o.reason)
                    for o in w.others
                ],
                more=w.others_more,
            ),
        )


class GrantOut(Shape):
    id: str
    from_: str = Field(alias="from")
    to: str | None = Field(description="null: personal memories")
    ai: str | None = Field(description="null: every AI")
    until: str | None = Field(description="null: until revoked")
    created_at: str
    revoked_at: str | None

    @classmethod
    def of(cls, g: Grant) -> GrantOut:
        return cls(
            id=g.id,
            from_=g.from_space,
            to=g.to_space,
            ai=g.ai,
            until=iso(g.until),
            created_at=iso(g.created_at),
            revoked_at=iso(g.revoked_at),
        )


class TrustedOut(Shape):
    source: str
    created_at: str

    @classmethod
    def of(cls, t: TrustedSource) -> TrustedOut:
        return cls(source=t.source, created_at=iso(t.created_at))


class TokenOut(Shape):
    id: str
    ai: str | None
    space: str | None
    operator: bool
    kind: str = Field(description="agent, operator, run (one run, opened with POST /v1/runs) or runs (opens runs only)")
    created_at: str
    revoked_at: str | None
    expires_at: str | None
    approvals: str = Field(description="who approves its held calls over /mcp: queue (the operator) or host")
    client: str | None = Field(None, description="an OAuth connection's client, by the name its consent page showed")

    @classmethod
    def of(cls, t: Token) -> TokenOut:
        return cls(
            id=t.id,
            ai=t.ai,
            space=t.space,
            operator=t.operator,
            kind=t.kind,
            created_at=iso(t.created_at),
            revoked_at=iso(t.revoked_at),
            expires_at=iso(t.expires_at),
            approvals=t.approvals,
            client=t.client,
        )


class StepOut(Shape):
    at: str
    kind: str
    labels: list[str]
    decision: str | None = Field(description="gates: allowed or refused")
    rule: str | None
    grant: str | None
    target: str | None
    memory_ids: list[str]
    by: str | None = Field(description="who took a step that is not the run's own (an operator ending it)")

    @classmethod
    def of(cls, t: TrailStep) -> StepOut:
        s = t.step
        return cls(
            at=iso(t.at),
            kind=s.kind,
            labels=list(s.labels),
            decision=s.decision,
            rule=s.rule,
            grant=s.grant,
            target=s.target,
            memory_ids=list(s.memory_ids),
            by=s.actor,
        )


class RunOut(Shape):
    run: str
    name: str
    kind: str = Field(description="standing (an agent token's requests), token (a run token), session, once")
    ai: str
    transport: str
    token: str | None = Field(description="the id of the token whose run this is")
    scope: str | None = Field(description="the space the run was sealed in; null: no space; '*': everywhere")
    opened_at: str | None
    ended_at: str | None
    ended_by: str | None
    expires_at: str | None
    carries: list[str] = Field(
        description="the labels of everything delivered to it (and to the run it shares them with)"
    )
    step_count: int

    @classmethod
    def of(cls, r: Run) -> RunOut:
        return cls(step_count=r.steps, **_run_fields(r))


class TrailOut(Shape):
    run: str
    name: str
    kind: str
    ai: str
    transport: str
    token: str | None
    scope: str | None
    opened_at: str | None
    ended_at: str | None
    ended_by: str | None
    expires_at: str | None
    carries: list[str]
    steps: list[StepOut]

    @classmethod
    def of(cls, r: Run, steps: list[TrailStep]) -> TrailOut:
        return cls(steps=[StepOut.of(t) for t in steps], **_run_fields(r))


def _run_fields(r: Run) -> dict[str, Any]:
    return dict(
        run=r.id,
        name=r.name,
        kind=r.kind,
        ai=r.ai,
        transport=r.transport,
        token=r.token_id,
        scope="*" if r.everywhere else r.space,
        opened_at=iso(r.opened_at),
        ended_at=iso(r.ended_at),
        ended_by=r.ended_by,
        expires_at=iso(r.expires_at),
        carries=r.carried.marks(),
    )


# -- lists and reports, as CLI --json and HTTP send them --------------------------------------


class SpacesOut(Shape):
    spaces: list[SpaceOut]


class SpaceRemovedOut(Shape):
    removed: str
    purged: int


class PoliciesOut(Shape):
    policies: list[RuleOut]


class DeliveriesOut(Shape):
    deliveries: list[DeliveryOut]


class GrantsOut(Shape):
    grants: list[GrantOut]


class TrustedListOut(Shape):
    trusted_sources: list[TrustedOut]


class TokensOut(Shape):
    tokens: list[TokenOut]


class RunsOut(Shape):
    runs: list[RunOut]


class ImportErrorOut(Shape):
    line: int
    reason: str


class ImportOut(Shape):
    imported: int
    skipped: int = Field(description="already present, or repeated in the input")
    failed: int
    errors: list[ImportErrorOut] = Field(description=f"the first {ERRORS_KEPT}, by line number")
    seconds: float
    created_spaces: list[str] = Field(default_factory=list, description="with create_spaces: every space it created")


class BackupOut(Shape):
    path: str = Field(description="the backup's folder, on the server's machine")
    taken_at: str = Field(
        description="ISO 8601, UTC: the moment of the catalog copy: the backup answers as the store did then"
    )
    memories: int
    partitions: int
    forgotten_since: int = Field(description="named by the catalog copy, forgotten before their partition was read")
    seconds: float


class DedupeOut(Shape):
    """What ``POST /v1/dedupe`` (``esfis dedupe``) did, or would do with ``dry_run``."""

    space: str | None = Field(description="the space cleaned up; null: personal memories")
    current: int = Field(description="current memories looked at")
    copies: int = Field(description="copies superseded by their earliest memory (a dry run: found)")
    kept: int = Field(description="earliest memories that absorbed at least one copy")
    dry_run: bool
