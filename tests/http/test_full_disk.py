"""A real full disk under a real server (issue 68): ESFIS_HOME on a small tmpfs, one agent writing
over HTTP until the volume is full, then the volume grown. Every write answered 201 is there,
whole, after a restart; no answer is a 500; a full disk answers 507 ``disk_full``; writes work
again by themselves once there is room; with the reserve, recalls go on while writes are refused.

Mounting a tmpfs needs root: CI runs as root (``.ci/run``). Elsewhere the test fails and says so,
rather than skip a promise.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from http_support import error_of

from tests.http.conftest import Server, start_server, stop_server

WORDS = [
    "pipeline",
    "runner",
    "cache",
    "deploy",
    "region",
    "shard",
    "token",
    "build",
    "artifact",
    "queue",
    "worker",
    "ledger",
    "invoice",
]


def fact(rng: random.Random, i: int, size: int) -> str:
    """A distinct fact of about ``size`` bytes (no two the same fact: one fact once stores each)."""
    words = [f"fact {i}:"]
    length = len(words[0])
    while length < size:
        words.append(f"{rng.choice(WORDS)}{rng.randrange(10**6)}")
        length += len(words[-1]) + 1
    return " ".join(words)


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs, unmounted afterwards: room for about a hundred of these texts."""
    if os.geteuid() != 0:
        pytest.fail("this test mounts a small tmpfs and needs root, as CI runs it (.ci/run)")
    path = tmp_path / "volume"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def grow(volume: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(volume)], check=True)


def serving(volume: Path, tmp_path: Path, **env: str) -> Server:
    server = start_server(volume, tmp_path / "work", **env)  # its log lies beside, off the volume
    server.cli("space", "add", "--name", "acme", str(_folder(tmp_path)))
    return server


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "work" / "acme"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


TEXT_BYTES = 30_000  # near the most a memory may hold (32 KiB): the volume fills in fewer writes


def fill(client: httpx.Client, rng: random.Random, *, start: int = 0) -> tuple[dict[str, str], dict[int, int]]:
    """Remember until 20 writes in a row are refused; (acknowledged id → text, statuses seen)."""
    acknowledged: dict[str, str] = {}
    statuses: dict[int, int] = {}
    refused_in_a_row, i = 0, start
    while refused_in_a_row < 20:
        text = fact(rng, i, TEXT_BYTES)
        response = client.post("/v1/memories", json={"text": text, "space": "acme"})
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code != 500, response.text
        if response.status_code == 201:
            acknowledged[response.json()["id"]] = text
            refused_in_a_row = 0
        else:
            assert response.status_code == 507, response.text
            assert error_of(response)["code"] == "disk_full"
            assert response.headers["Retry-After"]
            refused_in_a_row += 1
        i += 1
        assert i - start < 20_000, "the volume never filled"
    return acknowledged, statuses


def test_an_agent_writing_until_the_disk_is_full_loses_nothing_acknowledged(volume, tmp_path):
    """No reserve (``ESFIS_DISK_RESERVE_MB=0``): every write meets the full disk wherever it is,
    mid-append, mid-fold, mid-commit."""
    rng = random.Random(68)
    server = serving(volume, tmp_path, ESFIS_DISK_RESERVE_MB="0")
    try:
        with server.client(server.agent_token()) as agent:
            acknowledged, statuses = fill(agent, rng)
            assert len(acknowledged) > 30 and statuses.get(507), statuses
            grow(volume, "64m")  # room again: writes go on without a restart
            more = agent.post("/v1/memories", json={"text": fact(rng, 10**6, 2000), "space": "acme"})
            assert more.status_code == 201, more.text
            acknowledged[more.json()["id"]] = more.json()["text"]
    finally:
        stop_server(server)
    server = start_server(volume, tmp_path / "work")  # restarted: every acknowledged memory whole
    try:
        with server.client(server.agent_token()) as agent:
            for id_, text in acknowledged.items():
                got = agent.get(f"/v1/memories/{id_}", params={"space": "acme"})
                assert got.status_code == 200, (id_, got.text)
                assert got.json()["text"] == text
    finally:
        stop_server(server)


def test_with_the_reserve_recalls_go_on_while_writes_are_refused_and_health_says_so(volume, tmp_path):
    rng = random.Random(69)
    server = serving(volume, tmp_path)  # the default reserve: 15% of this small volume
    try:
        with server.client(server.agent_token()) as agent:
            acknowledged, _ = fill(agent, rng)
            health = httpx.get(f"{server.url}/healthz").json()
            assert health["disk"] == "full" and health["status"] == "degraded", health
            for _ in range(20):  # each recall records its delivery, into the reserve
                recalled = agent.post("/v1/recall", json={"query": "pipeline runner cache", "space": "acme"})
                assert recalled.status_code == 200, recalled.text
                assert recalled.json()["memories"]
            grow(volume, "64m")
            assert httpx.get(f"{server.url}/healthz").json()["disk"] == "ok"
            more = agent.post("/v1/memories", json={"text": fact(rng, 10**6, 2000), "space": "acme"})
            assert more.status_code == 201, more.text
            for id_ in list(acknowledged)[-5:]:
                assert agent.get(f"/v1/memories/{id_}", params={"space": "acme"}).json()["text"] == acknowledged[id_]
    finally:
        stop_server(server)
