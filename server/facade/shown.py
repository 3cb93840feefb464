"""What an agent sees of labels: a ``from`` space, or a memory's own space crossed under a grant,
that its scope does not reach is not named (``ELSEWHERE``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from server.labels import ELSEWHERE, Labels
from server.models import Memory, RecalledMemory, Reference
from server.spaces.scope import Scope


def shown(scope: Scope, memory: Memory) -> Memory:
    """A memory as an agent sees it: a ``from`` space it does not reach is not named."""
    shown = _redact(scope, memory.from_spaces)
    return memory if shown == memory.from_spaces else dataclasses.replace(memory, from_spaces=shown)


def shown_recalled(scope: Scope, memory: RecalledMemory) -> RecalledMemory:
    shown = _redact(scope, memory.labels.from_)
    if shown == memory.labels.from_:
        return memory
    return dataclasses.replace(memory, labels=dataclasses.replace(memory.labels, from_=shown))


def shown_reference(scope: Scope, reference: Reference) -> Reference:
    items = tuple((i, redact_labels(scope, l)) for i, l in reference.items)
    return dataclasses.replace(reference, items=items)


def marks_of(labels: Iterable[Labels]) -> tuple[str, ...]:
    return tuple(sorted({mark for l in labels for mark in l.marks()}))


def _redact(scope: Scope, spaces: tuple[str, ...]) -> tuple[str, ...]:
    """``from`` spaces as an agent may see them: one it does not reach is not named."""
    return tuple(s if scope.reaches(s) else ELSEWHERE for s in spaces)


def redact_labels(scope: Scope, labels: Labels) -> Labels:
    """Labels of a memory that crossed under a grant: its own space is not named either."""
    space = labels.space if labels.space is None or scope.reaches(labels.space) else ELSEWHERE
    return dataclasses.replace(labels, space=space, from_=_redact(scope, labels.from_))
