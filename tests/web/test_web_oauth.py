"""A host connects to esfis from its URL alone, with the MCP Python SDK's own OAuth client
(``mcp.client.auth.OAuthClientProvider``), and the operator consents on the real page in a real
Chromium: discovery, dynamic registration, PKCE, the operator's sign-in and choice, the code,
then ``tools/list`` and a recall that brings Auth0 for the acme connection and never Clerk."""

from __future__ import annotations

import json
import queue
import threading
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

from tests.http.conftest import free_port
from tests.web.web_support import DESKTOP, at, save_shot, signed_in

AUTH0 = "Acme authentication uses Auth0"
CLERK = "Globex authentication uses Clerk"


class Storage:
    """What a host keeps between runs: its registration and its tokens (here, in memory)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def host(url: str, callback: str, asks: queue.Queue, answers: queue.Queue, storage: Storage) -> dict[str, Any]:
    """The host, in a thread of its own: it asks for the browser (the test's main thread, where
    Playwright lives) through ``asks`` and waits for the redirect on ``answers``."""

    async def open_browser(authorization_url: str) -> None:
        asks.put(authorization_url)

    async def wait_for_callback() -> AuthorizationCodeResult:
        back = await anyio.to_thread.run_sync(lambda: answers.get(timeout=120))
        query = {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    metadata = OAuthClientMetadata(
        client_name="Python host",
        redirect_uris=[AnyUrl(callback)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )

    async def run() -> dict[str, Any]:
        auth = OAuthClientProvider(f"{url}/mcp", metadata, storage, open_browser, wait_for_callback)
        async with (
            httpx2.AsyncClient(auth=auth, timeout=60) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
        ):
            tools = [t.name for t in (await client.list_tools()).tools]
            recalled = await client.call_tool("recall", {"query": "how does login work? authentication provider"})
            assert recalled.structured_content is not None
            return {"tools": tools, "texts": [m["text"] for m in recalled.structured_content["memories"]]}

    return anyio.run(run)


@pytest.fixture(scope="module")
def spaces(web):
    for name in ("acme", "globex"):
        web.cli("space", "add", str(web.work / name))
    web.cli("remember", AUTH0, "--space", "acme")
    web.cli("remember", CLERK, "--space", "globex")
    return web


def test_the_python_sdk_connects_after_the_operator_consents_in_a_browser(spaces, browser, screenshots):
    web = spaces
    callback = f"http://127.0.0.1:{free_port()}/callback"
    asks: queue.Queue = queue.Queue()
    answers: queue.Queue = queue.Queue()
    storage = Storage()
    outcome: dict[str, Any] = {}

    def in_thread() -> None:
        try:
            outcome["result"] = host(web.url, callback, asks, answers, storage)
        except BaseException as exc:  # reported by the main thread
            outcome["error"] = exc
            asks.put(None)

    thread = threading.Thread(target=in_thread, daemon=True)
    thread.start()
    authorization_url = asks.get(timeout=120)
    assert authorization_url is not None, outcome.get("error")
    assert authorization_url.startswith(f"{web.url}/authorize?")

    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    redirected: list[str] = []
    page.route(callback + "*", lambda route: (redirected.append(route.request.url), route.fulfill(body="done")))
    page.goto(authorization_url)
    assert "/oauth/connect/" in page.url and "Python host" in page.content()
    page.fill("#token", web.tokens["operator"])
    page.click("button[type=submit]")
    page.wait_for_selector("#cai")
    assert "/connections/" in page.url and "127.0.0.1" in page.inner_text("main")  # the redirect host, named
    save_shot(page, screenshots, "connect-desktop")
    page.fill("#cai", "claude-ai")
    page.select_option("#cspace", "acme")
    page.click("button[value=approve]")
    page.wait_for_url(callback + "*")
    context.close()
    assert redirected, "the browser was not sent back to the host"
    answers.put(redirected[0])
    thread.join(timeout=120)
    assert "error" not in outcome, outcome.get("error")

    result = outcome["result"]
    assert {"remember", "recall", "replace", "forget"} <= set(result["tools"])
    assert AUTH0 in result["texts"] and CLERK not in result["texts"]
    assert storage.tokens is not None and storage.tokens.refresh_token
    listed = json.loads(web.cli("token", "list", "--json").stdout)["tokens"]
    mine = [t for t in listed if t["client"] == "Python host" and t["revoked_at"] is None]
    assert [(t["ai"], t["space"], t["kind"]) for t in mine] == [("claude-ai", "acme", "agent")]
    page = signed_in(web, web.tokens["operator"])  # Settings › Tokens names the client
    try:
        tokens = page.get(at(web, "tokens")).text
        assert "connected by OAuth:</span> Python host" in tokens and mine[0]["id"] in tokens
    finally:
        page.close()
