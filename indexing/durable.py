"""Bytes on disk before a write is acknowledged: whole writes, and the fsyncs they rest on.

``os.write`` may write fewer bytes than it was given and say so only in its return value: on a
full disk the kernel writes what fits and answers the count, and only the next call raises
``ENOSPC``. A caller that ignores the count leaves a short frame or a truncated file and goes on
as if it had written everything (esfis once acknowledged remembers whose tail frames a full disk
had cut: the next writer cut them away as a kill's leftover). So every write of a partition's
file here goes through ``write_all``, which writes until every byte is out or raises.

A write esfis acknowledges is also on stable storage first (``sync``/``sync_dir``): the file's
data with ``fdatasync``, a rename with an fsync of its folder, a LanceDB commit with ``sync_tree``
over what it wrote. A failed fsync raises like a failed write, and the write is refused: after
a failed fsync the kernel may have dropped the dirty pages, so nothing is retried over them.
docs/guarantees.md says what each backend's durability rests on.
"""

from __future__ import annotations

import os
from pathlib import Path

from indexing import failpoints

# A file's times come from the kernel's coarse clock, a few ms behind ``time.time_ns()``: a
# ``since`` taken before a write is moved back by this much, so no file it wrote looks older.
CLOCK_SLACK_NS = 2_000_000_000


def write_all(fd: int, data: bytes | bytearray | memoryview, *, failpoint: str | None = None) -> None:
    """Write every byte of ``data`` at the descriptor's offset, or raise ``OSError``.
    ``failpoint``: a step a test may fault (``indexing.failpoints``): an ``=enospc`` or ``=eio``
    there writes half the bytes first, as a full disk's short write does, then raises."""
    view = memoryview(data).cast("B")
    if failpoint is not None and failpoints.faulted(failpoint):
        half = len(view) // 2
        os.write(fd, view[:half])
        failpoints.hit(failpoint)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # never seen from a regular file; refuse rather than spin
            raise OSError(f"write of {len(view)} bytes wrote {written}")
        view = view[written:]


def sync(fd: int) -> None:
    """The file's data (and the size that reaches it) on stable storage."""
    os.fdatasync(fd)


def sync_dir(folder: Path) -> None:
    """A folder's entries on stable storage: a file created, renamed or removed in it."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes | bytearray | memoryview, *, failpoint: str | None = None) -> None:
    """``path`` made to hold ``data``, durably: through ``<path>.tmp`` (fdatasynced), renamed
    over, its folder fsynced. A failure leaves the old file as it was (the temporary one may
    stay; its owner removes it)."""
    temp = path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        write_all(fd, data, failpoint=failpoint)
        sync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    sync_dir(path.parent)


def sync_tree(root: Path, since_ns: int) -> None:
    """After a LanceDB commit on a local disk: every file under ``root`` changed at or after
    ``since_ns`` (the commit's data files, transaction and manifest), then each folder that holds
    one, on stable storage. Lance's local writes rename files into place without an fsync."""
    folders: set[str] = set()
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            try:
                if os.stat(path).st_mtime_ns < since_ns:
                    continue
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:  # cleaned up meanwhile (an old version): nothing to keep
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            folders.add(folder)
    for folder in sorted(folders):
        sync_dir(Path(folder))
    if folders:
        sync_dir(root)
        sync_dir(root.parent)
