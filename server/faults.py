"""Faults of what esfis stands on, said plainly: a full disk, a failing one, a catalog that went
away. What the disk, LanceDB, SQLite and psycopg raise for them is recognised here, once, and
turned into the error tree's leaves (``server.errors``): ``DiskFull`` (507), ``StorageFailed`` and
``CatalogUnavailable`` (503, with ``Retry-After``). Every interface maps an error it does not
know through ``fault_of`` before calling it internal, so none of these is ever a 500.

**The reserve.** A full disk must not stop reads: a recall records its delivery before it
answers, and that row needs room. So writes stop a little early. ``DiskRoom`` refuses a new
memory (remember, replace, an import's batch) while the volume under ``ESFIS_HOME`` has less free
than its reserve (``ESFIS_DISK_RESERVE_MB``, default 64 MiB, at most 15% of the volume), before
anything is written; recalls, gets and forgets (which free room) go on into the reserve. Once
there is room again, writes work again by themselves: each write asks the volume (one
``statvfs``, about a microsecond). A write that meets ENOSPC anyway (another program filled the
disk first) is refused whole by the write path, which leaves nothing behind.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from server.errors import CatalogUnavailable, DiskFull, EsfisError, StorageFailed

FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
FAILED_ERRNOS = {errno.EIO, errno.EROFS, errno.ENXIO, errno.ESTALE}
# LanceDB (Rust) raises a bare OSError whose text carries the OS error: "(os error 28)".
_FULL_TEXTS = ("no space left on device", "os error 28", "disk quota exceeded", "os error 122")
_FAILED_TEXTS = ("input/output error", "os error 5)", "read-only file system", "os error 30")
RESERVE_SHARE = 0.15  # of the volume: a small volume keeps most of itself for memories


def fault_of(exc: BaseException) -> EsfisError | None:
    """The error to answer for ``exc`` when it is a fault of the disk, the object store or the
    catalog (it, or an error it was raised from); None for anything else."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found = _one(current)
        if found is not None:
            return found
        current = current.__cause__ or current.__context__
    return None


def said(log: logging.Logger, what: str, exc: BaseException) -> None:
    """A background round that failed, logged: a refusal esfis names (an ``EsfisError``, or a fault
    of what it stands on, ``fault_of``) on one line, since the next round tries again; anything
    else with its traceback."""
    fault = exc if isinstance(exc, EsfisError) else fault_of(exc)
    if fault is not None:
        log.warning("%s: %s", what, fault.message)
    else:
        log.warning(what, exc_info=exc)


def _one(exc: BaseException) -> EsfisError | None:
    if isinstance(exc, (DiskFull, StorageFailed, CatalogUnavailable)):
        return exc
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        primary = None if code is None else code & 0xFF
        text = str(exc).lower()
        if primary == sqlite3.SQLITE_FULL or "database or disk is full" in text:
            return DiskFull("the disk under the catalog is full: the write was refused and nothing of it kept")
        if primary in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY) or "disk i/o error" in text:
            return StorageFailed(f"the catalog's disk failed ({exc}): the call was refused and nothing of it kept")
        return None
    if isinstance(exc, OSError):
        text = str(exc).lower()
        if exc.errno in FULL_ERRNOS or any(t in text for t in _FULL_TEXTS):
            return DiskFull("the disk under ESFIS_HOME is full: the write was refused and nothing of it kept")
        if exc.errno in FAILED_ERRNOS or any(t in text for t in _FAILED_TEXTS):
            return StorageFailed(f"the storage failed ({exc}): the call was refused and nothing of it kept")
    return None


@dataclass(frozen=True)
class Room:
    """The volume under ESFIS_HOME as a write sees it."""

    free: int  # bytes free to esfis
    total: int  # the volume's size
    reserve: int  # bytes kept for reads' bookkeeping: writes stop below this
    met_full: bool = False  # a write met a full disk above the reserve, and no room came since

    @property
    def below_reserve(self) -> bool:
        return self.free < self.reserve

    @property
    def full(self) -> bool:
        """Full as ``/healthz`` says it: below the reserve, or too full for the last write."""
        return self.below_reserve or self.met_full


class DiskRoom:
    """Whether the volume under a folder has room for a write (``check``), and how much."""

    def __init__(self, folder: Path, *, reserve_mb: int) -> None:
        self.folder = Path(folder)
        self.reserve_mb = reserve_mb
        # The free bytes when a write last met a full disk above the reserve (a write larger
        # than what was left: a small file's rewrite needs a second copy); None once one fits.
        self._refused_at: int | None = None

    def room(self) -> Room:
        stat = os.statvfs(self.folder)
        total = stat.f_blocks * stat.f_frsize
        reserve = min(self.reserve_mb << 20, int(total * RESERVE_SHARE))
        free = stat.f_bavail * stat.f_frsize
        refused_at = self._refused_at
        met_full = refused_at is not None and free < refused_at + max(reserve, 1 << 20)
        return Room(free=free, total=total, reserve=reserve, met_full=met_full)

    def met(self, error: BaseException) -> None:
        """A write failed with ``error``: when it was the disk's room, the volume is full for
        ``/healthz`` (and ``/metrics``) until room grows or a write fits (``fitted``)."""
        if isinstance(fault_of(error), DiskFull):
            try:
                stat = os.statvfs(self.folder)
                self._refused_at = stat.f_bavail * stat.f_frsize
            except OSError:
                pass

    def fitted(self) -> None:
        self._refused_at = None

    def check(self) -> None:
        """Raise ``DiskFull`` when a write would eat into the reserve; a volume that cannot be
        asked (gone, not yet made) is left to the write itself to find out."""
        try:
            room = self.room()
        except OSError:
            return
        if room.below_reserve:  # (a write that met a full disk above it does not stop the next: it may fit)
            raise DiskFull(
                f"the disk under ESFIS_HOME has {room.free >> 20} MiB free, below the "
                f"{room.reserve >> 20} MiB kept for reads (ESFIS_DISK_RESERVE_MB): the write was "
                "refused and nothing of it kept; writes work again once there is room"
            )
