"""How the processes sharing a store learn of each other's writes and take turns writing.

Every process keeps images of the partitions it reads, so it must know when another process
wrote one: each partition has a *version*, changed after every write and compared before every
search. And a partition has one writer at a time (a purge deletes the files no version names,
which would take another writer's uncommitted files with them).

- ``LocalCoordination``, on one machine: the version is a token never used before, written in
  the partition's lock file (``<table>.lock``, which every writer opens anyway: no file of its
  own to create, the most costly step of a thin import's new partition) after every write; the
  writers take turns on that file's ``flock``, which the store holds itself, so there is
  nothing more to hold. (esfis before this kept the token in ``<table>.gen``: no longer read.) A
  token begins with its table's *generation*, drawn again by every write but those that only
  appended to the partition's tail (``tail.py``): a reader whose version shares it with the new
  one reads the tail again, not the whole partition (``same_table``).
- Across machines the version lives in the shared catalog and the turn is a lock there too
  (``server.catalog.partition_sync``): no file of one machine is seen by another.
"""

from __future__ import annotations

import itertools
import os
import secrets
import threading
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Protocol


class Coordination(Protocol):
    def version(self, key: str, *, held: int | None = None) -> str:
        """The partition's version now ("" before its first write). ``held``: the descriptor of
        the partition's lock file, when the caller holds it open (a writer): a coordination that
        keeps the version there reads it through that, not by opening the file again."""
        ...

    def bump(self, key: str, *, tail_only_since: str = "", held: int | None = None) -> str:
        """After a write is committed: a new version, returned. ``tail_only_since``: the version
        before a write that only appended to the partition's tail (a hint a coordination may
        keep in the new version, ``same_table``, or ignore); ``held`` as in ``version``."""
        ...

    def writer_turn(self, key: str) -> AbstractContextManager[None]:
        """Held around a write, inside this machine's lock: the turn among machines."""
        ...


class _Tokens:
    """Versions never used before, without a random draw per write (a thin import makes tens of
    thousands): a random prefix per process, drawn again in a forked child, and a counter."""

    def __init__(self) -> None:
        self._draw()
        os.register_at_fork(after_in_child=self._draw)

    def _draw(self) -> None:
        self._prefix = secrets.token_hex(6)
        self._count = itertools.count()
        self._pool, self._used = b"", 0
        self._lock = threading.Lock()

    def next(self) -> str:
        return f"{self._prefix}{next(self._count):016x}"  # fixed width: see ``bump``

    def generation(self) -> str:
        """A table's generation: random (a reader must never take a new table for the one it
        holds), drawn from a pool of the system's randomness filled 512 at a time, not a
        system call per write."""
        width = GENERATION // 2
        with self._lock:
            if self._used + width > len(self._pool):
                self._pool, self._used = os.urandom(width * 512), 0
            drawn = self._pool[self._used : self._used + width]
            self._used += width
        return drawn.hex()


_tokens = _Tokens()
GENERATION = 12  # the hex characters a token begins with: its table's generation
TOKEN_WIDTH = GENERATION + 28  # a generation, then a token of ``_Tokens``: one width (see ``bump``)


def same_table(held: str, now: str) -> bool:
    """Whether every write between two versions of a partition only appended to its tail: they
    share their table's generation. False for versions that carry none (an older esfis's
    tokens, the catalog's counters): the reader then loads the partition whole."""
    return len(held) == len(now) == TOKEN_WIDTH and held[:GENERATION] == now[:GENERATION]


class LocalCoordination:
    def __init__(self, folder: Path, name_of) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._name_of = name_of  # partition key → table name
        self._folder = str(folder)

    def _path(self, key: str) -> str:
        # The partition's lock file (``Layout.lock_path``). Not kept: an import writes 100,000 partitions.
        return f"{self._folder}/{self._name_of(key)}.lock"

    def version(self, key: str, *, held: int | None = None) -> str:
        if held is not None:  # a writer's lock file, open already: no second open a write
            return os.pread(held, 64, 0).decode()
        # Raw os calls: this runs before every search (pathlib's read_text costs ten times more).
        try:
            fd = os.open(self._path(key), os.O_RDONLY)
        except FileNotFoundError:
            return ""
        try:
            return os.read(fd, 64).decode()
        finally:
            os.close(fd)

    def bump(self, key: str, *, tail_only_since: str = "", held: int | None = None) -> str:
        """The new token is written over the old one in place, not renamed over it: no temporary
        file to create and unlink a write (half a thin import's cost of the version). Tokens
        have one width, at least the older ones', so the new one covers what was there. A
        reader racing the write may read a mix of the two: it equals neither (nor shares a
        generation with what the reader holds, unless the old one did), so the reader loads
        again, and the rows it loads are already the new ones (the token moves last)."""
        kept = tail_only_since[:GENERATION] if len(tail_only_since) == TOKEN_WIDTH else ""
        token = (kept or _tokens.generation()) + _tokens.next()
        if held is not None:
            os.pwrite(held, token.encode(), 0)
            return token
        fd = os.open(self._path(key), os.O_WRONLY | os.O_CREAT, 0o600)  # raw os calls: once a write
        try:
            os.pwrite(fd, token.encode(), 0)
        finally:
            os.close(fd)
        return token

    def writer_turn(self, key: str) -> AbstractContextManager[None]:
        return nullcontext()
