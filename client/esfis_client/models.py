"""What the server answers, as typed values. Every model ignores fields it does not know, so a
newer server's additions (``duplicate_of``, ``similar`` …) never break an older client; times are
timezone-aware ``datetime``s; ``data`` is the memory's metadata (``{}`` when none, or when the
server is older than metadata)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Labels(Model):
    """What travels with a memory: where it lives, its origin marks, its digest, the run that
    wrote it, and the spaces whose data that run carried (``from`` on the wire)."""

    space: str | None = None
    origin: list[str] = Field(default_factory=list)
    digest: str | None = None
    run: str | None = None
    from_: list[str] = Field(default_factory=list, alias="from")


class Memory(Model):
    """A memory as remember, get and replace answer it."""

    id: str
    text: str | None = Field(None, description="None once forgotten")
    space: str | None = Field(None, description="None: personal")
    ai: str = ""
    created_at: datetime
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    superseded_by: str | None = None
    labels: Labels = Field(default_factory=Labels)
    data: dict[str, Any] = Field(default_factory=dict)


class Recalled(Model):
    """One memory of a recall, best first: ``score`` is its cosine to the query."""

    id: str
    text: str
    space: str | None = None
    score: float = 0.0
    created_at: datetime
    valid_until: datetime | None = None
    labels: Labels = Field(default_factory=Labels)
    data: dict[str, Any] = Field(default_factory=dict)


class SpacePage(Model):
    """A page of the spaces the caller reads from where it stands, by name (``GET /v1/browse/spaces``);
    ``personal``: it reads personal memories too (no space names them)."""

    personal: bool = False
    spaces: list[str] = Field(default_factory=list)
    next_cursor: str | None = None

    @field_validator("spaces", mode="before")
    @classmethod
    def _names(cls, spaces: Any) -> Any:  # on the wire each is {"name": …}
        return [s["name"] if isinstance(s, dict) else s for s in spaces] if isinstance(spaces, list) else spaces


class MemoryPage(Model):
    """A page of the current memories the caller reads, newest first (``POST /v1/browse/memories``):
    read by the run, as a recall's results are. ``next_cursor`` None: the last page."""

    memories: list[Memory] = Field(default_factory=list)
    next_cursor: str | None = None


ApprovalStatus = Literal["pending", "approved", "declined", "expired", "void", "withdrawn"]


class Approval(Model):
    """A held call's state: pending until a person decides; ``memory`` is what an approved call
    wrote (or, for a forget, forgot); ``reason`` says why it was declined, expired, void or withdrawn."""

    id: str
    status: ApprovalStatus | str
    action: str
    target: str | None = None
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None = None
    memory: str | None = None
    reason: str | None = None

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    @property
    def approved(self) -> bool:
        return self.status == "approved"


class RunToken(Model):
    """A run token for one agent session: give the agent ``token``, and only that."""

    run: str
    token: str
    token_id: str
    expires_at: datetime


class Shared(Model):
    id: str
    labels: Labels = Field(default_factory=Labels)


class Reference(Model):
    """What share made: hand ``ref`` to another agent, which opens it (ids and labels, never texts)."""

    ref: str
    run: str
    created_at: datetime
    memories: list[Shared] = Field(default_factory=list)


class Opened(Model):
    id: str
    text: str | None = None
    forgotten: bool = False
    labels: Labels = Field(default_factory=Labels)


class Context(Model):
    """An opened reference: the memories' texts (None: forgotten since it was shared)."""

    ref: str
    run: str
    memories: list[Opened] = Field(default_factory=list)


class LineError(Model):
    line: int
    reason: str


class ImportReport(Model):
    """An import's report: bad lines are listed by number (the first 1000) and the rest went in."""

    imported: int
    skipped: int
    failed: int
    errors: list[LineError] = Field(default_factory=list)
    seconds: float = 0.0
    created_spaces: list[str] = Field(default_factory=list)


class BackupReport(Model):
    path: str
    taken_at: datetime
    memories: int
    partitions: int
    forgotten_since: int = 0
    seconds: float = 0.0
