"""Context by reference at the façade: what ``share`` makes, and what opening a reference gives
(``server.barrier.contexts`` keeps the references' rows).

A reference names memories with their labels, never their texts, so handing one to another
agent moves no data by itself. Opening it is a read like recall: the opening run must reach
every label in it (or a grant covers the crossing), and it then carries them. What either
answers is redacted for its caller's scope (``server.facade.shown``).
"""

from __future__ import annotations

import dataclasses

import server.facade.reach as reach
from server.barrier.contexts import MAX_SHARED
from server.barrier.runs import Step
from server.errors import InvalidInput
from server.facade.parts import Parts
from server.facade.shown import marks_of, redact_labels, shown_reference
from server.models import Caller, OpenedMemory, Reference


def share(parts: Parts, caller: Caller, ids: list[str]) -> Reference:
    """A reference to memories this caller sees: labels, digests and runs, never texts."""
    if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_SHARED:
        raise InvalidInput(f"memory_ids must be a list of 1 to {MAX_SHARED} ids", field="memory_ids")
    scope = reach.scope_of(parts, caller)
    memories = [reach.visible(parts, caller, i, "memory_ids", scope=scope) for i in dict.fromkeys(ids)]
    run = parts.gates.enter(caller)
    reference = parts.contexts.create(run.id, [(m.id, m.labels) for m in memories])
    parts.runs.record_now(
        run, caller, [Step("share", marks_of(m.labels for m in memories), memory_ids=tuple(m.id for m in memories))]
    )
    return shown_reference(scope, reference)


def open_context(parts: Parts, caller: Caller, ref: str) -> tuple[Reference, list[OpenedMemory]]:
    """The memories of a reference, when this run reaches every label in it (or a grant
    covers the crossing); opening adds the labels to the run."""
    reference = parts.contexts.get(ref)
    scope = reach.scope_of(parts, caller)
    run = parts.gates.enter(caller)
    labels = [labels for _, labels in reference.items]
    marks = marks_of(labels)
    spaces = [s for l in labels for s in l.spaces()]
    steps = parts.gates.open(caller, run, spaces=spaces, reaches=scope.reaches, marks=marks, policies=scope.policies)
    opened = []
    for memory_id, shared in reference.items:
        memory = parts.memories.load(memory_id)
        text = None if memory is None or memory.forgotten else memory.text
        data = {} if memory is None or text is None else memory.data
        opened.append(OpenedMemory(memory_id, text, shared, data))
    carry = marks_of(o.labels for o in opened if o.text is not None)
    step = Step("context_open", marks, memory_ids=tuple(o.id for o in opened))
    parts.runs.record_now(run, caller, [*steps, step], carry=carry)
    return shown_reference(scope, reference), [
        dataclasses.replace(o, labels=redact_labels(scope, o.labels)) for o in opened
    ]
