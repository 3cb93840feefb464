"""What an agent receives: memories and their labels, recalls, references and what they open,
and a run token. Nothing about other spaces, and no delivery id."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from server.clock import iso
from server.labels import Labels
from server.models import (
    Memory,
    OpenedMemory,
    RecalledMemory,
    Reference,
    Token,
)
from server.shapes.base import Shape

DATA_OUT = "the writer's metadata on the memory (a JSON object; {} when none)"


class LabelsOut(Shape):
    space: str | None = Field(description="where the memory lives; null: personal")
    origin: list[str] = Field(description="origin marks (source:…): untrusted unless an operator trusts them")
    digest: str | None = Field(description="sha256:… of the text; null once forgotten")
    run: str | None = Field(description="the run that wrote it")
    from_: list[str] = Field(alias="from", description="spaces whose data the writing run carried besides this one")

    @classmethod
    def of(cls, labels: Labels) -> LabelsOut:
        return cls(
            space=labels.space,
            origin=list(labels.origin),
            digest=None if labels.digest is None else "sha256:" + labels.digest,
            run=labels.run,
            from_=list(labels.from_),
        )


class MemoryOut(Shape):
    id: str
    text: str | None = Field(description="null once forgotten")
    space: str | None
    ai: str = Field(description="the AI that wrote it")
    created_at: str
    valid_from: str
    valid_until: str | None
    superseded_by: str | None
    labels: LabelsOut
    data: dict[str, Any] = Field(description=DATA_OUT)

    @classmethod
    def of(cls, m: Memory) -> MemoryOut:
        return cls(
            id=m.id,
            text=m.text,
            space=m.space,
            ai=m.ai,
            created_at=iso(m.created_at),
            valid_from=iso(m.valid_from),
            valid_until=iso(m.valid_until),
            superseded_by=m.superseded_by,
            labels=LabelsOut.of(m.labels),
            data=m.data,
        )


class SimilarOut(Shape):
    id: str
    score: float = Field(description="cosine similarity to the new memory; higher is closer")


class RememberedOut(MemoryOut):
    duplicate_of: str | None = Field(
        description="set when the space already held this fact: nothing new was stored, and this is "
        "the memory already there"
    )
    similar: list[SimilarOut] = Field(
        description="up to three current memories of the same space close to this one but not the same "
        "fact, best first: when one is an outdated version of it, replace that one"
    )

    @classmethod
    def of(cls, m: Memory) -> RememberedOut:
        return cls(
            **MemoryOut.of(m).model_dump(),
            duplicate_of=m.duplicate_of,
            similar=[SimilarOut(id=s.id, score=s.score) for s in m.similar],
        )


class ReplacedOut(MemoryOut):
    replaced: str = Field(description="the id of the memory it supersedes")


class RecalledOut(Shape):
    id: str
    text: str
    space: str | None
    score: float = Field(description="cosine similarity to the query; higher is closer (0 for a recall with no query)")
    created_at: str
    valid_until: str | None
    labels: LabelsOut
    data: dict[str, Any] = Field(description=DATA_OUT)

    @classmethod
    def of(cls, m: RecalledMemory) -> RecalledOut:
        return cls(
            id=m.id,
            text=m.text,
            space=m.space,
            score=m.score,
            created_at=iso(m.created_at),
            valid_until=iso(m.valid_until),
            labels=LabelsOut.of(m.labels),
            data=m.data,
        )


class RecallOut(Shape):
    memories: list[RecalledOut] = Field(description="best first")

    @classmethod
    def of(cls, memories: list[RecalledMemory]) -> RecallOut:
        return cls(memories=[RecalledOut.of(m) for m in memories])


class ForgottenOut(Shape):
    id: str
    forgotten: bool = True


class SharedOut(Shape):
    id: str
    labels: LabelsOut


class ReferenceOut(Shape):
    ref: str = Field(description="the reference (ctx_…): hand it to another agent, which opens it")
    run: str = Field(description="the run that shared it")
    created_at: str
    memories: list[SharedOut]

    @classmethod
    def of(cls, r: Reference) -> ReferenceOut:
        return cls(
            ref=r.ref,
            run=r.run,
            created_at=iso(r.created_at),
            memories=[SharedOut(id=i, labels=LabelsOut.of(l)) for i, l in r.items],
        )


class OpenedOut(Shape):
    id: str
    text: str | None = Field(description="null: forgotten since it was shared")
    forgotten: bool
    labels: LabelsOut = Field(description="as shared")
    data: dict[str, Any] = Field(description=DATA_OUT)


class ContextOut(Shape):
    ref: str
    run: str
    memories: list[OpenedOut]

    @classmethod
    def of(cls, r: Reference, memories: list[OpenedMemory]) -> ContextOut:
        return cls(
            ref=r.ref,
            run=r.run,
            memories=[
                OpenedOut(id=m.id, text=m.text, forgotten=m.text is None, labels=LabelsOut.of(m.labels), data=m.data)
                for m in memories
            ],
        )


class SpaceNameOut(Shape):
    name: str


class SpaceListOut(Shape):
    personal: bool = Field(description="whether the caller reads personal memories (no space names them)")
    spaces: list[SpaceNameOut] = Field(description="the spaces the caller reads from where it stands, by name")
    next_cursor: str | None = Field(description="pass as cursor for the next page; null on the last page")

    @classmethod
    def of(cls, p: Any) -> SpaceListOut:  # server.facade.browsing.SpacePage
        return cls(personal=p.personal, spaces=[SpaceNameOut(name=n) for n in p.spaces], next_cursor=p.next_cursor)


class MemoryListOut(Shape):
    memories: list[MemoryOut] = Field(description="current memories the caller reads, newest first")
    next_cursor: str | None = Field(
        description="pass as cursor for the next (older) page; null on the last page (a filtered page may "
        "hold fewer than limit, even none, and still have one)"
    )

    @classmethod
    def of(cls, p: Any) -> MemoryListOut:  # server.facade.browsing.MemoryPage
        return cls(memories=[MemoryOut.of(m) for m in p.memories], next_cursor=p.next_cursor)


# -- the operator's ---------------------------------------------------------------------------


class RunTokenOut(Shape):
    run: str = Field(description="the run's id, as the trail and GET /v1/runs name it")
    token: str = Field(description="the run token's secret, shown once: give the agent only this")
    token_id: str
    expires_at: str

    @classmethod
    def of(cls, t: Token, secret: str) -> RunTokenOut:
        assert t.run_id is not None and t.expires_at is not None  # a run token's: one run, a life
        return cls(run=t.run_id, token=secret, token_id=t.id, expires_at=iso(t.expires_at))
