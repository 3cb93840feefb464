"""A release installed over a live home may be broken or partial: a part the server loads at its
first use (the MCP SDK, behind ``/mcp`` and the OAuth endpoints) fails to load. A real
``esfis serve`` whose ``mcp`` package fails to import (a package of that name ahead of the real
one on its path, raising as a half-copied install would) answers those requests 503
``not_installed``, never a 500 and a traceback; the rest of the API serves on; and once the
install is whole again, the next request loads the part, with no restart."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http.conftest import Server, start_server, stop_server

MCP_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    root = tmp_path_factory.mktemp("broken")
    shadow = root / "shadow"
    (shadow / "mcp").mkdir(parents=True)
    (shadow / "mcp" / "__init__.py").write_text('raise ImportError("mcp/types.py: truncated file")\n')
    (root / "work").mkdir()
    server = start_server(root / "home", root / "work", PYTHONPATH=str(shadow))
    try:
        yield server, shadow
    finally:
        stop_server(server)


def _logged(server: Server, *lines: str) -> str:
    """The server's log once it holds each of ``lines`` (a worker writes its log from a queue,
    a moment after the answer)."""
    deadline = time.monotonic() + 15
    while True:
        log = server.log.read_text()
        if all(line in log for line in lines) or time.monotonic() > deadline:
            assert all(line in log for line in lines), log[-3000:]
            return log
        time.sleep(0.1)


def test_a_part_that_fails_to_load_is_refused_as_not_installed_and_loaded_again_once_whole(broken):
    server, shadow = broken
    token = server.agent_token()
    with server.client(token) as agent:
        answer = agent.post("/mcp", json=MCP_CALL, headers=MCP_HEADERS)
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error["code"] == "not_installed" and "truncated file" in error["message"]
        assert int(answer.headers["Retry-After"]) >= 1
        assert agent.post("/mcp", json=MCP_CALL, headers=MCP_HEADERS).status_code == 503  # tried again, still broken
        assert agent.post("/v1/recall", json={"query": "anything"}).status_code == 200  # the rest serves on
    with server.client() as stranger:
        registered = stranger.post("/register", json={"redirect_uris": ["http://127.0.0.1:9/cb"]})
        assert registered.status_code == 503, registered.text
        assert registered.json()["error"] == "temporarily_unavailable"
    log = _logged(server, "MCP over HTTP is unavailable", "OAuth is unavailable", "POST /register 503")
    assert "Traceback" not in log and " 500" not in log, log[-3000:]

    shutil.rmtree(shadow / "mcp")  # the install repaired
    with server.client(token) as agent:
        answer = agent.post("/mcp", json=MCP_CALL, headers=MCP_HEADERS)
        assert answer.status_code == 200, answer.text
        assert "recall" in answer.text
    with server.client() as stranger:
        assert stranger.post("/register", json={"redirect_uris": ["http://127.0.0.1:9/cb"]}).status_code == 201


def test_esfis_mcp_says_a_part_that_fails_to_load_in_one_line(tmp_path):
    """``esfis mcp`` loads the SDK as it starts: a broken one is said in one line and an exit
    status, never a traceback a host would show its user."""
    import subprocess

    from tests.conftest import cli_env
    from tests.http.conftest import ESFIS_BIN

    shadow = tmp_path / "shadow"
    (shadow / "mcp").mkdir(parents=True)
    (shadow / "mcp" / "__init__.py").write_text('raise ImportError("mcp/types.py: truncated file")\n')
    run = subprocess.run(
        [ESFIS_BIN, "mcp"],
        env=cli_env(tmp_path / "home", PYTHONPATH=str(shadow)),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().splitlines() == [
        "esfis: error: MCP over stdio is unavailable: a part of esfis failed to load "
        "(ImportError: mcp/types.py: truncated file); its install needs repair"
    ]
