"""Access rows kept between requests, under the catalog's access generation.

Every request reads the rows that decide what its caller may do: its token, the policies, which
spaces exist, the folders. They change rarely; a request reads them several times. So a
long-lived service keeps them here, each entry under the *access generation* it was read in: a
value in the catalog (table ``access_generation``) that every write to ``ACCESS_TABLES`` moves,
by a trigger, in the writing transaction, whichever process or machine writes, hand-written SQL
included. An entry is used only while the generation is still the one it was read under.

**When a change applies.** A request reads the generation once, at its first access read
(``one_request``: the look is shared by the request's threads, and renewed if the request lasts
longer than ``LOOK_S``). A deny, a revocation, a removed space committed before a request's first
access read applies to that request, on every server; one committed during a request applies from
the next. A write the request itself makes forgets its look (``note_write``), so it reads its own
writes. Outside a request (the CLI, a library caller) every cached read reads the generation first.

The generation is a random 63-bit value, not a counter: a catalog restored from a backup comes
back with the value its rows had then, never one a cache took for a later state. A catalog without
the row (emptied by hand) gives every read a value of its own, so nothing is kept.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from server.catalog.shared import ACCESS_TABLES

__all__ = ["ACCESS_TABLES", "AccessCache", "current_generation", "note_write", "one_request"]

LOOK_S = 0.5  # the longest one request keeps the generation it read
MAX_ENTRIES = 20_000  # past this, the cache starts again empty (one entry per token and per name)

T = TypeVar("T")
_UNIQUE = itertools.count(-1, -1)  # stand-ins when the row is missing: never equal to another read


class _Look:
    """One request's reading of the generation, shared by the threads that serve it."""

    __slots__ = ("generation", "seen_at")

    def __init__(self) -> None:
        self.generation: int | None = None
        self.seen_at = 0.0


_LOOK: ContextVar[_Look | None] = ContextVar("esfis_access_look", default=None)


@contextmanager
def one_request() -> Iterator[None]:
    """Serve one request: its access reads share one reading of the generation."""
    token = _LOOK.set(_Look())
    try:
        yield
    finally:
        _LOOK.reset(token)


def note_write() -> None:
    """A write transaction committed in this request: its next access read looks again."""
    look = _LOOK.get()
    if look is not None:
        look.generation = None


def current_generation(catalog: Any) -> int:
    """The catalog's access generation now."""
    row = catalog.one("SELECT value FROM access_generation WHERE one = 1")
    return next(_UNIQUE) if row is None else int(row["value"])


class AccessCache:
    """Entries read from the catalog, each under the generation it was read in. Thread-safe."""

    def __init__(self, catalog: Any) -> None:
        self.catalog = catalog
        self._entries: dict[Any, tuple[int, Any]] = {}
        self._lock = threading.Lock()
        self.reads = 0  # generation reads, for tests and profiles
        self.hits = 0

    def generation(self) -> int:
        look = _LOOK.get()
        now = time.monotonic()
        if look is not None and look.generation is not None and now - look.seen_at <= LOOK_S:
            return look.generation
        self.reads += 1
        generation = current_generation(self.catalog)
        if look is not None:
            look.generation, look.seen_at = generation, now
        return generation

    def get(self, key: Any, load: Callable[[], T], *, keep_none: bool = True) -> T:
        """``load()``'s value for ``key``, read again unless kept under the current generation.
        ``keep_none=False``: a None (an unknown token, say) is never kept, so strangers cannot
        fill the cache."""
        generation = self.generation()  # before the load: a value is never kept under a later one
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and entry[0] == generation:
            self.hits += 1
            return entry[1]
        value = load()
        if value is None and not keep_none:
            return value
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = (generation, value)
        return value
