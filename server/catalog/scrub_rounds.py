"""Scrubs in rounds: one at a time per catalog, and callers who arrive while one runs share the next.

A scrub (``Catalog.scrub``) costs what the catalog weighs, not what the forget cleared: SQLite
reads every page, PostgreSQL vacuums the memories' tables. Run once per forget, twenty forgets
at once would be twenty such reads side by side, each on a core and each in a thread the server
would rather give to a recall; and a caller who may forget could keep the server busy with
them. So a scrub is a round, as a group commit is: the first caller runs it; whoever arrives
meanwhile adds what they cleared to the next round and waits; when the round ends, one of them
runs the next for all of them. Any number of concurrent forgets then costs at most two scrubs,
and every caller still returns only once a scrub that covered its values has finished, so the
promise of a forget holds unchanged.

A round that fails (the catalog busy past its timeout) or raises answers False to every caller
of that round: their forgets stay under way, for the next forget or open to finish.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass
class _Round:
    cleared: list[bytes] | None = field(default_factory=list)  # None: not known, rebuild whole
    done: bool = False
    result: bool = False


class ScrubRounds:
    """Runs ``scrub`` one round at a time; ``__call__`` returns once a round that covered the
    caller's values has finished, with that round's answer."""

    def __init__(self, scrub: Callable[[Sequence[bytes] | None], bool]) -> None:
        self._scrub = scrub
        self._changed = threading.Condition()
        self._running = False
        self._gathering = _Round()  # the next round, taking what callers add
        self.rounds = 0  # rounds run, for the tests

    def __call__(self, cleared: Sequence[bytes] | None) -> bool:
        with self._changed:
            mine = self._gathering
            if cleared is None:
                mine.cleared = None
            elif mine.cleared is not None:
                mine.cleared.extend(cleared)
            while self._running and not mine.done:
                self._changed.wait()
            if mine.done:  # another caller ran the round this one joined
                return mine.result
            self._running = True
            self._gathering = _Round()
        try:
            mine.result = self._scrub(mine.cleared)
        finally:
            with self._changed:
                mine.done = True
                self._running = False
                self.rounds += 1
                self._changed.notify_all()
        return mine.result
