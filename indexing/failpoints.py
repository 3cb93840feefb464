"""Failpoints: named steps of a write where a test has the process killed, as ``kill -9``
would, or the disk fail, to prove that a crash or a fault at exactly that step leaves the store
whole.

They are armed once, at the edge: ``ESFIS_FAILPOINT`` (``Settings.failpoints``), a comma-separated
list of names, each optionally ``NAME@N`` for the N-th time the step is reached (default the
first), and an action: ``=stop`` stops the process there (SIGSTOP) instead, so that a test can
act while it waits and then let it go on (SIGCONT); ``=enospc`` and ``=eio`` raise the
``OSError`` a full disk or a failing one raises there (``ENOSPC``, ``EIO``), once, and the
process goes on, as it would on a disk that fills and frees. A write through
``indexing.durable.write_all`` at such a step writes half its bytes before the error, as a full
disk's short write does. ``open_service`` arms them. Unarmed, a step costs one dict lookup.
The names:

    write:after-journal    the write's ids are in its journal, no vector written yet
    write:after-vectors    the vectors are on disk, the catalog not committed
    write:after-commit     the catalog committed (a replace's old row not yet closed in its table)
    journal:write          a write's line goes into its process's journal (faults: the line cut short)
    small:write            a small partition's file is written to its temporary name (faults: cut short)
    small:sync             ... and fsynced, not yet renamed over the old one
    tail:append            a remember's frame is appended to its partition's tail (faults: cut short)
    tail:sync              ... and fdatasynced
    lance:commit           a LanceDB table's write (a promotion, a fold, an import's batch) is made
    lance:sync             ... and its new files are fsynced
    catalog:commit         the catalog's write transaction is about to commit
    compact:run            a write's routine compaction (and the image refresh after it) begins
    forget:after-intent    the memory is marked forgotten and the intent recorded, the text still in its partition
    dedupe:after-fold      esfis dedupe superseded one copy by its earliest memory (each one: ``@N`` for the N-th)
    forget-where:after-step  a forget by filter committed one step of its marks (``FORGET_BATCH`` memories)
    forget-where:after-intents  a forget by filter marked its memories forgotten, with intents, no text purged
    purge:after-delete     the rows are deleted in their table, not yet rewritten out of its files
                           (a small partition: its file without them written, not yet renamed over it)
    promote:after-table    a small partition's table is created with every row, its file not yet removed
    forget:after-purge     the partition is purged, the catalog not yet checkpointed
    forget:after-checkpoint the catalog is checkpointed, the intent not yet removed
    image:before-publish   a partition's image is built in its temporary folder, not yet published
                           (in the build's own process; ``armed`` hands the armed names to it)
    import:after-spaces    an import's batch created the spaces it names in its transaction, its rows not yet
    import:after-spill     an import spilled rows of thin spaces to its unlinked files, none of them written
    backup:after-catalog   the catalog is copied into the backup, no partition yet
    backup:mid-partition   a partition's first batch is read, the rest not yet
    backup:after-partition a partition is copied (each one: ``@N`` for the N-th)
    backup:before-manifest every part is copied and on disk, the manifest not yet written
    restore:after-catalog  the catalog is copied into the staging folder beside the home
    restore:after-partition a partition is restored (each one)
    restore:after-forgets  the live home's forgets are applied
    restore:before-rename  the staging folder is whole, not yet renamed into the home
"""

from __future__ import annotations

import errno
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterable

_armed: dict[str, int] = {}
_stops: set[str] = set()  # armed names that stop the process instead of killing it
_faults: dict[str, int] = {}  # armed names that raise an OSError instead: its errno
FAULTS = {"enospc": errno.ENOSPC, "eio": errno.EIO}
_seen: Counter[str] = Counter()
_lock = threading.Lock()


def arm(names: Iterable[str]) -> None:
    """Arm these failpoints (``NAME`` or ``NAME@N``), disarming any others."""
    armed, stops, faults = {}, set(), {}
    for spec in names:
        spec, _, action = spec.strip().partition("=")
        name, _, nth = spec.partition("@")
        if name:
            armed[name] = int(nth) if nth else 1
            if action == "stop":
                stops.add(name)
            elif action in FAULTS:
                faults[name] = FAULTS[action]
            elif action:
                raise ValueError(f"failpoint {name}: unknown action {action!r} (stop, enospc or eio)")
    with _lock:
        _armed.clear()
        _armed.update(armed)
        _stops.clear()
        _stops.update(stops)
        _faults.clear()
        _faults.update(faults)
        _seen.clear()


def hit(name: str) -> None:
    """Kill this process with SIGKILL (or stop it, for ``=stop``; or raise its ``OSError``, for
    ``=enospc`` and ``=eio``) if ``name`` is armed and reached for the N-th time."""
    if not _armed or name not in _armed:
        return
    with _lock:
        _seen[name] += 1
        if _seen[name] != _armed[name]:
            return
        fault = _faults.get(name)
    if fault is not None:
        raise OSError(fault, f"{os.strerror(fault)} (failpoint {name})")
    os.kill(os.getpid(), signal.SIGSTOP if name in _stops else signal.SIGKILL)


def faulted(name: str) -> bool:
    """Whether the next ``hit(name)`` raises a fault (a writer then cuts its write short first)."""
    if not _armed or name not in _faults:
        return False
    with _lock:
        return _seen[name] + 1 == _armed.get(name)


def armed() -> list[str]:
    """The armed names as ``arm`` takes them, for a child process to arm the same."""
    with _lock:
        actions = {name: "=stop" for name in _stops} | {
            name: "=" + next(k for k, v in FAULTS.items() if v == code) for name, code in _faults.items()
        }
        return [f"{name}@{nth}" + actions.get(name, "") for name, nth in _armed.items()]
