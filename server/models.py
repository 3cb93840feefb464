"""Domain objects: frozen dataclasses, times as aware UTC datetimes."""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast

from server import visible
from server.labels import Labels


class Place(enum.Enum):
    """The two places that are not a space, named at the façade's doors (``None`` inside: a
    memory's, a label's or a grant's space of None is personal; a rule's is everywhere)."""

    PERSONAL = "personal"  # personal memories: in no space, reaching every space
    EVERYWHERE = "everywhere"  # a rule's place above every space; it governs personal memories too


PERSONAL: Literal[Place.PERSONAL] = Place.PERSONAL
EVERYWHERE: Literal[Place.EVERYWHERE] = Place.EVERYWHERE

Transport = Literal["cli", "http", "mcp", "operator"]  # operator: the operator's own search (no run)
Action = Literal["remember", "replace", "forget"]  # the calls a person may be asked to approve
# A held call's state (server.barrier.approvals): waiting, or how it ended.
Status = Literal["pending", "approved", "declined", "expired", "void", "withdrawn"]
# How a run came to be (server.barrier.runs): a token's standing run, a run token's run, an interface's
# session (an MCP process, a CLI --run), or one CLI command.
RunKind = Literal["standing", "token", "session", "once"]
TokenKind = Literal["agent", "operator", "run", "runs"]
# Who answers a token's approvals over /mcp: the operator's queue, or (an operator's choice, for
# an agent token only) the prompt of the MCP host the token is configured in.
Approvals = Literal["queue", "host"]

DEFAULT_LIMIT = 10  # memories a recall answers unless asked
MAX_LIMIT = 100  # the most it answers


@dataclass(frozen=True)
class Caller:
    """Who asks, from where, in which run. ``space`` None: no space (personal only)."""

    ai: str
    space: str | None
    transport: Transport = "cli"
    run_id: str = ""  # the run's id (``server.records.run_id_for``)
    scope: str | None = None  # a token's space subtree, when the token has one
    run_name: str = ""  # the run's name as its interface gave it
    run_kind: RunKind = "once"
    run_parent: str | None = None  # a run whose carried labels this run shares
    token_id: str | None = None  # the HTTP token the caller presented
    run_expires: datetime | None = None  # a run token's expiry


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
    origin: tuple[str, ...] = ()  # origin marks, source:…
    key: str | None = None
    forgotten: bool = False
    from_spaces: tuple[str, ...] = ()  # spaces whose data the writing run carried, besides this one
    run_id: str | None = None  # the run that wrote it
    data: dict[str, Any] = field(default_factory=dict, hash=False)  # the writer's (server.memories.data)
    # What a remember found (``server.memories.duplicates``): set only on its answer.
    duplicate_of: str | None = None  # this memory is the one already there; nothing new was stored
    similar: tuple[Similar, ...] = ()  # current memories close to it, not the same fact

    @property
    def labels(self) -> Labels:
        return Labels(self.space, self.origin, self.digest, self.run_id, self.from_spaces)


@dataclass(frozen=True)
class Similar:
    """A current memory of the same space close to a new one without being the same fact."""

    id: str
    score: float  # the cosine of their vectors


@dataclass(frozen=True)
class RecalledMemory:
    """One memory as it goes out to the caller."""

    id: str
    text: str
    space: str | None
    score: float
    created_at: datetime
    valid_until: datetime | None
    labels: Labels
    data: dict[str, Any] = field(default_factory=dict, hash=False)  # the writer's (server.memories.data)


@dataclass(frozen=True)
class Recall:
    memories: list[RecalledMemory]
    delivery_id: int  # for operators and the trail; never shown to agents


@dataclass(frozen=True)
class Reference:
    """A context reference: memories named with their labels as shared, and the sharing run."""

    ref: str
    run: str
    created_at: datetime
    items: tuple[tuple[str, Labels], ...]


@dataclass(frozen=True)
class OpenedMemory:
    id: str
    text: str | None  # None: forgotten since it was shared
    labels: Labels  # as shared
    data: dict[str, Any] = field(default_factory=dict, hash=False)  # its data now ({} once forgotten)


@dataclass(frozen=True)
class TrustedSource:
    source: str
    created_at: datetime


@dataclass(frozen=True)
class ApprovalRequest:
    """What a person is asked to approve: one call, with its real text and target."""

    action: Action
    ai: str
    text: str
    target: str | None  # None: personal
    carried: tuple[str, ...]  # what makes the call need a person, as marks
    rule: Literal["data_barrier", "untrusted_source"]
    data: str | None = None  # the write's data as stored (compact JSON): shown with the text

    def message(self) -> str:
        """The request as a person reads it. The text is quoted line by line with every control
        character escaped (``server.visible``), so nothing in it can imitate these lines; its
        length and digest let the person check it is the text written."""
        where = "personal memories (they reach every space)" if self.target is None else f"space {self.target!r}"
        carried = ", ".join(self.carried)
        if self.rule == "untrusted_source":
            head = (
                f"esfis: {self.ai} asks to forget, for good, a memory in {where}, while its run carries "
                f"untrusted content ({carried})."
            )
        else:
            head = f"esfis: {self.ai} asks to {self.action} into {where} data it read from {carried}."
        size = len(self.text)
        digest = hashlib.sha256(self.text.encode("utf-8")).hexdigest()
        return (
            f"{head}\n"
            f"Target: {'personal' if self.target is None else self.target}\n"
            f"Carried labels: {carried}\n"
            f"Text: {size} character{'' if size == 1 else 's'}, {self.text.count(chr(10)) + 1} line(s), "
            f"sha256:{digest}; each line below follows {visible.QUOTE.strip()!r}, control characters escaped:\n"
            f"{visible.quoted(self.text)}\n"
            + (
                ""
                if self.data is None
                else f"Data: {len(self.data)} characters of JSON, quoted as the text is:\n{visible.quoted(self.data)}\n"
            )
            + "Approve this one call?"
        )


@dataclass(frozen=True)
class Held:
    """One held call, as the book keeps it."""

    id: str
    status: Status
    action: Action
    rule: Literal["data_barrier", "untrusted_source"]
    ai: str
    transport: str
    run_id: str
    run_kind: str
    run_name: str
    run_parent: str | None
    token_id: str | None
    scope: str | None
    space: str | None  # where the caller stood
    target: str | None  # None: personal
    carried: tuple[str, ...]  # what the run carried when it was held
    blocked: tuple[str, ...]  # of those, what needs the person
    origins: tuple[str, ...]
    text: str | None  # None once decided (and for a forget: the memory holds its text)
    memory_id: str | None  # replace: the old memory; forget: the memory
    valid_until: datetime | None
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None = None
    decided_by: str | None = None
    reason: str | None = None
    result: str | None = None  # the memory an approved write made
    data: str | None = None  # a write's data as stored; None once decided, as the text

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    def caller(self) -> Caller:
        """The caller that made the call, as it stood then: the approved write is its run's step."""
        return Caller(
            ai=self.ai,
            space=self.space,
            transport=cast(Transport, self.transport),  # stored from a Caller's own
            run_id=self.run_id,
            scope=self.scope,
            run_name=self.run_name,
            run_kind=cast(RunKind, self.run_kind),
            run_parent=self.run_parent,
            token_id=self.token_id,
        )

    def request(self, text: str | None = None) -> ApprovalRequest:
        """What the operator is shown: the call's real text (a forget's: the memory's), escaped."""
        return ApprovalRequest(
            self.action,
            self.ai,
            text if text is not None else self.text or "",
            self.target,
            self.blocked,
            self.rule,
            self.data,
        )


@dataclass(frozen=True)
class HeldView:
    """A held call as the operator reads it: the request rendered as the person must see it
    (escaped and quoted), and whether it can still be approved."""

    held: Held
    message: str
    approvable: bool
    why_not: str | None = None


# -- a person at the call (server.barrier.gates) ---------------------------------------------

Ask = Callable[[ApprovalRequest], "bool | None"]  # True: approved, False: declined, None: nobody to ask


class NeedsPerson(Exception):  # noqa: N818  (control flow, never a caller's error)
    """Raised by an ``Ask`` that answers later: ``request`` is what the person must see."""

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__(request.action)
        self.request = request


def answered(request: ApprovalRequest, answer: bool | None) -> Ask:
    """An ``Ask`` holding the person's answer to ``request``: it answers that request only. Asked
    anything else (the run read more while the person looked), nobody answered it."""
    return lambda asked: answer if asked == request else None


@dataclass(frozen=True)
class Token:
    """An HTTP token as stored: never its secret.

    Kinds: an *agent* token acts as its AI, and its requests form its standing run; a *run*
    token (opened with ``POST /v1/runs``) is one run of its AI and can do nothing else; a
    *runs* token (``--runs-only``, a harness's credential) opens run tokens and nothing else;
    an *operator* token administers."""

    id: str
    ai: str | None  # None for operator tokens
    space: str | None  # the subtree an AI token is confined to
    operator: bool
    created_at: datetime
    revoked_at: datetime | None = None
    runs_only: bool = False
    run_id: str | None = None  # a run token's run
    parent: str | None = None  # the token that opened this run token
    parent_run: str | None = None  # the opener's standing run, whose labels the run shares
    expires_at: datetime | None = None
    standing: int = 0  # which of this token's standing runs is the current one
    approvals: Approvals = "queue"  # "host": its MCP host's prompts count as a person's (docs/barrier.md)
    client: str | None = None  # an OAuth connection's client, by the name its consent page showed
    client_id: str | None = None
    resource: str | None = None  # an OAuth connection's token: the one resource it is good for (RFC 8707)

    @property
    def kind(self) -> TokenKind:
        if self.operator:
            return "operator"
        if self.run_id is not None:
            return "run"
        return "runs" if self.runs_only else "agent"

    @property
    def active(self) -> bool:
        return self.revoked_at is None


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
    searched: tuple[str | None, ...]  # the partitions searched (allowed by scope and policy); None: personal
    cut: dict[str, int]  # counts by reason: space, policy, superseded, expired, relevance, ...
    items: tuple[DeliveryItem, ...] = ()
    scope: str | None = None  # the caller's token's subtree, when it had one


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
