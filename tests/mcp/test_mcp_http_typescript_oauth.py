"""MCP over HTTP with the official TypeScript SDK's OAuth client (``@modelcontextprotocol/sdk``,
installed from npm by name), against a real ``esfis serve`` on loopback: the SDK, given no
token, follows the 401 to esfis's metadata, registers itself (RFC 7591), and sends its person
to ``/authorize``; the operator consents on esfis's pages (done here with httpx, as a browser
would), naming the AI ts-host and the space acme; the SDK takes the code back, exchanges it
with its PKCE verifier, and connects. The connection it gets reaches acme's Auth0, never
globex's Clerk, and ``esfis token list`` shows it as the operator chose it."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest

from tests.http.conftest import free_port, start_server, stop_server
from tests.http.oauth_support import consent as approve
from tests.mcp.test_mcp_http_typescript import AUTH0, CLERK, sdk_folder

# A client's interop: no catalog changes it (tests/conftest.py).
pytestmark = pytest.mark.one_catalog

PROBE = Path(__file__).with_name("typescript") / "oauth_probe.mjs"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
SECONDS = 180


@pytest.fixture(scope="module")
def node_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sdk_folder(tmp_path_factory, "ts-oauth-client", PROBE)


def consent(authorize: str, operator: str, *, ai: str, space: str) -> str:
    """The operator's consent, as a browser gives it: ``/authorize`` to the landing page, then
    ``tests.http.oauth_support.consent`` (the sign-in and the consent page's form)."""
    answer = httpx.get(authorize, follow_redirects=False, timeout=30)
    assert answer.status_code == 302, answer.text
    base = f"{urlsplit(authorize).scheme}://{urlsplit(authorize).netloc}"
    return approve(base, urljoin(authorize, answer.headers["location"]), operator, ai=ai, space=space)


def _lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def _next_json(lines: queue.Queue, deadline: float, process: subprocess.Popen, stderr: Path) -> dict:
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"the TypeScript client said nothing in time:\n{stderr.read_text()}"
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            continue
        if line is None:
            process.wait(timeout=10)
            raise AssertionError(f"the TypeScript client exited {process.returncode}:\n{stderr.read_text()}")
        if line.startswith("{"):
            return json.loads(line)


def test_the_typescript_oauth_client_connects_with_the_operators_consent(node_client, tmp_path):
    work = tmp_path / "work"
    for name in ("acme", "globex"):
        (work / name).mkdir(parents=True)
    server = start_server(tmp_path / "home", work)
    process = None
    try:
        for name in ("acme", "globex"):
            server.cli("space", "add", str(work / name))
        server.cli("remember", AUTH0, "--space", "acme")
        server.cli("remember", CLERK, "--space", "globex")
        operator = server.token("--operator")
        callback = f"http://127.0.0.1:{free_port()}/callback"

        deadline = time.monotonic() + SECONDS
        stderr = tmp_path / "probe.stderr"
        with open(stderr, "w") as errors:
            process = subprocess.Popen(
                ["node", PROBE.name, f"{server.url}/mcp", callback, "authentication provider"],
                cwd=node_client,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True).start()

        authorize = _next_json(lines, deadline, process, stderr)["authorize"]
        asked = parse_qs(urlsplit(authorize).query)
        assert authorize.startswith(f"{server.url}/authorize?"), authorize
        assert asked["code_challenge_method"] == ["S256"] and asked["redirect_uri"] == [callback], asked
        assert asked["resource"] == [f"{server.url}/mcp"], asked

        back = consent(authorize, operator, ai="ts-host", space="acme")
        assert back.startswith(callback + "?"), back
        answer = parse_qs(urlsplit(back).query)
        assert answer["iss"] == [server.url], answer
        assert answer.get("state") == asked.get("state"), (answer, asked)
        assert process.stdin is not None
        process.stdin.write(answer["code"][0] + "\n")
        process.stdin.flush()

        final = _next_json(lines, deadline, process, stderr)
        assert process.wait(timeout=max(1, deadline - time.monotonic())) == 0, stderr.read_text()
        assert {"remember", "recall"} <= set(final["tools"]), final
        assert not final["isError"], final
        assert AUTH0 in final["recalled"], final
        assert CLERK not in final["recalled"] and CLERK not in final["text"], final
        assert final["redirects"] == 1 and not final["session"], final  # stateless: no session id
        assert final["tokens"]["token_type"].lower() == "bearer" and final["tokens"]["refresh"], final

        tokens = json.loads(server.cli("token", "list", "--json").stdout)["tokens"]
        connected = [
            t
            for t in tokens
            if t.get("ai") == "ts-host" and t.get("space") == "acme" and t.get("client") == "TypeScript host"
        ]
        assert len(connected) == 1 and connected[0]["revoked_at"] is None and connected[0]["kind"] == "agent", tokens
    finally:
        if process is not None and process.poll() is None:
            process.kill()
        if process is not None:
            process.wait(timeout=10)
        stop_server(server)
