"""Labels: what a memory carries beside its text, and what a run carries from what it read.

A memory's labels (docs/design.md §7) are its ``space`` (None: personal), its origin marks
(``source:<where>``, given when it was written and inherited by whatever a run writes after
reading it), the ``digest`` of its text, the ``run`` that wrote it, and ``from``: the spaces
whose data that run carried, when they differ from where the memory lives.

The trail and a run's carried set use one flat form, a *mark* per label:

    personal            data of no space
    space:acme/platform data of a space
    source:slack        an origin mark: untrusted unless an operator trusts that source

No agent can set or remove a ``space:`` mark: it comes from where the data lives. Origin marks
are the only labels a writer gives, and only in the ``source:`` form.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from server.errors import InvalidInput

PERSONAL = "personal"
SPACE_PREFIX = "space:"
SOURCE_PREFIX = "source:"
MAX_ORIGINS = 32
SOURCE = re.compile(r"source:[a-z0-9][a-z0-9._-]{0,62}")
SOURCE_RULE = "an origin mark is source: followed by 1 to 63 of [a-z0-9._-], e.g. source:slack"
ELSEWHERE = "(elsewhere)"  # a `from` space the reader cannot reach, as agents see it


def space_mark(space: str | None) -> str:
    return PERSONAL if space is None else SPACE_PREFIX + space


def mark_space(mark: str) -> str | None:
    """The space a ``space:``/``personal`` mark names (None: personal)."""
    return None if mark == PERSONAL else mark.removeprefix(SPACE_PREFIX)


def is_space_mark(mark: str) -> bool:
    return mark == PERSONAL or mark.startswith(SPACE_PREFIX)


def check_source(value: object, *, field: str = "labels") -> str:
    """An origin mark; a bare name (``slack``) is taken as ``source:slack``."""
    if isinstance(value, str) and not value.startswith(SOURCE_PREFIX) and ":" not in value:
        value = SOURCE_PREFIX + value
    if not isinstance(value, str) or not SOURCE.fullmatch(value):
        raise InvalidInput(f"invalid origin mark {str(value)[:80]!r}: {SOURCE_RULE}", field=field)
    return value


def check_origins(values: object, *, field: str = "labels") -> tuple[str, ...]:
    """Origin marks as given at write time: a list of ``source:…`` strings, duplicates dropped."""
    if values is None:
        return ()
    if not isinstance(values, (list, tuple)) or not all(isinstance(x, str) for x in values):
        raise InvalidInput(f"{field} must be a list of strings", field=field)
    if len(values) > MAX_ORIGINS:
        raise InvalidInput(f"{field}: at most {MAX_ORIGINS} origin marks", field=field)
    return tuple(dict.fromkeys(check_source(v, field=field) for v in values))


@dataclass(frozen=True)
class Labels:
    """A memory's labels, as every answer that carries the memory shows them."""

    space: str | None
    origin: tuple[str, ...] = ()
    digest: str | None = None  # hex sha256 of the text; None once forgotten
    run: str | None = None
    from_: tuple[str, ...] = ()

    def marks(self) -> tuple[str, ...]:
        """What a run that reads this memory comes to carry."""
        return (space_mark(self.space), *(space_mark(s) for s in self.from_), *self.origin)

    def spaces(self) -> tuple[str | None, ...]:
        """Every space whose data this memory holds (None: personal)."""
        return (self.space, *self.from_)


@dataclass(frozen=True)
class Carried:
    """What a run carries: the spaces whose data it read, and the origin marks of that data."""

    spaces: frozenset[str]
    personal: bool
    origins: frozenset[str]

    @classmethod
    def of(cls, marks: Iterable[str]) -> Carried:
        spaces, origins, personal = set(), set(), False
        for mark in marks:
            if mark == PERSONAL:
                personal = True
            elif mark.startswith(SPACE_PREFIX):
                spaces.add(mark.removeprefix(SPACE_PREFIX))
            else:
                origins.add(mark)
        return cls(frozenset(spaces), personal, frozenset(origins))

    def with_marks(self, marks: Iterable[str]) -> Carried:
        return Carried.of([*self.marks(), *marks])

    def marks(self) -> list[str]:
        out = [PERSONAL] if self.personal else []
        return out + [space_mark(s) for s in sorted(self.spaces)] + sorted(self.origins)
