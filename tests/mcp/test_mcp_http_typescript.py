"""MCP over HTTP with the official TypeScript SDK's client (``@modelcontextprotocol/sdk``,
installed from npm by name), against a real ``esfis serve``: Auth0 and Clerk apart for tokens of
acme and globex; the laundering case held for the operator even for a client that approves
every elicitation itself, and applied once the operator approves it; even a host the operator
trusts (``--approvals host``) has it held, since /mcp keeps no session to ask it within a call.
No session id is given: any worker answers any request. It validates every answer against the tools'
declared output schemas, as hosts built on it do."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.http.conftest import start_server, stop_server

# A client's interop: no catalog changes it (tests/conftest.py).
pytestmark = pytest.mark.one_catalog

PROBE = Path(__file__).with_name("typescript") / "probe.mjs"
PACKAGES = ["@modelcontextprotocol/sdk", "zod"]
AUTH0 = "Acme authentication uses Auth0"
CLERK = "Globex authentication uses Clerk"
SECRET = "the staging database password is in vault path secret/acme-stg"


def sdk_folder(tmp_path_factory: pytest.TempPathFactory, name: str, probe: Path) -> Path:
    """A folder with the SDK installed by name from the npm registry, and ``probe`` beside it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("the TypeScript client test needs Node.js and npm (apt-get install nodejs npm)")
    folder = tmp_path_factory.mktemp(name)
    (folder / "package.json").write_text(json.dumps({"name": "esfis-ts-probe", "private": True, "type": "module"}))
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--silent", *PACKAGES],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    shutil.copy(probe, folder / probe.name)
    return folder


@pytest.fixture(scope="module")
def node_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sdk_folder(tmp_path_factory, "ts-client", PROBE)


def probe(folder: Path, url: str, token: str, steps: list, *, elicit: bool = False) -> dict:
    done = subprocess.run(
        ["node", "probe.mjs", url, token, "accept" if elicit else "none", json.dumps(steps)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_typescript_client_gets_the_isolation_and_the_approvals(node_client, tmp_path):
    work = tmp_path / "work"
    for name in ("acme", "acme/platform", "globex"):
        (work / name).mkdir(parents=True)
    server = start_server(tmp_path / "home", work, workers=2)  # any worker answers any request
    try:
        for name in ("acme", "acme/platform", "globex"):
            server.cli("space", "add", str(work / name))
        server.cli("remember", AUTH0, "--space", "acme")
        server.cli("remember", CLERK, "--space", "globex")
        server.cli("remember", SECRET, "--space", "acme/platform")
        login = [["recall", {"query": "how does login work?"}]]
        acme = probe(node_client, f"{server.url}/mcp", server.agent_token(space="acme"), login)
        globex = probe(node_client, f"{server.url}/mcp", server.agent_token(space="globex"), login)
        acme_texts = [m["text"] for m in acme["results"][0]["structured"]["memories"]]
        globex_texts = [m["text"] for m in globex["results"][0]["structured"]["memories"]]
        assert not acme["session"] and AUTH0 in acme_texts and CLERK not in acme_texts
        assert CLERK in globex_texts and AUTH0 not in globex_texts

        token = server.agent_token()
        leak = [
            ["recall", {"query": "staging database password"}],
            ["remember", {"text": "staging db password: vault secret/acme-stg", "personal": True}],
        ]
        # The review's hole: a client that answers every elicitation "accept" is not a person.
        self_approving = probe(node_client, f"{server.url}/mcp?space=acme/platform", token, leak, elicit=True)
        assert self_approving["results"][0]["structured"]["memories"][0]["text"] == SECRET
        held = self_approving["results"][1]
        assert not held["isError"] and held["structured"]["approval"]["status"] == "pending", held
        assert held["structured"]["id"] is None and self_approving["seen"] == []
        approval = held["structured"]["approval"]["id"]
        server.cli("approvals", "approve", approval)
        checked = probe(node_client, f"{server.url}/mcp", token, [["check_approval", {"id": approval}]])
        assert checked["results"][0]["structured"]["status"] == "approved"

        trusted = server.agent_token(approvals="host")  # no channel back within a call: held all the same
        probe(node_client, f"{server.url}/mcp?space=acme/platform", trusted, leak[:1])
        asking = probe(node_client, f"{server.url}/mcp", trusted, leak[1:], elicit=True)
        assert not asking["results"][0]["isError"], asking
        assert asking["results"][0]["structured"]["approval"]["status"] == "pending"
        assert asking["seen"] == []
    finally:
        stop_server(server)
