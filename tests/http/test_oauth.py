"""esfis as an OAuth 2.1 authorization server, against a real ``esfis serve`` on loopback: the
metadata a host discovers, the consent that is the operator's, tokens bound to ``/mcp``, refresh
tokens rotated, revocation, and one test for each bad input, each answered with an OAuth
error (never a 500). The MCP SDK's and the TypeScript SDK's own OAuth clients are in
tests/web/test_web_oauth.py and tests/mcp/test_mcp_http_typescript_oauth.py."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from contextlib import AsyncExitStack
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from server.http.oauth.address import OAuthSite, site_for
from server.http.oauth.documents import public, read_document
from tests.http.conftest import Server, start_server, stop_server
from tests.http.oauth_support import (
    CALLBACK,
    approved_code,
    authorize,
    connect,
    consent,
    exchange,
    oauth_error,
    pkce,
    query_of,
    refresh,
    register,
)

AUTH0 = "Acme authentication uses Auth0"
CLERK = "Globex authentication uses Clerk"
SECRET = "the staging database password is in vault path secret/acme-stg"
LEAK = "staging db password: vault secret/acme-stg"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("oauth")
    work = root / "work"
    for name in ("acme", "acme/platform", "globex"):
        (work / name).mkdir(parents=True)
    # The module makes more than the default 60 OAuth requests a minute from one address; the
    # limit itself is tests/http/test_rate_limits.py's to prove.
    server = start_server(root / "home", work, ESFIS_RATE_OAUTH="1000/minute")
    try:
        for name in ("acme", "acme/platform", "globex"):
            server.cli("space", "add", str(work / name))
        server.cli("remember", AUTH0, "--space", "acme")
        server.cli("remember", CLERK, "--space", "globex")
        server.cli("remember", SECRET, "--space", "acme/platform")
        server.tokens["operator"] = server.token("--operator")
        yield server
    finally:
        stop_server(server)


async def mcp_session(stack: AsyncExitStack, server: Server, token: str, query: str = "") -> Client:
    http = await stack.enter_async_context(httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60))
    return await stack.enter_async_context(Client(streamable_http_client(f"{server.url}/mcp{query}", http_client=http)))


async def ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, " ".join(getattr(c, "text", "") for c in result.content)
    assert result.structured_content is not None
    return result.structured_content


def texts(answer: dict[str, Any]) -> list[str]:
    return [m["text"] for m in answer["memories"]]


def tokens_of(server: Server) -> list[dict]:
    return json.loads(server.cli("token", "list", "--json").stdout)["tokens"]


# -- discovery -------------------------------------------------------------------------------


def test_a_host_finds_the_authorization_server_from_the_mcp_url_alone(served):
    """RFC 9728 from the 401, then RFC 8414: every address on the server's public one."""
    answer = httpx.post(f"{served.url}/mcp", json={})
    assert answer.status_code == 401
    metadata_url = f"{served.url}/.well-known/oauth-protected-resource/mcp"
    assert answer.headers["WWW-Authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
    resource = httpx.get(metadata_url).json()
    assert resource["resource"] == f"{served.url}/mcp"
    assert resource["authorization_servers"] == [served.url]
    assert httpx.get(f"{served.url}/.well-known/oauth-protected-resource").json()["resource"] == served.url
    server = httpx.get(f"{served.url}/.well-known/oauth-authorization-server").json()
    assert server["issuer"] == served.url
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["client_id_metadata_document_supported"] is True
    for endpoint in ("authorization", "token", "registration", "revocation"):
        assert server[f"{endpoint}_endpoint"].startswith(served.url + "/")


def test_the_public_address_decides_whether_oauth_is_offered():
    assert site_for(enabled=True, public_url="https://esfis.example.com", host="0.0.0.0", port=80).on
    assert site_for(enabled=True, public_url=None, host="127.0.0.1", port=8765).issuer == "http://127.0.0.1:8765"
    # Plain http off loopback would carry codes and tokens in the clear: refused, with the reason.
    cleartext = site_for(enabled=True, public_url="http://esfis.example.com", host="0.0.0.0", port=80)
    assert not cleartext.on and "https" in (cleartext.why_off or "")
    assert not site_for(enabled=True, public_url=None, host="0.0.0.0", port=80).on  # no address to name
    assert not site_for(enabled=False, public_url="https://esfis.example.com", host="0.0.0.0", port=80).on


# -- the consent is the operator's -----------------------------------------------------------


def test_the_operator_chooses_the_ai_and_the_scope_and_the_token_is_exactly_that(served):
    operator = served.tokens["operator"]
    link = connect(served.url, operator, ai="claude-ai", space="acme")
    listed = [t for t in tokens_of(served) if t["ai"] == "claude-ai" and t["revoked_at"] is None]
    assert listed and listed[-1]["space"] == "acme" and listed[-1]["client"] == "Test host"
    assert listed[-1]["expires_at"] is not None  # short-lived
    on_acme = httpx.post(
        f"{served.url}/v1/recall", json={"query": "authentication"}, headers={"Authorization": f"Bearer {link.access}"}
    )
    assert on_acme.status_code == 401  # a token for /mcp is not a token for the HTTP API (RFC 8707)


def test_deny_sends_the_client_back_with_access_denied_and_its_state(served):
    client_id = register(served.url).json()["client_id"]
    _, challenge = pkce()
    started = authorize(served.url, client_id, challenge, state="keep me: exactly / as given")
    back = consent(
        served.url, started.headers["location"], served.tokens["operator"], ai="x", space=None, decision="deny"
    )
    assert back.startswith(CALLBACK + "?")
    assert query_of(back) == {"error": "access_denied", "state": "keep me: exactly / as given", "iss": served.url}


def test_the_consent_page_never_shows_the_settings_address_to_whoever_starts_an_authorization(served):
    segment = re.search(r"/settings/([a-z2-7]{26})/", served.log.read_text()).group(1)  # as esfis serve printed it
    client_id = register(served.url).json()["client_id"]
    _, challenge = pkce()
    started = authorize(served.url, client_id, challenge)
    landing = httpx.get(started.headers["location"])
    assert "/oauth/connect/" in started.headers["location"] and segment not in started.headers["location"]
    assert landing.status_code == 200 and "Test host" in landing.text
    assert segment not in landing.text and "set-cookie" not in landing.headers
    refused = httpx.post(started.headers["location"], data={"token": "esfis_" + "x" * 43})
    assert refused.status_code == 401 and segment not in refused.text and "set-cookie" not in refused.headers
    # The operator's own token, and only it, leads on to the consent page at the segment.
    signed = httpx.post(started.headers["location"], data={"token": served.tokens["operator"]})
    assert signed.status_code == 303 and signed.headers["location"].startswith(f"/settings/{segment}/connections/")


@pytest.mark.anyio
async def test_a_connection_for_acme_recalls_nothing_of_globex_and_its_standing_run_cannot_launder(served):
    link = connect(served.url, served.tokens["operator"], ai="isolated-host", space="acme")
    async with AsyncExitStack() as stack:
        client = await mcp_session(stack, served, link.access)
        found = texts(await ok(client, "recall", query="how does login work? authentication provider"))
        assert AUTH0 in found and CLERK not in found
    assert _mcp_status(served, link.access, "?space=globex") == 403  # it cannot even stand there
    # A connection for everywhere reads Acme's secret; a refresh gives the same connection a new
    # secret, and its standing run, with what it carries, stays: the laundering is held.
    anywhere = connect(served.url, served.tokens["operator"], ai="laundering-host", space=None)
    async with AsyncExitStack() as stack:
        client = await mcp_session(stack, served, anywhere.access, "?space=acme/platform")
        assert SECRET in texts(await ok(client, "recall", query="staging database password vault"))
    renewed = refresh(served.url, anywhere.client_id, anywhere.refresh)
    assert renewed.status_code == 200, renewed.text
    async with AsyncExitStack() as stack:
        client = await mcp_session(stack, served, renewed.json()["access_token"], "?space=acme/platform")
        held = await ok(client, "remember", text=LEAK, personal=True)
        assert held["id"] is None and held["approval"]["status"] == "pending"
    on_globex = served.client(served.agent_token(ai="cursor", space="globex"))
    assert LEAK not in [
        m["text"] for m in on_globex.post("/v1/recall", json={"query": "staging db password"}).json()["memories"]
    ]


# -- refresh and revocation -------------------------------------------------------------------


def test_a_refresh_token_is_rotated_and_one_used_twice_ends_the_connection(served):
    link = connect(served.url, served.tokens["operator"], ai="rotating-host")
    first = refresh(served.url, link.client_id, link.refresh)
    assert first.status_code == 200
    newer = first.json()
    assert newer["refresh_token"] != link.refresh and newer["access_token"] != link.access
    assert _mcp_status(served, link.access) == 401  # the old access token stopped with the rotation
    assert _mcp_status(served, newer["access_token"]) == 200
    replayed = refresh(served.url, link.client_id, link.refresh)
    assert replayed.status_code == 400 and oauth_error(replayed) == "invalid_grant"
    # Someone else held the used one: the whole connection ends, the newest tokens too.
    assert _mcp_status(served, newer["access_token"]) == 401
    assert refresh(served.url, link.client_id, newer["refresh_token"]).status_code == 400


def test_revoking_the_token_on_the_tokens_list_ends_its_refresh_token_too(served):
    link = connect(served.url, served.tokens["operator"], ai="revoked-host")
    token_id = next(t["id"] for t in tokens_of(served) if t["ai"] == "revoked-host")
    served.cli("token", "revoke", token_id)
    assert _mcp_status(served, link.access) == 401
    assert oauth_error(refresh(served.url, link.client_id, link.refresh)) == "invalid_grant"


def test_rfc_7009_revocation_ends_the_connection(served):
    link = connect(served.url, served.tokens["operator"], ai="self-revoking-host")
    done = httpx.post(f"{served.url}/revoke", data={"token": link.refresh, "client_id": link.client_id})
    assert done.status_code == 200
    assert _mcp_status(served, link.access) == 401


def _mcp_status(server: Server, token: str, query: str = "") -> int:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "p", "version": "1"}},
    }
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    return httpx.post(f"{server.url}/mcp{query}", json=initialize, headers=headers, timeout=30).status_code


# -- bad input, one test each -----------------------------------------------------------------


def test_a_redirect_uri_that_was_not_registered_is_refused_and_never_followed(served):
    client_id = register(served.url).json()["client_id"]
    _, challenge = pkce()
    answer = authorize(served.url, client_id, challenge, redirect="https://evil.example/steal")
    assert answer.status_code == 400 and "location" not in answer.headers
    assert oauth_error(answer) == "invalid_request"


def test_registering_a_redirect_uri_that_is_not_https_or_loopback_is_refused(served):
    answer = register(served.url, redirect="http://evil.example/cb")
    assert answer.status_code == 400 and oauth_error(answer) == "invalid_redirect_uri"


def test_a_missing_pkce_verifier_is_refused(served):
    client_id, code, _ = approved_code(served.url, served.tokens["operator"])
    answer = exchange(served.url, client_id, code, None)
    assert answer.status_code == 400 and oauth_error(answer) == "invalid_request"


def test_a_wrong_pkce_verifier_is_refused(served):
    client_id, code, _ = approved_code(served.url, served.tokens["operator"])
    answer = exchange(served.url, client_id, code, pkce()[0])
    assert answer.status_code == 400 and oauth_error(answer) == "invalid_grant"


def test_pkce_plain_is_refused(served):
    client_id = register(served.url).json()["client_id"]
    verifier, _ = pkce()
    answer = authorize(served.url, client_id, verifier, method="plain")
    # A client nobody consented to: the error on esfis's own page (tests/http/test_open_network.py)
    assert answer.status_code == 400 and "location" not in answer.headers
    assert "invalid_request" in answer.text


def test_a_code_used_twice_is_refused_and_revokes_what_the_first_use_made(served):
    client_id, code, verifier = approved_code(served.url, served.tokens["operator"], ai="replayed-host")
    first = exchange(served.url, client_id, code, verifier)
    assert first.status_code == 200
    again = exchange(served.url, client_id, code, verifier)
    assert again.status_code == 400 and oauth_error(again) == "invalid_grant"
    assert _mcp_status(served, first.json()["access_token"]) == 401


def test_a_foreign_resource_is_refused_at_authorize_and_at_token(served):
    client_id = register(served.url).json()["client_id"]
    _, challenge = pkce()
    answer = authorize(served.url, client_id, challenge, resource="https://other.example/mcp")
    assert answer.status_code == 400 and "invalid_target" in answer.text
    client_id, code, verifier = approved_code(served.url, served.tokens["operator"])
    foreign = exchange(served.url, client_id, code, verifier, resource="https://other.example/mcp")
    assert foreign.status_code == 400 and oauth_error(foreign) == "invalid_target"


def test_an_expired_access_token_is_refused(served):
    link = connect(served.url, served.tokens["operator"], ai="expired-host")
    token_id = next(t["id"] for t in tokens_of(served) if t["ai"] == "expired-host")
    assert _mcp_status(served, link.access) == 200
    _age(served, token_id, timedelta(hours=2))
    assert _mcp_status(served, link.access) == 401


def test_a_run_token_opened_by_a_connection_ends_with_it_and_keeps_its_resource(served):
    """A one-hour access token, bound to the server's own address (good for /v1), asks for a
    seven-day run token: it gets one that expires with the access token, bound to the same
    resource, and refused once that hour has passed, on /v1 and /mcp alike."""
    link = connect(served.url, served.tokens["operator"], ai="minting-host", resource=served.url)
    agent = httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {link.access}"}, timeout=30)
    opened = agent.post("/v1/runs", json={"ttl": "7d"})
    assert opened.status_code == 201, opened.text
    run = opened.json()
    connection = next(t for t in tokens_of(served) if t["ai"] == "minting-host" and t["client"])
    assert run["expires_at"] <= connection["expires_at"]  # not seven days: the opener's hour
    run_client = httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {run['token']}"}, timeout=30)
    assert run_client.post("/v1/recall", json={"query": "login"}).status_code == 200
    _age(served, run["token_id"], timedelta(hours=2))  # the hour passes, for the run token as for its opener
    assert run_client.post("/v1/recall", json={"query": "login"}).status_code == 401
    assert _mcp_status(served, run["token"]) == 401
    mcp_bound = connect(served.url, served.tokens["operator"], ai="mcp-host")  # bound to /mcp's resource
    runs = httpx.post(
        f"{served.url}/v1/runs", json={}, headers={"Authorization": f"Bearer {mcp_bound.access}"}, timeout=30
    )
    assert runs.status_code in (401, 403)  # a /mcp-bound connection opens nothing on /v1


def test_a_strangers_client_name_reaches_the_terminal_inert(served):
    """A name chosen at registration with a carriage return, an ANSI escape and a bidi override:
    ``esfis token list`` prints it escaped, so no fake line or colour reaches the terminal."""
    hostile = "Evil\r\x1b[2Ktok_aaaaaaaaaaaa  operator  active \u202egnp.exe"
    client_id = register(served.url, name=hostile).json()["client_id"]
    verifier, challenge = pkce()
    started = authorize(served.url, client_id, challenge)
    back = consent(served.url, started.headers["location"], served.tokens["operator"], ai="named-host", space="acme")
    assert exchange(served.url, client_id, query_of(back)["code"], verifier).status_code == 200
    listed = served.cli("token", "list").stdout
    line = next(row for row in listed.splitlines() if "named-host" in row)
    assert "\r" not in listed and "\x1b" not in listed and "\u202e" not in listed
    assert "\\r\\x1b[2K" in line and "\\u202e" in line  # shown, as escapes


def _age(server: Server, token_id: str, by: timedelta) -> None:
    """Moves a token's expiry back, as time passing would (the server reads it at each request)."""
    from server.catalog import open_catalog
    from server.settings import Settings

    catalog = open_catalog(Settings(home=server.home, model=None, catalog=server.env.get("ESFIS_CATALOG")))
    try:
        with catalog.transaction() as tx:
            tx.execute(
                "UPDATE tokens SET expires_at = expires_at - ? WHERE id = ?", (int(by.total_seconds() * 1e6), token_id)
            )
    finally:
        catalog.close()


def test_an_operator_token_sent_to_mcp_gets_an_oauth_error(served):
    answer = httpx.post(
        f"{served.url}/mcp", json={}, headers={"Authorization": f"Bearer {served.tokens['operator']}"}, timeout=30
    )
    assert answer.status_code == 403
    assert answer.headers["WWW-Authenticate"].startswith('Bearer error="insufficient_scope"')


class _Documents(BaseHTTPRequestHandler):
    bodies: dict[str, bytes] = {}
    drips: dict[str, bytes] = {}  # sent a byte every half second, as a stranger's slow server would

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        drip = self.drips.get(self.path)
        body = self.bodies.get(self.path) if drip is None else drip
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        if drip is None:
            self.wfile.write(body or b"")
            return
        for byte in drip:
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:  # the reader gave up: what the test wants
                return
            time.sleep(0.5)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def documents():
    """Client ID Metadata Documents, served by the test on loopback."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Documents)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Documents.bodies
    finally:
        server.shutdown()


def test_a_client_id_metadata_document_identifies_a_client_without_registration(served, documents):
    base, bodies = documents
    client_id = f"{base}/good/client.json"
    bodies["/good/client.json"] = json.dumps(
        {"client_id": client_id, "client_name": "Document host", "redirect_uris": [CALLBACK]}
    ).encode()
    verifier, challenge = pkce()
    started = authorize(served.url, client_id, challenge)
    assert started.status_code == 302, started.text
    assert "Document host" in httpx.get(started.headers["location"]).text
    back = consent(served.url, started.headers["location"], served.tokens["operator"], ai="document-host", space="acme")
    issued = exchange(served.url, client_id, query_of(back)["code"], verifier)
    assert issued.status_code == 200, issued.text
    assert _mcp_status(served, issued.json()["access_token"]) == 200


def test_a_client_metadata_document_that_is_not_https_is_refused(served):
    _, challenge = pkce()
    answer = authorize(served.url, "http://clients.example.com/client.json", challenge)
    assert answer.status_code == 400 and oauth_error(answer) == "invalid_client"
    assert "https" in answer.json()["error_description"]


def test_a_client_metadata_document_that_is_too_large_is_refused(served, documents):
    base, bodies = documents
    client_id = f"{base}/large/client.json"
    bodies["/large/client.json"] = json.dumps(
        {"client_id": client_id, "redirect_uris": [CALLBACK], "client_name": "x" * 6000}
    ).encode()
    answer = authorize(served.url, client_id, pkce()[1])
    assert answer.status_code == 400 and "bytes" in answer.json()["error_description"]


def test_a_malformed_client_metadata_document_is_refused(served, documents):
    base, bodies = documents
    bodies["/broken/client.json"] = b'{"client_id": "not even closed'
    answer = authorize(served.url, f"{base}/broken/client.json", pkce()[1])
    assert answer.status_code == 400 and "not JSON" in answer.json()["error_description"]
    bodies["/liar/client.json"] = json.dumps(
        {"client_id": "https://else.example/c.json", "redirect_uris": [CALLBACK]}
    ).encode()
    lying = authorize(served.url, f"{base}/liar/client.json", pkce()[1])
    assert lying.status_code == 400 and "its own URL" in lying.json()["error_description"]


def test_a_client_metadata_document_sent_a_byte_at_a_time_is_cut_off_at_the_deadline(served, documents):
    """Each read of the drip arrives well within httpx's per-read timeout: only a deadline on the
    whole fetch ends it (without one, this document took about 55 s and was accepted)."""
    base, _ = documents
    client_id = f"{base}/drip/client.json"
    _Documents.drips["/drip/client.json"] = json.dumps({"client_id": client_id, "redirect_uris": [CALLBACK]}).encode()
    answer = authorize(served.url, client_id, pkce()[1])
    assert answer.status_code == 400, answer.text
    assert "within 5 s" in answer.json()["error_description"]


@pytest.mark.parametrize(
    "address, is_public",
    [
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("::ffff:8.8.8.8", True),  # IPv4-mapped: judged as the IPv4 address it is
        ("10.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("64:ff9b::a00:1", False),  # NAT64 of 10.0.0.1
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 of 169.254.169.254, the cloud metadata address
        ("64:ff9b:1::7f00:1", False),  # local-use NAT64 of 127.0.0.1
        ("64:ff9b::808:808", True),  # NAT64 of 8.8.8.8
        ("2002:a00:1::", False),  # 6to4 of 10.0.0.1
        ("2002:c0a8:101::1", False),  # 6to4 of 192.168.1.1
        ("2002:808:808::1", True),  # 6to4 of 8.8.8.8
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", False),  # Teredo, client 10.0.0.1
        ("::a00:1", False),  # IPv4-compatible 10.0.0.1
        ("::7f00:1", False),  # IPv4-compatible 127.0.0.1
        ("::1", False),
        ("fe80::1", False),
        ("ff02::1", False),
    ],
)
def test_the_public_address_check_judges_the_ipv4_address_inside_an_ipv6_one(address, is_public):
    assert public(address) is is_public


@pytest.mark.anyio
async def test_a_document_is_read_from_the_address_that_was_checked_not_from_a_second_look_up(documents, monkeypatch):
    """DNS rebinding: the name resolves to a checked address, then to another. The fetch must go
    to the first (here the document server on 127.0.0.1); a second look-up would send it to
    127.0.0.2, where nothing listens."""
    base, bodies = documents
    port = int(base.rsplit(":", 1)[1])
    url = f"http://localhost:{port}/pinned/client.json"
    bodies["/pinned/client.json"] = json.dumps({"client_id": url, "redirect_uris": [CALLBACK]}).encode()
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1"])

    def rebinding(host, *args, **kwargs):
        if host in ("localhost", b"localhost"):  # httpcore asks with bytes
            return real(next(answers, "127.0.0.2"), *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    document = await read_document(url, OAuthSite(f"http://127.0.0.1:{port}"))
    assert document["client_id"] == url and next(answers, None) is None


def test_oauth_off_leaves_only_static_tokens(tmp_path):
    server = start_server(tmp_path / "home", tmp_path, ESFIS_OAUTH="off")
    try:
        assert httpx.get(f"{server.url}/.well-known/oauth-authorization-server").status_code == 404
        assert httpx.get(f"{server.url}/authorize").status_code == 404
        answer = httpx.post(f"{server.url}/mcp", json={})
        assert answer.status_code == 401 and answer.headers["WWW-Authenticate"] == "Bearer"
        token = server.token("--ai", "claude-code")
        assert _mcp_status(server, token) == 200
        assert "OAuth is off (ESFIS_OAUTH=off" in server.log.read_text()
    finally:
        stop_server(server)


def test_the_paths_mounted_before_the_sdk_loads_are_the_ones_its_handlers_answer():
    """``mount_oauth`` routes each OAuth path to its handler, built at the first OAuth request
    (``server.http.oauth.routes``): a path or method the one lists and the other does not would
    answer 404 or 405 where a client expects OAuth."""
    from server.http.oauth import PATHS
    from server.http.oauth.routes import routes

    site = site_for(enabled=True, public_url=None, host="127.0.0.1", port=8765)
    built = {(route.path, frozenset(route.methods or ()) - {"HEAD"}) for route in routes(lambda: None, site)}  # type: ignore[arg-type, return-value]
    assert built == {(path, frozenset(methods)) for path, methods in PATHS}
