"""Where a backup goes (``server.bulk.backup``): a folder one backup at a time writes into,
marked as a backup's, so that a later backup knows what it may clear.

**A backup touches only what it made.** Its target is one of:

- absent, or empty: made (0700) and marked with ``.esfis-backup``, which holds the backup's
  random 128-bit id (in its manifest too);
- a folder carrying that marker and no manifest, holding nothing but what a backup writes: a
  backup killed half way, whose parts are cleared before it starts over.

Anything else is refused: a folder holding anything else, or a complete backup
(``FolderNotEmpty``); a path through a symbolic link, anywhere along it (the folder written
would not be the one named); a folder inside the home or its vector store, or one that holds
the home (a backup there would be read as partitions, or copy itself) (``InvalidInput``).

**One backup at a time.** A backup holds ``flock`` on the folder itself from before it looks
inside until it is done: nothing is made to take it, it is taken or not in one step, and it goes
with its process however that ends. Another backup into the folder answers ``BackupUnderWay``.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from server.errors import BackupUnderWay, FolderNotEmpty, InvalidInput

MARKER = ".esfis-backup"
MANIFEST = "manifest.json"
INCOMPLETE = "INCOMPLETE"
CATALOG = "esfis.db"
DUMP = "catalog.pgdump"
VECTORS = "vectors"
_MARK = re.compile(r"esfis backup ([0-9a-f]{32})\n")
# Every name a backup writes (SQLite's journals beside its copy, the manifest's and the marker's
# temporary files): all that the start-over of a killed backup may clear.
WRITTEN = frozenset(
    {
        INCOMPLETE,
        CATALOG,
        f"{CATALOG}-journal",
        f"{CATALOG}-wal",
        f"{CATALOG}-shm",
        DUMP,
        VECTORS,
        f".{MANIFEST}.tmp",
        f"{MARKER}.tmp",
    }
)


@dataclass(frozen=True)
class Folder:
    path: Path
    id: str  # this backup's, in its marker and its manifest


@contextmanager
def claimed(target: Path, *, home: Path, vectors: Path) -> Iterator[Folder]:
    """``target`` made or cleared for a backup, marked, and held by this one until the end."""
    path = checked_path(target, home=home, vectors=vectors)
    _make(path)
    fd = _open_folder(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BackupUnderWay(
                f"another backup is writing into {path}: wait for it to end, or name another folder", field="path"
            ) from None
        if not os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False)):
            raise InvalidInput(f"{path} was replaced while the backup opened it: try again", field="path")
        _clear(path)
        folder = Folder(path, secrets.token_hex(16))
        _mark(folder)
        yield folder
    finally:
        os.close(fd)  # and the lock with it


def checked_path(target: Path, *, home: Path, vectors: Path) -> Path:
    """``target`` as an absolute path with no symbolic link on it, outside the home and its
    store and not around them; else ``InvalidInput`` saying which."""
    given = Path(target)
    if not given.is_absolute():
        raise InvalidInput("a backup's path must be absolute (a folder on the server's machine)", field="path")
    path = Path(os.path.abspath(given))
    real = Path(os.path.realpath(path))
    if real != path:
        raise InvalidInput(
            f"{path} goes through a symbolic link (it leads to {real}): name the folder by its own path", field="path"
        )
    for inner, what in (
        (Path(os.path.realpath(home)), "ESFIS_HOME"),
        (Path(os.path.realpath(vectors)), "the vector store"),
    ):
        if path == inner or inner in path.parents:
            raise InvalidInput(
                f"{path} is inside {what} ({inner}): a backup goes into a folder of its own, outside the home",
                field="path",
            )
        if path in inner.parents:
            raise InvalidInput(f"{path} holds {what} ({inner}): a backup cannot go around what it copies", field="path")
    return path


def _make(path: Path) -> None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass  # what it holds is judged under its lock
    except OSError as exc:
        raise InvalidInput(f"cannot make the backup folder {path}: {exc.strerror}", field="path") from None


def _open_folder(path: Path) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except NotADirectoryError:
        raise InvalidInput(f"{path} is not a folder", field="path") from None
    except OSError as exc:  # a link put there since it was checked (ELOOP), permissions
        raise InvalidInput(f"cannot open the backup folder {path}: {exc.strerror}", field="path") from None


def _clear(path: Path) -> None:
    """Nothing in ``path``, or only a killed backup's parts, which are removed."""
    names = set(os.listdir(path))
    if not names:
        return
    if MANIFEST in names:
        raise FolderNotEmpty(f"{path} holds a complete backup: name another folder", field="path")
    if not _ours(path / MARKER):
        raise FolderNotEmpty(
            f"{path} is not empty and is no backup folder of esfis's: a backup goes into a new or empty folder",
            field="path",
        )
    foreign = sorted(names - WRITTEN - {MARKER})
    if foreign:
        raise FolderNotEmpty(
            f"{path} holds {foreign[0]!r}, which no backup made: a killed backup is started over only "
            "where it left nothing but its own parts (remove it, or name another folder)",
            field="path",
        )
    for name in names - {MARKER}:
        _remove(path / name)


def _ours(marker: Path) -> bool:
    """A marker this code wrote: a plain file (never a link) holding a backup's id."""
    try:
        if not marker.is_file() or marker.is_symlink() or marker.stat().st_size > 64:
            return False
        return _MARK.fullmatch(marker.read_text(errors="replace")) is not None
    except OSError:
        return False


def _mark(folder: Folder) -> None:
    """The marker, whole or not at all (written aside, then renamed over a killed backup's)."""
    temporary = folder.path / f"{MARKER}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"esfis backup {folder.id}\n")
        out.flush()
        os.fsync(out.fileno())
    os.rename(temporary, folder.path / MARKER)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()  # a link is removed, never followed
