"""Chroma's own server over HTTP: ``chroma run`` started here on a free port (offline, telemetry
off), asked through ``chromadb.HttpClient`` as an agent querying a vector server over a network
would, a collection per space (``chroma-server-per-space``).

The same collections, defaults and remedy as the embedded arms (``benchmarks.peers.chroma``):
cosine HNSW with Chroma's defaults, and ``…-ef400`` where its answers miss. The query vector is
given: what an agent pays on top is its own embedding of the query, which the report adds.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.peers import PeerUnavailable, remove
from benchmarks.peers.chroma import Chroma

START_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ChromaServer(Chroma):
    system = "Chroma server"
    arms = ("chroma-server-per-space", "chroma-server-per-space-ef400")
    remedies = {"chroma-server-per-space-ef400": "chroma-server-per-space"}
    networked = True

    def __init__(self, root: Path) -> None:
        try:
            import chromadb
            from chromadb.config import Settings
        except ImportError as e:
            raise PeerUnavailable(f"chromadb is not installed (pip install -e '.[peers]'): {e}") from e
        command = shutil.which("chroma", path=str(Path(sys.executable).parent)) or shutil.which("chroma")
        if command is None:
            raise PeerUnavailable("the chroma command (chromadb's server) is not installed")
        self.version = chromadb.__version__
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.log = (root.parent / f"{root.name}.log").open("w")
        self.process = subprocess.Popen(
            [command, "run", "--path", str(root / "data"), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
        atexit.register(self.close)  # a run cut short (or -k leaving it held) leaves no server behind
        deadline = time.monotonic() + START_S
        while True:
            try:
                self.client = chromadb.HttpClient(
                    host="127.0.0.1", port=self.port, settings=Settings(anonymized_telemetry=False)
                )
                self.client.heartbeat()
                break
            except Exception as e:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise PeerUnavailable(f"chroma run did not answer on port {self.port}: {e}") from e
                time.sleep(0.2)
        self.collections: dict[str, object] = {}
        self.whole = None
        self.with_where = False
        self.costs: dict[str, tuple[float, int]] = {}

    def prepare(self, arm: str) -> str:
        said = super().prepare(arm.replace("chroma-server-", "chroma-"))
        return said.replace("PersistentClient", f"server (chroma run) over HTTP, HttpClient on 127.0.0.1:{self.port}")

    def search(self, arm: str, spaces: list[str], query, k: int) -> list[int]:  # type: ignore[no-untyped-def]
        return super().search(arm.replace("chroma-server-", "chroma-"), spaces, query, k)

    def cost(self, arm: str, load_seconds: float, disk_bytes: int) -> tuple[float, int]:
        return self.costs["chroma-per-space"]

    def close(self) -> None:
        atexit.unregister(self.close)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
        if not self.log.closed:
            self.log.close()
        remove(self.root)
