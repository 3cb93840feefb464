"""MCP over streamable HTTP at ``/mcp`` of a real ``esfis serve``, with the Python SDK's own
streamable HTTP client: the same tools and isolation as ``esfis mcp``, the token as the run,
sessions bound to their token, approvals held for the operator (a host's prompt counts only for
a token made with ``--approvals host``), and the protection the MCP specification asks of HTTP
servers."""

from __future__ import annotations

from contextlib import AsyncExitStack, closing
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from tests.http.conftest import Server, start_server, stop_server
from tests.http.test_workers import _workers, pinned
from tests.mcp.conftest import Person

AUTH0 = "Acme authentication uses Auth0"
CLERK = "Globex authentication uses Clerk"
SECRET = "the staging database password is in vault path secret/acme-stg"
LEAK = "staging db password: vault secret/acme-stg"


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}},
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("mcp-http")
    work = root / "work"
    for name in ("acme", "globex"):
        (work / name).mkdir(parents=True)
    server = start_server(root / "home", work, workers=2)  # any worker answers any request
    try:
        server.cli("space", "add", str(work / "acme"))
        server.cli("space", "add", str(work / "globex"))
        (work / "acme" / "platform").mkdir()
        server.cli("space", "add", str(work / "acme" / "platform"))
        server.cli("remember", AUTH0, "--space", "acme")
        server.cli("remember", CLERK, "--space", "globex")
        server.cli("remember", SECRET, "--space", "acme/platform")
        server.tokens["operator"] = server.token("--operator")
        yield server
    finally:
        stop_server(server)


async def session(
    stack: AsyncExitStack,
    server: Server,
    token: str,
    *,
    query: str = "",
    person: Person | None = None,
    name: str = "Claude Code",
    mode: str = "legacy",
) -> Client:
    http = await stack.enter_async_context(httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60))
    client = Client(
        streamable_http_client(f"{server.url}/mcp{query}", http_client=http),
        mode=mode,
        client_info=Implementation(name=name, version="1.0"),
        elicitation_callback=person,
    )
    return await stack.enter_async_context(client)


async def ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, " ".join(getattr(c, "text", "") for c in result.content)
    assert result.structured_content is not None
    return result.structured_content


async def error(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return " ".join(getattr(c, "text", "") for c in result.content)


def texts(answer: dict[str, Any]) -> list[str]:
    return [m["text"] for m in answer["memories"]]


@pytest.mark.anyio
async def test_auth0_and_clerk_stay_apart_across_sessions_of_scoped_tokens(served):
    acme, globex = served.agent_token(space="acme"), served.agent_token(space="globex")
    async with AsyncExitStack() as stack:
        on_acme = await session(stack, served, acme)
        on_globex = await session(stack, served, globex)
        from_acme = texts(await ok(on_acme, "recall", query="how does login work?"))
        from_globex = texts(await ok(on_globex, "recall", query="how does login work?"))
        assert AUTH0 in from_acme and CLERK not in from_acme
        assert CLERK in from_globex and AUTH0 not in from_globex
        written = await ok(on_acme, "remember", text="Acme's staging login uses a test tenant")
        assert written["space"] == "acme"
    delivery = served.cli("deliveries", "--last", "1", "--json")
    assert '"transport": "mcp"' in delivery.stdout


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["2026-07-28", "auto"])
async def test_the_sessionless_revision_is_served_with_the_same_isolation_and_barrier(served, mode):
    """2026-07-28: no initialize, every request self-contained; "auto" discovers it."""
    sent: list[str] = []

    async def version(request: httpx2.Request) -> None:
        sent.append(request.headers.get("mcp-protocol-version", ""))

    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {served.agent_token(space='acme')}"},
                timeout=60,
                event_hooks={"request": [version]},
            )
        )
        on_acme = await stack.enter_async_context(
            Client(streamable_http_client(f"{served.url}/mcp", http_client=http), mode=mode)
        )
        found = texts(await ok(on_acme, "recall", query="how does login work?"))
        assert AUTH0 in found and CLERK not in found
        assert sent[-1] == "2026-07-28"
        client = await session(stack, served, served.agent_token(), query="?space=acme/platform", mode=mode)
        assert texts(await ok(client, "recall", query="staging database password"))[0] == SECRET
        held = await ok(client, "remember", text=LEAK + f" ({mode})", personal=True)
        assert held["id"] is None and held["approval"]["status"] == "pending"
        await ok(client, "forget", id=held["approval"]["id"])


@pytest.mark.anyio
async def test_a_client_that_approves_its_own_laundering_only_gets_it_held_for_the_operator(served):
    """The review's hole: a client advertising elicitation that accepts every request. Its
    answer is not a person's: the write is held, nothing reaches Globex until the operator
    approves it, and the client is never even asked."""
    token = served.agent_token()
    yes_man = Person("accept")
    async with AsyncExitStack() as stack:
        client = await session(stack, served, token, query="?space=acme/platform", person=yes_man)
        assert texts(await ok(client, "recall", query="staging database password"))[0] == SECRET
        held = await ok(client, "remember", text=LEAK, personal=True)
        assert held["id"] is None and held["approval"]["status"] == "pending"
        assert yes_man.seen == []  # never asked: its answer would not count
        on_globex = await session(stack, served, served.agent_token(ai="cursor"), query="?space=globex")
        assert LEAK not in texts(await ok(on_globex, "recall", query="staging db password vault"))
        again = await error(client, "remember", text=LEAK + " (again)", personal=True)
        assert "approval_pending" in again  # one held call a run
        listed = served.cli("approvals", "--json").stdout
        assert held["approval"]["id"] in listed and "│ " + LEAK in listed.replace("\\u2502", "│")
        served.cli("approvals", "approve", held["approval"]["id"])
        checked = await ok(client, "check_approval", id=held["approval"]["id"])
        assert checked["status"] == "approved" and checked["memory"]
        assert LEAK in texts(await ok(on_globex, "recall", query="staging db password vault"))
        await ok(client, "forget", id=checked["memory"])


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_over_http_even_a_host_trusted_token_has_its_call_held_for_the_operator(served, mode):
    """``--approvals host`` counts a host's prompt as its user's where there is a channel back to
    the host within a call: over stdio. /mcp keeps no session (any worker answers any request),
    so there is none, and the call is held for the operator; the host is never asked."""
    token = served.agent_token(approvals="host")
    person = Person("accept")
    async with AsyncExitStack() as stack:
        client = await session(stack, served, token, query="?space=acme/platform", person=person, mode=mode)
        assert texts(await ok(client, "recall", query="staging database password"))[0] == SECRET
        held = await ok(client, "remember", text=LEAK + f" ({mode})", personal=True)
        assert held["id"] is None and held["approval"]["status"] == "pending"
        assert person.seen == []
        await ok(client, "forget", id=held["approval"]["id"])


@pytest.mark.anyio
async def test_no_session_is_kept_and_a_session_id_is_no_credential(served):
    """Stateless: no request leaves anything of its client in the process, so any worker of any
    server answers the next one. A session id a client sends is nobody's: each request is its
    own token's, standing where its own URL says, in its token's run."""
    owner, other = served.agent_token(), served.agent_token(ai="cursor", space="globex")
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {owner}"}
    opened = httpx.post(f"{served.url}/mcp?space=acme", json=INITIALIZE, headers=headers)
    assert opened.status_code == 200 and "mcp-session-id" not in opened.headers
    call = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "recall", "arguments": {"query": "how does login work?"}},
    }
    plain = {"Accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    mine = httpx.post(f"{served.url}/mcp?space=acme", json=call, headers={**plain, "Authorization": f"Bearer {owner}"})
    assert AUTH0 in mine.text and CLERK not in mine.text
    forged = {**plain, "mcp-session-id": "0" * 32, "Authorization": f"Bearer {other}"}
    theirs = httpx.post(f"{served.url}/mcp", json=call, headers=forged)
    assert CLERK in theirs.text and AUTH0 not in theirs.text  # the other token's own, whatever the id
    # Each request stands where its URL says, within the token's reach; the run carries what each read.
    moved = httpx.post(
        f"{served.url}/mcp?space=globex", json=call, headers={**plain, "Authorization": f"Bearer {owner}"}
    )
    assert CLERK in moved.text and AUTH0 not in moved.text
    beyond = httpx.post(f"{served.url}/mcp?space=acme", json=call, headers=forged)
    assert beyond.status_code == 403 and AUTH0 not in beyond.text  # a globex token cannot stand in acme
    log = served.log.read_text()
    assert owner not in log and other not in log


def test_a_revoked_tokens_session_stops_at_its_next_request(served):
    token = served.agent_token(ai="revocable")
    token_id = served.token_id(ai="revocable")
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    opened = httpx.post(f"{served.url}/mcp", json=INITIALIZE, headers=headers)
    assert opened.status_code == 200
    notified = httpx.post(
        f"{served.url}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    assert notified.status_code == 202
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "recall", "arguments": {"query": "x"}},
    }
    answered = httpx.post(f"{served.url}/mcp", json=call, headers=headers)
    assert answered.status_code == 200 and '"isError":false' in answered.text.replace(" ", "")
    served.cli("token", "revoke", token_id)
    assert httpx.post(f"{served.url}/mcp", json=call, headers=headers).status_code == 401


def test_tokens_that_do_not_act_as_an_ai_and_foreign_origins_are_refused(served):
    init, headers = INITIALIZE, MCP_HEADERS
    operator = httpx.post(
        f"{served.url}/mcp", json=init, headers={**headers, "Authorization": f"Bearer {served.tokens['operator']}"}
    )
    assert operator.status_code == 403
    runs_only = served.token("--ai", "harness", "--runs-only")
    assert (
        httpx.post(
            f"{served.url}/mcp", json=init, headers={**headers, "Authorization": f"Bearer {runs_only}"}
        ).status_code
        == 403
    )
    assert httpx.post(f"{served.url}/mcp", json=init, headers=headers).status_code == 401
    agent = served.agent_token(space="acme")
    with_agent = {**headers, "Authorization": f"Bearer {agent}"}
    assert (
        httpx.post(f"{served.url}/mcp", json=init, headers={**with_agent, "Origin": "http://evil.example"}).status_code
        == 403
    )
    assert (
        httpx.post(f"{served.url}/mcp", json=init, headers={**with_agent, "Host": "evil.example:8765"}).status_code
        == 403
    )
    outside = httpx.post(f"{served.url}/mcp?space=globex", json=init, headers=with_agent)
    assert outside.status_code == 403 and "globex" not in outside.text
    assert httpx.post(f"{served.url}/mcp", json=init, headers=with_agent).status_code == 200


@pytest.mark.anyio
async def test_a_new_session_still_carries_what_the_last_read_across_a_restart(tmp_path: Path):
    work = tmp_path / "work"
    (work / "acme").mkdir(parents=True)
    server = start_server(tmp_path / "home", work)
    try:
        server.cli("space", "add", str(work / "acme"))
        server.cli("remember", "acme's signing key lives in the HSM", "--space", "acme")
        token = server.agent_token()
        async with AsyncExitStack() as stack:
            client = await session(stack, server, token, query="?space=acme")
            assert texts(await ok(client, "recall", query="signing key"))
    finally:
        stop_server(server)
    server = start_server(tmp_path / "home", work)
    try:
        async with AsyncExitStack() as stack:
            client = await session(stack, server, token)
            held = await ok(client, "remember", text="the key is in the HSM", personal=True)
            assert held["approval"]["status"] == "pending"  # it still carries acme's data: a person must approve
    finally:
        stop_server(server)


def test_get_mcp_opens_no_stream_it_answers_405_on_every_worker(served):
    """``/mcp`` keeps no session, so a GET's event stream would stay empty and open for as long
    as its client liked (a socket and a descriptor each, past the token's revocation). Every
    worker answers 405 at once, and a whole MCP session still works without one."""
    token = served.agent_token()
    headers = {"Accept": "text/event-stream", "mcp-protocol-version": "2025-11-25"}
    answers = []
    for worker in _workers(served):
        with closing(pinned(served, worker, token)) as client:
            client.timeout = httpx.Timeout(10.0)  # a stream left open would time out here, not answer
            answers += [client.get("/mcp", headers=headers) for _ in range(3)]
    assert [a.status_code for a in answers] == [405] * 6  # three from each of the two workers
    assert all(a.headers["Allow"] == "POST" for a in answers)
    assert answers[0].json()["error"]["code"] == "method_not_allowed"
    stranger = httpx.get(f"{served.url}/mcp", headers={"Accept": "text/event-stream"}, timeout=10)
    assert stranger.status_code == 401  # the gate still comes first
