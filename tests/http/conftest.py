"""A real ``esfis serve`` on a free port, one per test module, driven with httpx.

Each module gets its own ESFIS_HOME with two client folders registered by the CLI (acme,
globex), an operator token and an AI token for claude-code, and waits until the model is
loaded so the first request does not pay for it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.conftest import cli_env
from tests.helpers import stop_process

ESFIS_BIN = str(Path(sys.executable).with_name("esfis"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    home: Path
    work: Path
    env: dict[str, str]
    process: subprocess.Popen
    log: Path
    seconds_to_healthz: float = 0.0
    seconds_to_model: float = 0.0
    tokens: dict[str, str] = field(default_factory=dict)
    group: bool = False  # several workers: the server leads a process group of its own

    def cli(self, *argv: str, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [ESFIS_BIN, *argv], env=self.env, cwd=cwd or self.work, capture_output=True, text=True, timeout=120
        )
        if check and done.returncode != 0:
            raise AssertionError(f"esfis {' '.join(argv)} exited {done.returncode}: {done.stderr}")
        return done

    def token(self, *argv: str) -> str:
        return self.cli("token", "create", *argv).stdout.strip()

    def agent_token(self, ai: str = "claude-code", space: str | None = None, approvals: str = "queue") -> str:
        """A new agent token (a standing run that carries nothing yet), made through the core's
        own token book in this process: what ``esfis token create --ai`` does, without its start-up."""
        from server.catalog import open_catalog
        from server.settings import Settings
        from server.spaces.tokens import TokenBook

        catalog = open_catalog(Settings(home=self.home, model=None, catalog=self.env.get("ESFIS_CATALOG")))
        try:
            return TokenBook(catalog).create(ai=ai, space=space, approvals=approvals)[1]
        finally:
            catalog.close()

    def token_id(self, **match: object) -> str:
        tokens = json.loads(self.cli("token", "list", "--json").stdout)["tokens"]
        found = [t for t in tokens if all(t[k] == v for k, v in match.items()) and t["revoked_at"] is None]
        return found[-1]["id"]

    def client(self, token: str | None = None, **headers: str) -> httpx.Client:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=60.0)

    def folder(self, name: str) -> Path:
        path = self.work / name
        path.mkdir(parents=True, exist_ok=True)
        return path


def start_server(home: Path, work: Path, *, workers: int = 1, **extra_env: str) -> Server:
    """``extra_env`` overrides what ``cli_env`` sets (a shared catalog, the bucket). One worker
    process unless ``workers`` says more (``esfis serve``'s own default too); a
    server of several runs in a process group of its own, stopped and killed as one."""
    # The web tests sign in wrong on purpose, many times, from one address: the sign-in limit
    # (tests/http/test_rate_limits.py meets it) would stop them; the other limits stay as shipped.
    env = {**cli_env(home, HF_HUB_DISABLE_PROGRESS_BARS="1"), "ESFIS_RATE_SIGN_IN": "10000/minute", **extra_env}
    port = free_port()
    log = home.parent / f"serve-{port}.log"
    home.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "wb") as out:  # a file, not a pipe: a full pipe would block the server
        process = subprocess.Popen(
            [ESFIS_BIN, "serve", "--port", str(port), "--workers", str(workers)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=workers > 1,
        )
    server = Server(f"http://127.0.0.1:{port}", home, work, env, process, log, group=workers > 1)
    deadline = started + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"esfis serve exited {process.returncode}:\n{log.read_text()}")
        try:
            state = httpx.get(f"{server.url}/healthz", timeout=1.0).json()["model"]
        except httpx.HTTPError:
            time.sleep(0.05)
            continue
        if not server.seconds_to_healthz:
            server.seconds_to_healthz = time.monotonic() - started
        if state == "ready":
            server.seconds_to_model = time.monotonic() - started
            return server
        assert state == "loading", log.read_text()
        time.sleep(0.1)
    kill_server(server)
    raise AssertionError(f"esfis serve did not load its model in time:\n{log.read_text()}")


def stop_server(server: Server) -> None:
    if not server.group:
        stop_process(server.process)
        return
    _signal_group(server, signal.SIGTERM)  # the supervisor stops its workers
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    kill_server(server)  # any worker left behind


def kill_server(server: Server) -> None:
    """SIGKILL: the server's process, and every worker when it leads a group."""
    if server.group:
        _signal_group(server, signal.SIGKILL)
    else:
        server.process.kill()
    server.process.wait()


def _signal_group(server: Server, signum: int) -> None:
    try:
        os.killpg(server.process.pid, signum)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("http")
    work = root / "work"
    for name in ("acme", "globex"):
        (work / name / "src").mkdir(parents=True)
    srv = start_server(root / "esfis-home", work)
    try:
        srv.cli("space", "add", str(work / "acme"))
        srv.cli("space", "add", str(work / "globex"))
        srv.tokens["operator"] = srv.token("--operator")
        srv.tokens["claude-code"] = srv.token("--ai", "claude-code")
        yield srv
    finally:
        stop_server(srv)


@pytest.fixture(scope="module")
def operator(server: Server) -> Iterator[httpx.Client]:
    with server.client(server.tokens["operator"]) as client:
        yield client


@pytest.fixture
def agent(server: Server) -> Iterator[httpx.Client]:
    """claude-code, unscoped, with a token of its own for each test: a token's requests are one
    standing run whose labels only grow, so tests sharing one would carry each other's reads."""
    with server.client(server.agent_token()) as client:
        yield client
