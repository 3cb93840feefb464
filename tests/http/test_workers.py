"""Two workers of one ``esfis serve --workers 2``: what one worker does, the other honours.

Each client here keeps one connection, and the test finds which worker process accepted it
(the connection's socket among that process's descriptors), so every check crosses workers on
purpose: the barrier (a run's labels, read on one worker, refuse a write on the other), forget
(a memory forgotten on one is gone on the other, whose image of the partition was warm, and no
file holds its text), and sign-out (a web session ended on one is refused by the other).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from server.web.session import SESSION_COOKIE as SESSION
from tests.helpers import files_containing
from tests.http.conftest import Server, start_server, stop_server

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("workers")
    server = start_server(root / "esfis-home", root / "work", workers=2)
    try:
        for name in ("acme", "globex"):
            server.cli("space", "add", str(server.folder(name)))
        server.tokens["operator"] = server.token("--operator")
        yield server
    finally:
        stop_server(server)


def _workers(server: Server) -> list[int]:
    """The supervisor's worker processes (spawned; its resource tracker is not one)."""
    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children").read_text().split()
    return sorted(int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes())


def _inode(server_port: int, client_port: int) -> str | None:
    """The socket inode of the server's end of the connection from ``client_port``."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)
            if local == server_port and remote == client_port:
                return fields[9]
    return None


def _worker_of(server: Server, client_port: int) -> int | None:
    inode = _inode(int(server.url.rsplit(":", 1)[1]), client_port)
    for pid in _workers(server):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


def pinned(server: Server, worker: int, token: str | None = None) -> httpx.Client:
    """A client whose one keep-alive connection was accepted by ``worker``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    for _ in range(100):
        client = httpx.Client(
            base_url=server.url,
            headers=headers,
            timeout=60.0,
            follow_redirects=False,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )
        answer = client.get("/healthz")
        port = answer.extensions["network_stream"].get_extra_info("client_addr")[1]
        if _worker_of(server, port) == worker:
            return client
        client.close()
    raise AssertionError(f"no connection reached worker {worker}")


@pytest.fixture(scope="module")
def workers(two: Server) -> list[int]:
    found = _workers(two)
    assert len(found) == 2, found
    return found


def test_a_run_that_read_on_one_worker_is_refused_or_held_its_crossing_write_on_the_other(two, workers):
    a, b = workers
    token = two.agent_token("claude-code")
    with closing(pinned(two, a, token)) as first, closing(pinned(two, b, token)) as second:
        assert first.post("/v1/memories", json={"text": "Acme deploys on Fridays", "space": "acme"}).status_code == 201
        assert first.post("/v1/recall", json={"query": "when does Acme deploy?", "space": "acme"}).json()["memories"]
        crossing = second.post("/v1/memories", json={"text": "deploys happen on Fridays", "space": "globex"})
        assert crossing.status_code == 403 and "data_barrier" in crossing.text
        personal = second.post("/v1/memories", json={"text": "deploys happen on Fridays", "personal": True})
        assert personal.status_code == 202, personal.text  # held for the operator, in the catalog:
        approval = personal.json()["approval"]["id"]  # the other worker knows it
        assert first.get(f"/v1/approvals/{approval}").json()["status"] == "pending"
        assert second.post("/v1/memories", json={"text": "Acme deploys at noon", "space": "acme"}).status_code == 201


def test_a_memory_forgotten_on_one_worker_is_gone_on_the_other(two, workers):
    a, b = workers
    text = "Acme's staging password rotates every Tuesday, kept in the vault"
    with (
        closing(pinned(two, a, two.agent_token("claude-code"))) as first,
        closing(pinned(two, b, two.agent_token("claude-code"))) as second,
    ):
        memory = first.post("/v1/memories", json={"text": text, "space": "acme"}).json()
        found = second.post("/v1/recall", json={"query": "staging password rotation", "space": "acme"}).json()
        assert memory["id"] in [m["id"] for m in found["memories"]]  # the other worker's image is warm
        assert first.delete(f"/v1/memories/{memory['id']}", params={"space": "acme"}).status_code == 204
        assert second.get(f"/v1/memories/{memory['id']}", params={"space": "acme"}).status_code == 404
        again = second.post("/v1/recall", json={"query": "staging password rotation", "space": "acme"}).json()
        assert memory["id"] not in [m["id"] for m in again["memories"]]
    assert files_containing(two.home, text) == []


def test_a_session_signed_out_on_one_worker_is_refused_by_the_other(two, workers):
    a, b = workers
    base = re.search(r"esfis: settings page: http://[^/]+(/settings/[a-z2-7]{26}/)", two.log.read_text()).group(1)
    with closing(pinned(two, a)) as first:
        form = first.get(base + "sign-in")
        signed = first.post(
            base + "sign-in",
            data={"csrf": CSRF.search(form.text).group(1), "token": two.tokens["operator"], "next": ""},
        )
        assert signed.status_code == 303, signed.text
        cookie = first.cookies[SESSION]
        with closing(pinned(two, b)) as second:
            second.cookies.set(SESSION, cookie)
            assert second.get(base + "spaces").status_code == 200  # control: the other worker takes it
            page = first.get(base + "spaces")
            out = first.post(base + "sign-out", data={"csrf": CSRF.search(page.text).group(1)})
            assert out.status_code == 303
            refused = second.get(base + "spaces")
            assert refused.status_code == 303 and refused.headers["location"].startswith(base + "sign-in")


def _rpc(client: httpx.Client, method: str, params: dict, query: str = "") -> dict:
    """One JSON-RPC request to /mcp, on its own (no session), and its answer."""
    answer = client.post(
        f"/mcp{query}",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={"Accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"},
    )
    assert answer.status_code == 200, answer.text
    assert "mcp-session-id" not in answer.headers
    data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1] if data else answer.text)


def _tool(client: httpx.Client, name: str, at: str = "", **arguments: object) -> dict:
    answer = _rpc(client, "tools/call", {"name": name, "arguments": arguments}, at)
    result = answer["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]


def test_mcp_over_http_crosses_workers_with_the_barrier_and_one_approval_applied_once(two, workers):
    """Every request on its own, each pinned to a worker in turn: the run, its labels and its
    held call live in the catalog, so the other worker knows them all."""
    a, b = workers
    token = two.agent_token("claude-code")
    base = re.search(r"esfis: settings page: http://[^/]+(/settings/[a-z2-7]{26}/)", two.log.read_text()).group(1)
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}
    with closing(pinned(two, a, token)) as first, closing(pinned(two, b, token)) as second:
        assert _rpc(first, "initialize", init)["result"]["serverInfo"]["name"] == "esfis"
        tools = {t["name"] for t in _rpc(second, "tools/list", {})["result"]["tools"]}
        assert {"remember", "recall", "replace", "forget", "check_approval", "share", "open_context"} <= tools
        written = _tool(second, "remember", "?space=acme", text="Acme's release train leaves on Fridays")
        found = _tool(first, "recall", "?space=acme", query="when does the Acme release train leave?")
        assert written["id"] in [m["id"] for m in found["memories"]]
        held = _tool(second, "remember", "?space=acme", text="release train: Fridays", personal=True)
        approval = held["approval"]["id"]
        assert held["id"] is None and _tool(first, "check_approval", id=approval)["status"] == "pending"
        with closing(pinned(two, b)) as page:
            form = page.get(base + "sign-in")
            signed = page.post(
                base + "sign-in",
                data={"csrf": CSRF.search(form.text).group(1), "token": two.tokens["operator"], "next": ""},
            )
            assert signed.status_code == 303
            listed = page.get(base + "approvals")
            decided = page.post(
                base + "approvals",
                data={"csrf": CSRF.search(listed.text).group(1), "id": approval, "action": "approve"},
            )
            assert decided.status_code == 303
            again = page.post(
                base + "approvals",
                data={"csrf": CSRF.search(listed.text).group(1), "id": approval, "action": "approve"},
            )
            assert again.status_code in (303, 409)
        status = _tool(first, "check_approval", id=approval)
        assert status["status"] == "approved" and status["memory"]
        personal = _tool(second, "recall", query="release train Fridays")
        assert [m["text"] for m in personal["memories"]].count("release train: Fridays") == 1
