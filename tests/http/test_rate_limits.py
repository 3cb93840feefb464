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


def _from(server: Server, source: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One ``POST /v1/recall`` with a bad token on a new connection from ``source``."""
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(server.url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10, source_address=(source, 0))
    try:
        sent = {"Authorization": f"Bearer esfis_{0:043d}", "Content-Type": "application/json", **(headers or {})}
        connection.request("POST", "/v1/recall", body='{"query": "x"}', headers=sent)
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


def test_a_peer_past_its_address_limit_is_refused_as_it_connects_a_proxy_never(strangers):
    """Once a worker saw an address spend its window, a new connection from that peer is answered
    429 (Retry-After, the error shape, closed) before its request is parsed: the log's summed line
    names no route but the connection. A trusted proxy (the loopback) forwarding that address is
    refused by the gate instead, and forwarding another address it is served."""
    import json
    import socket
    import time
    from concurrent.futures import ThreadPoolExecutor
    from urllib.parse import urlsplit

    from server.http.early_refusal import HOLD_S

    statuses = [_from(strangers, "127.0.0.3")[0] for _ in range(11)]
    assert statuses == [401] * 10 + [429]  # the gate counted the address and saw it spent
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:  # held together, not one after another
        refused = list(pool.map(lambda _: _from(strangers, "127.0.0.3"), range(8)))
    held = time.monotonic() - started
    assert HOLD_S <= held < 8 * HOLD_S, held  # each answer held (a tarpit), all at once
    status, headers, body = refused[0]
    assert {answer[0] for answer in refused} == {429}
    assert status == 429 and headers["connection"] == "close" and 1 <= int(headers["retry-after"]) <= 60
    assert json.loads(body)["error"]["code"] == "too_many_requests"
    with socket.create_connection(  # an HTTP/1.0 tool that closes its side once it has asked
        (urlsplit(strangers.url).hostname, urlsplit(strangers.url).port), timeout=10, source_address=("127.0.0.3", 0)
    ) as raw:
        raw.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        raw.shutdown(socket.SHUT_WR)
        assert raw.makefile("rb").readline().startswith(b"HTTP/1.1 429")
    assert _from(strangers, "127.0.0.1", {"X-Forwarded-For": "127.0.0.3"})[0] == 429  # by the gate
    assert _from(strangers, "127.0.0.1", {"X-Forwarded-For": "198.51.100.7"})[0] == 401  # served
    time.sleep(1.5)  # the summed lines are written a second after their first refusal
    log = strangers.log.read_text()
    assert re.search(r"- \(connection\) 429 ×[1-8] in [0-9.]+s", log), log[-2000:]


@pytest.fixture(scope="module")
def persistent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("persistent")
    server = start_server(root / "esfis-home", root / "work", ESFIS_RATE_TOKEN="3/minute", ESFIS_RATE_ADDRESS="off")
    try:
        yield server
    finally:
        stop_server(server)


def test_an_address_that_keeps_sending_past_its_tokens_limit_is_cut_off_as_it_connects(persistent):
    """A token past its limit is refused from memory, never counted against its address again; an
    address that keeps sending anyway is cut off after ``CUTOFF_REFUSALS`` 429s: its next
    connections are answered 429 as they open. Another address is served meanwhile."""
    import json

    from server.http.early_refusal import CUTOFF_REFUSALS

    secret = persistent.agent_token()
    statuses = [_from(persistent, "127.0.0.4", {"Authorization": f"Bearer {secret}"})[0] for _ in range(3)]
    statuses += [
        _from(persistent, "127.0.0.4", {"Authorization": f"Bearer {secret}"})[0] for _ in range(CUTOFF_REFUSALS)
    ]
    assert statuses == [200] * 3 + [429] * CUTOFF_REFUSALS  # every one refused by the gate
    status, headers, body = _from(persistent, "127.0.0.4", {"Authorization": f"Bearer {secret}"})
    assert status == 429 and headers["connection"] == "close"
    assert "kept sending past its limits" in json.loads(body)["error"]["message"]
    assert _from(persistent, "127.0.0.5", {"Authorization": f"Bearer {persistent.agent_token()}"})[0] == 200


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
    from server.http.bodies import asks_to_forget

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


def test_a_refusal_closes_its_connection_so_a_flood_pays_a_new_one_each_time(two):
    """Past its limit, each 429 says ``Connection: close`` and the server closes the connection:
    a caller that keeps sending pays a new connection a request, not one kept alive."""
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(two.url)
    secret = two.agent_token()
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    statuses = []
    try:
        for _ in range(8):
            connection.request("POST", "/v1/recall", body='{"query": "anything"}', headers=headers)
            answer = connection.getresponse()
            answer.read()
            statuses.append(answer.status)
            if answer.status == 429:
                assert answer.getheader("Connection") == "close"
                assert connection.sock is None  # closed after the answer; the next request reconnects
            else:
                assert connection.sock is not None  # below the limit, kept alive
    finally:
        connection.close()
    assert statuses == [200] * 6 + [429] * 2


def test_a_flood_of_refusals_is_logged_as_one_line_a_second_not_a_line_each(two):
    """A token past its limit sends 40 more: the access log writes no line per refusal, but one
    line a second per route and worker whose counts add up to every 429 answered (a line each
    cost a third of what refusing does, and filled the disk at the flood's rate)."""
    import time

    hammer = two.client(two.agent_token())
    answers = [hammer.post("/v1/recall", json={"query": "anything"}).status_code for _ in range(46)]
    refused = answers.count(429)
    assert answers[:6] == [200] * 6 and refused == 40
    time.sleep(1.5)  # each worker writes its sum a second after its first refusal
    lines = [line for line in two.log.read_text().splitlines() if " 429 " in line]
    assert not [line for line in lines if re.search(r" 429 [0-9.]+ms$", line)]  # none logged one by one
    summed = [re.search(r" 429 ×([0-9,]+) in [0-9.]+s$", line) for line in lines]
    assert all(summed), lines
    assert sum(int(m.group(1).replace(",", "")) for m in summed if m) >= refused  # earlier tests' too


# -- in one worker, in process: the gate over a real service (both catalogs) -------------------


class _Watched:
    """The service as the gate sees it, counting the token lookups (each one a thread hop)."""

    def __init__(self, service) -> None:
        self.service = service
        self.lookups = 0

    def authenticate(self, authorization):
        self.lookups += 1
        return self.service.authenticate(authorization)


def _call(gate, secret: str, address: str) -> tuple[int, dict[bytes, bytes], int]:
    """One ``POST /v1/recall`` through the gate: its status, its headers, the body reads it made."""
    import anyio

    sent: list[dict] = []
    reads = 0

    async def receive() -> dict:
        nonlocal reads
        reads += 1
        return {"type": "http.request", "body": b'{"query": "x"}', "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/recall",
        "query_string": b"",
        "headers": [(b"authorization", f"Bearer {secret}".encode()), (b"content-type", b"application/json")],
        "client": (address, 40000),
    }
    anyio.run(gate, scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], dict(start["headers"]), reads


def test_a_spent_window_is_refused_on_the_loop_before_any_thread_hop_or_body_read(fake_service, clock):
    """A token, or an address, this worker saw spend its window is refused on the event loop:
    no thread hop, no token lookup, no body read (``benchmarks/test_hostile_neighbour.py``: a
    hammering token held threads a good token's recall waited behind), with ``Retry-After``
    still the window's end, and no secret kept; another token, from elsewhere, is served."""
    from datetime import UTC, datetime

    from starlette.responses import PlainTextResponse

    from server.http.auth import Gate
    from server.http.rate_limits import Limiter, RateLimits

    clock.now = datetime.now(UTC)  # the limiter's windows end on the wall clock
    op = fake_service.operator
    _, hammering = op.create_token(ai="claude-code")
    _, quiet = op.create_token(ai="cursor")
    limiter = Limiter(
        lambda: fake_service, RateLimits.from_env({"ESFIS_RATE_TOKEN": "2/minute", "ESFIS_RATE_ADDRESS": "4/minute"})
    )
    watched = _Watched(fake_service)
    gate = Gate(PlainTextResponse("served"), lambda: watched, limiter=lambda: limiter)
    hops: list[str] = []
    in_threads = gate._in_threads

    async def counted_hop(call):
        hops.append("hop")
        return await in_threads(call)

    gate._in_threads = counted_hop

    assert [_call(gate, hammering, "10.0.0.1")[0] for _ in range(3)] == [200, 200, 429]  # spent, in the catalog
    before = (len(hops), watched.lookups)
    status, headers, reads = _call(gate, hammering, "10.0.0.2")  # the token, from anywhere
    assert (status, reads) == (429, 0) and (len(hops), watched.lookups) == before
    assert 55 <= int(headers[b"retry-after"]) <= 60
    assert hammering not in repr(gate._spent_bearers) and hammering.split("_", 1)[1] not in repr(limiter._spent)
    assert _call(gate, quiet, "10.0.0.3")[0] == 200  # another token: looked up and served

    assert [_call(gate, f"esfis_{i:043d}", "10.0.0.4")[0] for i in range(5)] == [401] * 4 + [429]  # address spent
    before = (len(hops), watched.lookups)
    status, headers, reads = _call(gate, quiet, "10.0.0.4")  # a good token from that address waits too
    assert (status, reads) == (429, 0) and (len(hops), watched.lookups) == before
    assert 55 <= int(headers[b"retry-after"]) <= 60


def test_with_the_counters_full_a_new_address_is_limited_in_its_limits_overflow_key(fake_service, clock):
    """``server.spaces.rates.MAX_ROWS``: with the table full, addresses that have no counter yet
    share their limit's overflow count (its window's end in ``Retry-After``); an address with
    its counter, and a token, keep their own."""
    from datetime import UTC, datetime

    from server.errors import TooManyRequests
    from server.http.rate_limits import Limiter, RateLimits

    clock.now = datetime.now(UTC)
    limiter = Limiter(lambda: fake_service, RateLimits.from_env({"ESFIS_RATE_ADDRESS": "2/minute"}))
    limiter.hit("address", "10.0.0.1")
    fake_service._parts.rates.max_rows = 1  # full from here on
    limiter.hit("address", "10.0.0.2")
    limiter.hit("address", "10.0.0.3")  # two newcomers: the overflow's two
    with pytest.raises(TooManyRequests) as refused:
        limiter.hit("address", "10.0.0.4")
    assert 55 <= refused.value.retry_after <= 60
    limiter.hit("address", "10.0.0.1")  # its own count: its second
    limiter.hit_all([("token", "tok_aaaaaaaaaaaa")])  # never capped
    keys = {r["key"] for r in fake_service._parts.rates.catalog.all("SELECT key FROM rate_counters")}
    assert not any("10.0.0.2" in k or "10.0.0.3" in k or "10.0.0.4" in k for k in keys)
    assert any("(overflow)" in k for k in keys) and any("tok_aaaaaaaaaaaa" in k for k in keys)


def test_workers_claim_hits_in_leases_and_together_never_pass_the_limit(fake_service, clock):
    """``server.http.rate_limits.lease``: a worker counts a lease of hits in one catalog write and
    spends it with no write; two workers sharing a token's limit pass at most the limit between
    them, and are refused at most a lease each early; a newcomer in the overflow key claims one."""
    from datetime import UTC, datetime

    from server.errors import TooManyRequests
    from server.http.rate_limits import Limiter, RateLimits

    clock.now = datetime.now(UTC)
    limits = RateLimits.from_env({"ESFIS_RATE_TOKEN": "1280/minute"})  # a lease of 16
    workers = [Limiter(lambda: fake_service, limits), Limiter(lambda: fake_service, limits)]
    writes = 0
    hit_many = fake_service._parts.rates.hit_many

    def counting(hits):
        nonlocal writes
        writes += 1
        return hit_many(hits)

    fake_service._parts.rates.hit_many = counting
    passed = 0
    for i in range(1400):
        try:
            workers[i % 2].hit("token", "tok_leased")
            passed += 1
        except TooManyRequests:
            pass
    assert 1280 - 2 * 15 <= passed <= 1280
    assert writes <= 1280 // 16 + 4  # a lease a write; past the limit, refused from memory
    counted = fake_service._parts.rates.catalog.one("SELECT count FROM rate_counters WHERE key LIKE '%tok_leased%'")
    assert counted["count"] >= passed  # what passed was counted first, never after


def test_a_small_limit_is_counted_hit_by_hit(fake_service, clock):
    from datetime import UTC, datetime

    from server.errors import TooManyRequests
    from server.http.rate_limits import Limiter, RateLimits, lease

    clock.now = datetime.now(UTC)
    limits = RateLimits.from_env({"ESFIS_RATE_TOKEN": "127/minute"})
    assert lease(limits.token) == 1
    workers = [Limiter(lambda: fake_service, limits), Limiter(lambda: fake_service, limits)]
    for i in range(127):
        workers[i % 2].hit("token", "tok_exact")
    for worker in workers:
        with pytest.raises(TooManyRequests):
            worker.hit("token", "tok_exact")


def test_a_worker_full_of_leases_counts_hit_by_hit(fake_service, clock, monkeypatch):
    """A flood of callers fills a worker's memory of leases (``SPENT_KEPT``): past it, a newcomer is
    counted hit by hit, so no claim is made that the worker could not keep."""
    from datetime import UTC, datetime

    from server.http import rate_limits
    from server.http.rate_limits import Limiter, RateLimits

    clock.now = datetime.now(UTC)
    monkeypatch.setattr(rate_limits, "SPENT_KEPT", 3)
    worker = Limiter(lambda: fake_service, RateLimits.from_env({"ESFIS_RATE_TOKEN": "1280/minute"}))
    for i in range(5):
        worker.hit("token", f"tok_flood{i}")
    assert len(worker._credit) == 3
    counts = {
        r["key"]: r["count"]
        for r in fake_service._parts.rates.catalog.all("SELECT key, count FROM rate_counters WHERE key LIKE '%flood%'")
    }
    assert sorted(counts.values()) == [1, 1, 16, 16, 16], counts
