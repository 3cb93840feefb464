"""Held calls at the façade: what an agent may learn of its own, what the operator sees, and
what an approval applies (``server.barrier.approvals`` keeps the rows).

An approved call is applied as its run's step, with the labels it carried when it was held:
its text was fixed then, so it holds no data the run read later. Before applying, everything
that could have changed is checked again: the row is still pending and unexpired, its run
still open and its token unrevoked, a policy still lets its AI write there and read every
space it carries (no approval moves data past a policy), and a replace's old memory is still
current, a forget's memory still there. Otherwise the row is void, its text cleared, and the
caller reads why.
"""

from __future__ import annotations

from server.barrier.runs import Step
from server.catalog import Tx
from server.errors import ApprovalDecided, ApprovalNotFound, EsfisError, InvalidInput
from server.facade.parts import Parts
from server.facade.writing import new_memory, write_trail
from server.labels import Carried, space_mark
from server.memories.data import loaded
from server.models import Caller, Held, HeldView, Memory, Status
from server.spaces.scope import scope_for


def check(parts: Parts, caller: Caller, approval_id: str) -> Held:
    """The caller's own approval (its run's, or its token's); any other is not found."""
    return parts.approvals.of(caller, approval_id)


def withdraw(parts: Parts, caller: Caller, approval_id: str) -> Held:
    """``forget apr_…``: the run takes its held call back; its text leaves the catalog."""
    held = parts.approvals.of(caller, approval_id)
    if not held.pending:
        raise ApprovalDecided(f"approval {held.id} is {held.status} already")
    with parts.catalog.transaction() as tx:
        parts.approvals.close(tx, held, "withdrawn", by=f"{caller.ai} (its own run)", reason="withdrawn by its run")
    parts.catalog.scrub(_texts(held))
    return parts.approvals.get(held.id)


def listing(parts: Parts, *, status: str | None = "pending", last: int = 100) -> list[HeldView]:
    """Newest first, each with its rendering; a pending call that can no longer be applied
    (a policy now denies it, its memory is gone) is voided here, never shown as approvable,
    and so is not among the pending ones."""
    views = [view(parts, held) for held in parts.approvals.list(status=status, last=last)]
    return [v for v in views if v.held.pending] if status == "pending" else views


def view(parts: Parts, held: Held) -> HeldView:
    if not held.pending:
        return HeldView(held, "", False, held.reason)
    refusal = _refusal(parts, held)
    if refusal is not None:
        return HeldView(_void(parts, held, refusal), "", False, refusal)
    text = held.text
    if held.action == "forget" and held.memory_id is not None:
        memory = parts.memories.load(held.memory_id)
        text = "" if memory is None or memory.text is None else memory.text
    return HeldView(held, held.request(text).message(), True)


def decide(parts: Parts, approval_id: str, *, approve: bool, by: str) -> Held:
    """The operator's answer. Declined: the text is cleared. Approved: applied now, as its
    run's step, or, if it no longer can be (expired, its run or token gone, a policy, its
    memory), void or expired with the reason, which the answer carries."""
    if not isinstance(approve, bool):
        raise InvalidInput("approve must be true or false", field="approve")
    held = parts.approvals.get(approval_id, settle=False)
    if not held.pending:
        raise ApprovalDecided(
            f"approval {held.id} is {held.status} already" + (f": {held.reason}" if held.reason else "")
        )
    lapsed = parts.approvals.lapsed(held)
    if lapsed is not None:
        status, reason = lapsed
        return _void(parts, held, reason, status=status)
    marks = (*held.blocked,)
    target = space_mark(held.target)
    if not approve:
        step = Step("declined", marks, None, held.rule, None, target, memory_ids=(held.id,), actor=by)
        with parts.catalog.transaction() as tx:
            parts.approvals.close(tx, held, "declined", by=by, reason="declined by the operator")
            parts.runs.note(tx, held.run_id, [step])  # the operator's step: an ended run takes it too
        parts.catalog.scrub(_texts(held))
        return parts.approvals.get(held.id, settle=False)
    refusal = _refusal(parts, held)
    if refusal is not None:
        return _void(parts, held, refusal)
    approved = [
        Step("approved", marks, None, held.rule, None, target, memory_ids=(held.id,), actor=by),
        Step("gate", held.carried if held.rule == "data_barrier" else marks, "allowed", held.rule, None, target),
    ]
    try:
        _apply(parts, held, approved, by=by)
    except ApprovalDecided:
        raise
    except EsfisError as exc:  # ended, revoked, superseded meanwhile: void, and the operator reads why
        return _void(parts, held, exc.message)
    parts.catalog.checkpoint()
    return parts.approvals.get(held.id, settle=False)


def _apply(parts: Parts, held: Held, steps: list[Step], *, by: str) -> None:
    caller = held.caller()
    run = parts.runs.current(caller)
    now = parts.clock()
    if held.action == "forget":
        gone = _memory(parts, held)

        def forget_trail(tx: Tx) -> None:
            parts.approvals.close(tx, held, "approved", by=by, result=gone.id)
            forgot = Step("forget", gone.labels.marks(), target=space_mark(gone.space), memory_ids=(gone.id,))
            parts.runs.record(tx, run, caller, steps=[*steps, forgot])
            parts.contexts.scrub(tx, gone.id)

        parts.memories.forget(gone, now, also=forget_trail)
        return
    assert held.text is not None
    old = _memory(parts, held) if held.action == "replace" else None
    carried = Carried.of(held.carried)
    memory = new_memory(
        parts,
        caller,
        run,
        carried=carried,
        target=held.target,
        text=held.text,
        origins=held.origins,
        now=now,
        until=held.valid_until,
        data=loaded(held.data),
    )
    trail = write_trail(
        parts,
        run,
        caller,
        steps,
        memory,
        carry=() if old is None else old.labels.marks(),
        old=None if old is None else old.id,
    )

    def also(tx: Tx) -> None:
        parts.approvals.close(tx, held, "approved", by=by, result=memory.id)
        trail(tx)

    parts.memories.write([memory], supersedes=None if old is None else (old.id, now), also=also)


def _memory(parts: Parts, held: Held) -> Memory:
    memory = None if held.memory_id is None else parts.memories.load(held.memory_id)
    if memory is None or memory.forgotten:
        raise ApprovalNotFound(f"memory {held.memory_id} is gone")
    if held.action == "replace" and memory.superseded_by is not None:
        raise ApprovalNotFound(f"memory {held.memory_id} was superseded meanwhile")
    return memory


def _refusal(parts: Parts, held: Held) -> str | None:
    """Why the call can no longer be applied, if it cannot: policies first (a deny stands
    above every approval), then its memory."""
    caller = held.caller()
    registry = parts.registry
    subtree = registry.subtree(caller.space) if caller.space is not None and registry.exists(caller.space) else []
    scope = scope_for(caller, subtree, registry.policies())
    if not scope.sees(held.target):
        return f"{held.ai} may no longer write there"
    for mark in held.carried:
        if mark.startswith("space:") and not scope.policies.decide(held.ai, mark[6:]).allowed:
            return f"a policy now denies {held.ai} data it carries"
    if held.action in ("replace", "forget"):
        try:
            _memory(parts, held)
        except ApprovalNotFound as exc:
            return exc.message
    return None


def _void(parts: Parts, held: Held, reason: str, *, status: Status = "void") -> Held:
    with parts.catalog.transaction() as tx:
        changed = parts.approvals.void(tx, held, reason, status=status)
    if changed:
        parts.catalog.scrub(_texts(held))
    return parts.approvals.get(held.id, settle=False)


def _texts(held: Held) -> list[bytes]:
    """What closing ``held`` unapplied cleared from the catalog (``Catalog.scrub``)."""
    return [v.encode() for v in (held.text, held.data) if v]
