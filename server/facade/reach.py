"""What a caller reaches: its scope, a memory it may see, a place it may write.

The scope (``server.spaces.scope``: personal, the caller's space and the spaces below it,
narrowed by the token's subtree and by policy) is read afresh for every verb.
A memory outside it answers exactly like an id that never existed, and is never opened: the
scope is checked on the catalog's row before its partition is read. A successor a caller
cannot see is not named.
"""

from __future__ import annotations

from server.errors import AlreadySuperseded, MemoryNotFound, OutOfReach, PolicyDenied
from server.facade.parts import Parts
from server.memories.input import check_id
from server.models import Caller, Memory
from server.spaces.scope import Scope, scope_for


def scope_of(parts: Parts, caller: Caller) -> Scope:
    """What ``caller`` may see and touch now."""
    subtree = parts.registry.subtree(caller.space) if caller.space is not None else []
    return scope_for(caller, subtree, parts.registry.policies())


def visible(parts: Parts, caller: Caller, id_: str, field: str = "id", scope: Scope | None = None) -> Memory:
    """The memory, if the caller may see it; else the same answer as for a random id. The
    scope is checked on the catalog's row: no partition outside it is opened."""
    check_id(id_, field=field)
    memory = parts.memories.meta(id_)
    if memory is None or memory.forgotten or not (scope or scope_of(parts, caller)).sees(memory.space):
        raise MemoryNotFound(f"no memory {id_}")
    memory = parts.memories.with_text(memory)
    if memory.forgotten:
        raise MemoryNotFound(f"no memory {id_}")
    return memory


def writable(parts: Parts, caller: Caller, space: str | None) -> Scope:
    """Refuse a write the caller's scope does not allow; the barrier comes after."""
    scope = scope_of(parts, caller)
    if scope.sees(space):
        return scope
    decision = scope.decision_for(space)
    if decision is not None:
        where = "personal memories" if space is None else f"space {space!r}"
        raise PolicyDenied(f"{caller.ai} may not use {where} ({decision.reason})")
    raise OutOfReach(
        "personal memories are out of this token's reach"
        if space is None
        else f"space {space!r} is not reachable from here"
    )


def superseded(parts: Parts, caller: Caller, old: Memory) -> AlreadySuperseded:
    """The refusal to replace ``old`` again: it names the successor only if the caller sees it."""
    successor = old.superseded_by
    if successor is not None:
        try:
            visible(parts, caller, successor)
            return AlreadySuperseded(f"memory {old.id} is already superseded by {successor}")
        except MemoryNotFound:
            pass
    # Forgotten or out of reach: which, the caller may not learn. Say what to do instead.
    return AlreadySuperseded(
        f"memory {old.id} is already superseded, by a memory this caller cannot see (forgotten, or out of "
        "reach): remember the new text instead"
    )
