"""What a user would pick instead of esfis, loaded with the same world and asked the same query
vectors: Chroma (embedded, and its own server over HTTP), pgvector, Milvus Lite and sqlite-vec,
beside esfis and one LanceDB table.

Every peer runs in this process or is asked over a socket (``networked``: Chroma's server that
``chroma run`` serves, pgvector's PostgreSQL, a child process that ``pgserver`` starts from its
wheel), is given the query *vector*, and answers with the store rows it found,
best first. A peer holds one store and serves one or more *arms*: the same data asked in
another way (a ``where`` filter or a collection per space; ef_search raised; a B-tree added).
An arm's ``prepare`` moves the store into the state the arm needs (an index built or dropped)
and says what the arm was given, in words the report prints.

Peers install from PyPI as the ``peers`` extra (``pip install -e '.[peers]'``; ``scripts/setup``
installs it). A peer whose package is missing, or which cannot start offline here, raises
``PeerUnavailable`` with the reason, and the benchmark reports the reason instead of a figure.
"""

from __future__ import annotations

import shutil
import subprocess
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from benchmarks.synthetic import Store


class PeerUnavailable(RuntimeError):
    """The peer cannot run here; the message says why (the report prints it)."""


class NotInThisVersion(PeerUnavailable):
    """The arm needs a feature this version of the peer lacks: reported, not a failure."""


class Peer(ABC):
    """One store of a peer system, loaded once, serving its arms in turn."""

    system: str  # the system's name as the report shows it
    arms: tuple[str, ...]  # the arms it serves, in the order they are measured
    # A remedy arm → the arm it would remedy: measured only where that arm missed a row or came
    # back short (a documented setting that helps, say ef_search raised); otherwise reported as
    # not needed.
    remedies: dict[str, str] = {}
    version: str = ""
    networked = False  # asked over a socket, as an agent would ask a vector server (not in process)

    @abstractmethod
    def load(self, store: Store) -> None:
        """Store row ``i`` (``store.vectors[i]``, unit length) in its space
        (``space_names(store)[i]``); build what the peer's documentation builds for search."""

    @abstractmethod
    def prepare(self, arm: str) -> str:
        """Make the store ready for ``arm``; what the arm is given, in words."""

    @abstractmethod
    def search(self, arm: str, spaces: list[str], query: np.ndarray, k: int) -> list[int]:
        """The ``k`` rows nearest ``query`` (cosine) among ``spaces``' rows, best first."""

    @abstractmethod
    def disk_bytes(self) -> int:
        """Bytes the peer's store holds on disk."""

    def cost(self, arm: str, load_seconds: float, disk_bytes: int) -> tuple[float, int]:
        """What ``arm``'s store cost to build and holds on disk, given the whole load's time
        and the folder's size; a peer holding each arm's data apart says each one's share."""
        return load_seconds, disk_bytes

    def close(self) -> None:  # noqa: B027 - most peers hold nothing to release
        pass


def space_names(store: Store) -> list[str]:
    """Each row's space name, row by row."""
    return np.array(store.spaces, dtype=object)[store.space_of].tolist()


def folder_bytes(path: Path) -> int:
    """What a folder's files take on disk (``du``'s figure: blocks, not lengths)."""
    if not path.exists():
        return 0
    out = subprocess.run(["du", "-sb", "--apparent-size", str(path)], capture_output=True, text=True, check=True)
    apparent = int(out.stdout.split()[0])
    blocks = subprocess.run(["du", "-sB1", str(path)], capture_output=True, text=True, check=True)
    return max(apparent, int(blocks.stdout.split()[0]))


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
