"""Rate limits, counted in the catalog, so two workers count together: per token, per address,
run-token minting, the OAuth endpoints, and failed sign-ins; each answered 429 with
``Retry-After``. The limits are set low here (ESFIS_RATE_*) to meet them in a few requests."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing

import httpx
import pytest

from tests.http.conftest import Server, start_server, stop_server
from tests.http.oauth_support import register
from tests.http.test_workers import _workers, pinned

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("rates")
    server = start_server(
        root / "esfis-home",
        root / "work",
        workers=2,
        ESFIS_RATE_TOKEN="6/minute",
        ESFIS_RATE_RUNS="2/minute",
        ESFIS_RATE_ADDRESS="off",
    )
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture(scope="module")
def strangers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("strangers")
    (root / "work").mkdir()
    server = start_server(
        root / "esfis-home",
        root / "work",
        ESFIS_RATE_ADDRESS="10/minute",
        ESFIS_RATE_OAUTH="3/minute",
        ESFIS_RATE_SIGN_IN="3/15minutes",
    )
    try:
        server.tokens["operator"] = server.token("--operator")
        yield server
    finally:
        stop_server(server)


def _too_many(answer: httpx.Response) -> None:
    assert answer.status_code == 429, answer.text
    assert 1 <= int(answer.headers["Retry-After"]) <= 60


def test_a_tokens_limit_is_shared_by_both_workers(two):
    a, b = _workers(two)
    token, other = two.agent_token(), two.agent_token()
    with closing(pinned(two, a, token)) as first, closing(pinned(two, b, token)) as second:
        served = [c.post("/v1/recall", json={"query": "anything"}).status_code for c in (first, second) * 3]
        assert served == [200] * 6
        refused = second.post("/v1/recall", json={"query": "anything"})
        _too_many(refused)
        assert refused.json()["error"]["code"] == "too_many_requests"
        _too_many(first.post("/mcp", json={}))  # /mcp counts with /v1
    with closing(pinned(two, a, other)) as elsewhere:
        assert elsewhere.post("/v1/recall", json={"query": "anything"}).status_code == 200  # its own count


def test_opening_run_tokens_has_a_limit_of_its_own(two):
    opener = two.client(two.agent_token())
    assert [opener.post("/v1/runs", json={}).status_code for _ in range(2)] == [201, 201]
    _too_many(opener.post("/v1/runs", json={}))


def test_an_address_is_limited_whatever_the_tokens_it_sends(strangers):
    bad = [
        httpx.post(
            f"{strangers.url}/v1/recall", json={"query": "x"}, headers={"Authorization": f"Bearer esfis_{i:043d}"}
        )
        for i in range(10)
    ]
    assert [r.status_code for r in bad] == [401] * 10
    good = strangers.client(strangers.agent_token())
    _too_many(good.post("/v1/recall", json={"query": "x"}))  # the good token from that address waits too


def test_the_oauth_endpoints_are_limited_per_address_with_an_oauth_error(strangers):
    assert [register(strangers.url).status_code for _ in range(3)] == [201, 201, 201]
    refused = register(strangers.url)
    _too_many(refused)
    assert refused.json()["error"] == "temporarily_unavailable"


def test_failed_sign_ins_slow_every_sign_in_from_that_address(strangers):
    base = re.search(r"esfis: settings page: http://[^/]+(/settings/[a-z2-7]{26}/)", strangers.log.read_text()).group(1)
    with httpx.Client(base_url=strangers.url, follow_redirects=False, timeout=30) as browser:

        def attempt(token: str) -> httpx.Response:
            form = browser.get(base + "sign-in")
            return browser.post(
                base + "sign-in", data={"csrf": CSRF.search(form.text).group(1), "token": token, "next": ""}
            )

        assert [attempt("esfis_" + "x" * 43).status_code for _ in range(3)] == [401] * 3
        right = attempt(strangers.tokens["operator"])
        assert right.status_code == 429 and "too many failed sign-ins" in right.text


@pytest.fixture(scope="module")
def forgetful(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("forgets")
    (root / "work" / "acme").mkdir(parents=True)
    server = start_server(root / "esfis-home", root / "work", ESFIS_RATE_FORGETS="2/minute")
    try:
        server.cli("space", "add", str(root / "work" / "acme"))
        yield server
    finally:
        stop_server(server)


def _mcp_call(client: httpx.Client, tool: str, arguments: dict) -> httpx.Response:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    return client.post("/mcp", json=call, headers={"Accept": "application/json, text/event-stream"})


def test_forgets_have_a_limit_of_their_own_over_http_and_mcp(forgetful):
    """A forget reads the whole catalog (``Catalog.scrub``): a token's forgets are counted apart,
    through either door, and a refused one forgets nothing."""
    agent = forgetful.client(forgetful.agent_token(space="acme"))
    ids = [agent.post("/v1/memories", json={"text": f"fact {i}", "space": "acme"}).json()["id"] for i in range(4)]
    assert [agent.delete(f"/v1/memories/{i}", params={"space": "acme"}).status_code for i in ids[:2]] == [204, 204]
    refused = agent.delete(f"/v1/memories/{ids[2]}", params={"space": "acme"})
    _too_many(refused)
    assert "too many forgets" in refused.json()["error"]["message"]
    assert agent.get(f"/v1/memories/{ids[2]}", params={"space": "acme"}).status_code == 200  # still there
    _too_many(_mcp_call(agent, "forget", {"id": ids[3]}))  # MCP's forget counts with HTTP's
    assert _mcp_call(agent, "recall", {"query": "fact"}).status_code == 200  # other calls do not
    assert agent.post("/v1/recall", json={"query": "fact"}).status_code == 200
    other = forgetful.client(forgetful.agent_token(space="acme"))
    assert other.delete(f"/v1/memories/{ids[3]}", params={"space": "acme"}).status_code == 204  # its own count


@pytest.mark.parametrize(
    ("method", "path", "body", "forgets"),
    [
        ("DELETE", "/v1/memories/mem_x", b"", True),
        ("GET", "/v1/memories/mem_x", b"", False),
        ("POST", "/mcp", b'{"method": "tools/call", "params": {"name": "forget", "arguments": {"id": "x"}}}', True),
        (
            "POST",
            "/mcp",
            b'[{"method": "tools/call", "params": {"name": "recall"}}, '
            b'{"method": "tools/call", "params": {"name": "forget"}}]',
            True,
        ),  # a batch holding one
        (
            "POST",
            "/mcp",
            b'{"method": "tools/call", "params": {"name": "remember", '
            b'"arguments": {"text": "\\"forget\\" the old plan"}}}',
            False,
        ),  # the word in a text
        ("POST", "/mcp", b'{"method": "tools/call", "params": {"name": "forg\\u0065t"}}', True),  # escaped
        ("POST", "/mcp", b'{"method": "tools/call", "params": "forget"}', False),
        ("POST", "/mcp", b'{"forget": not json', False),
        ("POST", "/v1/recall", b'{"query": "\\"forget\\""}', False),
    ],
)
def test_what_counts_as_a_forget(method, path, body, forgets):
    from server.http.auth import asks_to_forget

    assert asks_to_forget(method, path, body) is forgets


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("scraped")
    (root / "work").mkdir()
    server = start_server(root / "esfis-home", root / "work", workers=2, ESFIS_RATE_ADDRESS="5/minute")
    try:
        yield server
    finally:
        stop_server(server)


def test_metrics_scrapes_with_bad_tokens_count_against_the_address(scraped):
    """``/metrics`` looks a token up as ``/v1`` does: a stranger's scrapes are counted per address
    (across both workers), and past the limit even the operator's token waits there."""
    bad = [httpx.get(f"{scraped.url}/metrics", headers={"Authorization": f"Bearer esfis_{i:043d}"}) for i in range(5)]
    assert [r.status_code for r in bad] == [401] * 5
    _too_many(httpx.get(f"{scraped.url}/metrics", headers={"Authorization": f"Bearer {scraped.token('--operator')}"}))
    assert httpx.get(f"{scraped.url}/healthz").status_code == 200  # no token, no catalog: not counted


def test_a_token_at_its_limit_hammering_costs_no_catalog_write_a_request(two):
    """Past its limit, a token's further requests in the window are refused by each worker from
    memory: the counter in the catalog stops at the limit plus one refusal a worker, however
    many requests follow (without the memory, it counted every one: a catalog write each)."""
    from server.catalog import open_catalog
    from server.settings import Settings
    from server.spaces.tokens import hash_token

    secret = two.agent_token()
    hammer = two.client(secret)
    answers = [hammer.post("/v1/recall", json={"query": "anything"}).status_code for _ in range(30)]
    assert answers[:6] == [200] * 6 and set(answers[6:]) == {429}
    catalog = open_catalog(Settings(home=two.home, model=None, catalog=two.env.get("ESFIS_CATALOG")))
    try:
        token_id = catalog.one("SELECT id FROM tokens WHERE hash = ?", (hash_token(secret),))["id"]
        counts = [int(r["count"]) for r in catalog.all("SELECT key, count FROM rate_counters") if token_id in r["key"]]
    finally:
        catalog.close()
    assert counts and max(counts) <= 6 + 2  # the limit, and the one refusal each of the two workers counted
