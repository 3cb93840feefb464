"""The operator's answers about the memories themselves (``GET /v1/memories``, ``POST
/v1/forget``, ``esfis memories … --json``): a keyset page, one memory's provenance, a forget
by filter's preview and outcome."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from server.clock import iso
from server.shapes.agents import MemoryOut
from server.shapes.base import Shape


class MemoryPageOut(Shape):
    memories: list[MemoryOut] = Field(description="newest first (time written, then the catalog's order)")
    next_cursor: str | None = Field(description="pass as cursor for the next (older) page; null on the last page")

    @classmethod
    def of(cls, p: Any) -> MemoryPageOut:  # server.facade.curation.Page
        return cls(memories=[MemoryOut.of(item.memory) for item in p.memories], next_cursor=p.next_cursor)


class IncludedOut(Shape):
    delivery_id: int
    at: str
    ai: str
    transport: str
    rank: int
    outcome: str = Field(description="delivered, or limit (a runner-up cut by the limit)")


class MemoryDetailOut(Shape):
    memory: MemoryOut
    supersedes: str | None = Field(description="the memory this one superseded")
    run: str | None = Field(description="the run that wrote it (its trail: GET /v1/runs/{run})")
    deliveries: list[IncludedOut] = Field(description="the newest deliveries that included it, ids only")

    @classmethod
    def of(cls, d: Any) -> MemoryDetailOut:  # server.facade.curation.Detail
        return cls(
            memory=MemoryOut.of(d.memory),
            supersedes=d.supersedes,
            run=d.memory.run_id,
            deliveries=[IncludedOut(**{**x, "at": iso(x["at"])}) for x in d.deliveries],
        )


class ForgetWhereOut(Shape):
    dry_run: bool
    matched: int = Field(description="memories the filter selects (dry run), or forgotten for good")
    up_to: int = Field(description="the newest catalog row the forget may touch: pass it back to confirm a dry run")

    @classmethod
    def of(cls, p: Any, *, dry_run: bool) -> ForgetWhereOut:  # server.facade.curation.Preview
        return cls(dry_run=dry_run, matched=p.count, up_to=p.up_to)
