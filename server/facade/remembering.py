"""The agents' writes (``Esfis.remember``, ``replace``, ``forget``): each checked, placed where the
caller may write (``server.facade.reach``), judged by the run's gates (the seal, the data barrier,
untrusted content on forget; a call nobody can approve now held for the operator), and stored
with its trail step in the same transaction (``server.facade.writing``)."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import server.facade.approvals as held_calls
import server.facade.reach as reach
from server.barrier.approvals import is_approval_id
from server.barrier.gates import HeldCall
from server.clock import parse_time
from server.errors import AlreadySuperseded, InvalidInput, OutOfReach
from server.facade.parts import Parts
from server.facade.shown import shown
from server.facade.writing import already_there, duplicate_answer, new_memory, write_trail
from server.labels import check_origins, space_mark
from server.memories.data import check_data, stored
from server.memories.input import check_text
from server.models import Ask, Caller, Held, Memory
from server.records import Step
from server.spaces import validate_space_name


def remember(
    parts: Parts,
    caller: Caller,
    text: str,
    *,
    personal: bool = False,
    valid_until: str | datetime | None = None,
    labels: list[str] | None = None,
    ask: Ask | None = None,
    hold: bool = False,
    dedupe: bool = True,
    data: object = None,
) -> Memory | Held:
    """Write a memory into the caller's space (or personal). ``labels`` are origin marks;
    ``ask`` asks a person when the barrier needs one (None: nobody can be asked); with
    ``hold``, a write nobody could approve at the call is held for the operator, and its
    ``Held`` answered instead (``server.barrier.approvals``). With ``dedupe`` (the default),
    a fact the target space holds already is not stored again: the answer is that memory,
    marked ``duplicate_of``; memories close to it are answered as ``similar``
    (``server.memories.duplicates``). ``data``: the writer's metadata, a JSON object
    (``server.memories.data``)."""
    text = check_text(text)
    data = check_data(data)
    origins = check_origins(labels)
    now = parts.clock()
    until = None if valid_until is None else parse_time(valid_until, now=now, field="valid_until")
    if until is not None and until <= now:
        raise InvalidInput("valid_until must lie in the future", field="valid_until")
    if not personal and caller.space is None:
        raise InvalidInput(
            "this caller stands in no space: register the folder (esfis space add), "
            "name a space, or write a personal memory",
            field="space",
        )
    target = None if personal else caller.space
    scope = reach.writable(parts, caller, target)
    parts.room.check()  # a full disk refuses before the model runs or the trail moves
    run = parts.gates.enter(caller)
    steps = parts.gates.write(
        caller,
        run,
        carried=run.carried,
        target=target,
        action="remember",
        text=text,
        ask=ask,
        policies=scope.policies,
        hold=HeldCall(origins=origins, valid_until=until) if hold else None,
        data=stored(data),
    )
    if isinstance(steps, Held):
        return steps
    memory = new_memory(
        parts,
        caller,
        run,
        carried=run.carried,
        target=target,
        text=text,
        origins=origins,
        now=now,
        until=until,
        data=data,
    )
    found = already_there(parts, memory, dedupe=dedupe)
    if found.duplicate_of is not None:
        existing = _loaded(parts, found.duplicate_of)
        if existing.data == memory.data:
            return shown(scope, duplicate_answer(parts, run, caller, steps, existing))
        # The same fact under other data is another memory: its data would be lost otherwise.
        found = dataclasses.replace(found, duplicate_of=None)
    parts.memories.write([memory], also=write_trail(parts, run, caller, steps, memory))
    return dataclasses.replace(shown(scope, _loaded(parts, memory.id)), similar=found.similar)


def replace(
    parts: Parts,
    caller: Caller,
    id_: str,
    text: str,
    *,
    space: str | None = None,
    ask: Ask | None = None,
    hold: bool = False,
    data: object = None,
) -> Memory | Held:
    """Supersede a memory; the new one lives in ``space`` if given, else in the old one's.
    What the new memory holds is the old one's data and the run's: the barrier judges both.
    ``data``: the new version's metadata; without it, the new version carries none (a
    replace states the whole new memory)."""
    old = reach.visible(parts, caller, id_)
    text = check_text(text)
    data = check_data(data)
    if space is not None:
        validate_space_name(space)
        if not parts.registry.exists(space):
            raise OutOfReach(f"space {space!r} is not reachable from here")
    target = old.space if space is None else space
    scope = reach.writable(parts, caller, target)
    if old.superseded_by is not None:
        raise reach.superseded(parts, caller, old)
    parts.room.check()
    run = parts.gates.enter(caller)
    carried = run.carried.with_marks(old.labels.marks())
    steps = parts.gates.write(
        caller,
        run,
        carried=carried,
        target=target,
        action="replace",
        text=text,
        ask=ask,
        policies=scope.policies,
        hold=HeldCall(memory_id=old.id) if hold else None,
        data=stored(data),
    )
    if isinstance(steps, Held):
        return steps
    now = parts.clock()
    memory = new_memory(
        parts,
        caller,
        run,
        carried=carried,
        target=target,
        text=text,
        origins=(),
        now=now,
        until=None,
        data=data,
    )
    try:
        parts.memories.write(
            [memory],
            supersedes=(old.id, now),
            also=write_trail(parts, run, caller, steps, memory, carry=old.labels.marks(), old=old.id),
        )
    except AlreadySuperseded:
        raise reach.superseded(parts, caller, parts.memories.load(old.id) or old) from None
    return shown(scope, _loaded(parts, memory.id))


def forget(parts: Parts, caller: Caller, id_: str, *, ask: Ask | None = None, hold: bool = False) -> Held | None:
    """Forget for good. A run carrying untrusted content needs a person's approval (held
    for the operator with ``hold``). An approval's id (``apr_…``) of the caller's own run
    withdraws that held call: its text leaves the catalog."""
    if is_approval_id(id_):
        held_calls.withdraw(parts, caller, id_)
        return None
    memory = reach.visible(parts, caller, id_)
    run = parts.gates.enter(caller)
    trusted = [t.source for t in parts.grants.trusted()]
    steps = parts.gates.forget(
        caller,
        run,
        trusted=trusted,
        target=memory.space,
        text=memory.text or "",
        ask=ask,
        hold=HeldCall(memory_id=memory.id) if hold else None,
    )
    if isinstance(steps, Held):
        return steps
    step = Step("forget", memory.labels.marks(), target=space_mark(memory.space), memory_ids=(memory.id,))

    def trail(tx) -> None:
        parts.runs.record(tx, run, caller, steps=[*steps, step])
        parts.contexts.scrub(tx, memory.id)

    parts.memories.forget(memory, parts.clock(), also=trail)
    return None


def _loaded(parts: Parts, id_: str) -> Memory:
    memory = parts.memories.load(id_)
    assert memory is not None
    return memory
