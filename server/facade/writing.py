"""A memory as a run writes it, and the trail of that write: shared by the agents' verbs
(``server.facade.service``) and by an approved held call (``server.facade.approvals``), so a
write the operator approves later is labelled and recorded exactly as one made at the call."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime

from server.barrier.runs import Run, Step
from server.catalog import Tx
from server.facade.parts import Parts
from server.labels import Carried, Labels, space_mark
from server.memories.data import Data
from server.memories.duplicates import NO_MATCH, WriteCheck, check_write
from server.memories.input import NewMemory, new_id
from server.models import Caller, Memory
from server.spaces import partition_key


def new_memory(
    parts: Parts,
    caller: Caller,
    run: Run,
    *,
    carried: Carried,
    target: str | None,
    text: str,
    origins: tuple[str, ...],
    now: datetime,
    until: datetime | None,
    data: Data | None = None,
) -> NewMemory:
    """A memory as the run writes it: it inherits the origin marks the run carries, and names
    the spaces whose data the run carried besides the target."""
    return NewMemory(
        id=new_id(),
        space=target,
        text=text,
        vector=parts.embed_documents([text])[0],
        ai=caller.ai,
        created_at=now,
        valid_from=now,
        valid_until=until,
        labels=tuple(sorted({*origins, *carried.origins})),
        run_id=run.id,
        from_spaces=tuple(sorted(carried.spaces - {target} if target is not None else carried.spaces)),
        data=data or {},
    )


def write_trail(
    parts: Parts,
    run: Run,
    caller: Caller,
    steps: list[Step],
    memory: NewMemory,
    *,
    carry: tuple[str, ...] = (),
    old: str | None = None,
) -> Callable[[Tx], None]:
    """The steps of a write, to record in the write's own transaction."""
    labels = Labels(space=memory.space, origin=memory.labels, digest=None, run=run.id, from_=memory.from_spaces).marks()
    write = Step(
        "write",
        labels,
        target=space_mark(memory.space),
        memory_ids=(memory.id,) if old is None else (memory.id, old),
    )
    return lambda tx: parts.runs.record(tx, run, caller, steps=[*steps, write], carry=carry)


def already_there(parts: Parts, memory: NewMemory, *, dedupe: bool) -> WriteCheck:
    """What the target partition holds of ``memory`` already (``server.memories.duplicates``):
    its one partition only, its memories current now; nothing with ``dedupe`` off."""
    if not dedupe:
        return NO_MATCH
    return check_write(
        parts.store,
        partition_key(memory.space),
        memory.text,
        memory.vector,
        now=memory.created_at,
        current=lambda ids: parts.memories.current_ids(ids, memory.created_at),
    )


def duplicate_answer(parts: Parts, run: Run, caller: Caller, steps: list[Step], existing: Memory) -> Memory:
    """The answer to a remember of a fact already there: the existing memory, marked, and the
    step that says so in the run's trail (the run has read it, as a get would)."""
    marks = existing.labels.marks()
    step = Step("duplicate", marks, target=space_mark(existing.space), memory_ids=(existing.id,))
    parts.runs.record_now(run, caller, [*steps, step], carry=marks)
    return dataclasses.replace(existing, duplicate_of=existing.id)
