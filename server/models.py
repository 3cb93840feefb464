"""Domain objects: frozen dataclasses, times as aware UTC datetimes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Transport = Literal["cli", "http", "mcp"]


@dataclass(frozen=True)
class Caller:
    """Who asks, and from where. ``space`` None: no space (personal only)."""

    ai: str
    space: str | None
    transport: Transport = "cli"
    run_id: str | None = None
    scope: str | None = None  # a token's space subtree, when the token has one


@dataclass(frozen=True)
class Memory:
    id: str
    space: str | None
    text: str | None  # None once forgotten
    ai: str
    created_at: datetime
    valid_from: datetime
    valid_until: datetime | None
    superseded_by: str | None
    digest: str | None
    labels: tuple[str, ...] = ()
    key: str | None = None
    forgotten: bool = False

    def current(self, now: datetime) -> bool:
        return (
            not self.forgotten
            and self.superseded_by is None
            and self.valid_from <= now
            and (self.valid_until is None or now < self.valid_until)
        )


@dataclass(frozen=True)
class RecalledMemory:
    """One memory as it goes out to the caller."""

    id: str
    text: str
    space: str | None
    score: float
    created_at: datetime
    valid_until: datetime | None


@dataclass(frozen=True)
class Recall:
    memories: list[RecalledMemory]
    delivery_id: int  # for operators and the trail; never shown to agents


@dataclass(frozen=True)
class Space:
    name: str
    folders: tuple[str, ...]
    created_at: datetime
    memories: int = 0


@dataclass(frozen=True)
class DeliveryItem:
    memory_id: str
    rank: int
    score: float
    outcome: Literal["delivered", "limit"]


@dataclass(frozen=True)
class Delivery:
    id: int
    at: datetime
    ai: str
    space: str | None
    transport: str
    run_id: str | None
    query: str
    limit: int
    reached: tuple[str | None, ...]  # spaces searched; None is personal
    cut: dict[str, int]  # counts by reason: space, policy, superseded, expired, relevance, ...
    items: tuple[DeliveryItem, ...] = ()


@dataclass(frozen=True)
class OtherSpaceMatch:
    memory_id: str
    space: str | None
    score: float
    text: str
    reason: Literal["space", "policy"]  # why the agent could not see it


@dataclass(frozen=True)
class WhyItem:
    item: DeliveryItem
    space: str | None
    text: str | None  # today's text; None: forgotten


@dataclass(frozen=True)
class Why:
    delivery: Delivery
    items: tuple[WhyItem, ...]
    others: tuple[OtherSpaceMatch, ...]  # top few named
    others_more: int  # the rest, counted
    notes: tuple[str, ...] = field(default_factory=tuple)
