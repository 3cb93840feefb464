"""Settings › Memories at size (issue 59): one space of 1M memories in full mode (20k in quick),
then a real ``esfis serve``, and a page of 50 read newest first, signed in as the operator.

Figures: the HTML page (the first page, and pages far down the space by following ``Older →``'s
cursor) and ``GET /v1/memories`` the same way; p50/p95 of each, measured at the client on
loopback (so the server's time plus one local round trip: an upper bound of what the server
spends). Target: a page of 50 in a space of 1,000,000 renders in ≤ 200 ms on the server
(p95). Asserted here: each page holds 50 memories of the space and no page repeats a memory.
"""

from __future__ import annotations

import json
import re
import time

import httpx
import numpy as np

from benchmarks.arms import ScopeFirst
from benchmarks.conftest import FULL, RATES
from benchmarks.synthetic import Store, _memories, _unit
from indexing.embedding.embedder import load_embedder
from tests.http.conftest import start_server, stop_server

SIZE = 1_000_000 if FULL else 20_000
PAGES = 40 if FULL else 10  # pages followed down the space, each timed
SPACE = "big"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
LINK = re.compile(r'href="/settings/[a-z2-7]+/memories/(mem_[a-z0-9]+)"')
OLDER = re.compile(r'cursor=([0-9.%A-Za-z]+)" rel="next"')


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50_ms": float(np.percentile(values, 50)) * 1e3, "p95_ms": float(np.percentile(values, 95)) * 1e3}


def _signed_in(server, token: str) -> tuple[httpx.Client, str]:
    """A client with an operator session (the sign-in form, as a browser sends it) and the pages' root."""
    root = re.search(r"esfis: settings page: https?://[^/]+(\S+)", server.log.read_text()).group(1)
    client = httpx.Client(base_url=server.url, timeout=60.0)
    form = client.get(root + "sign-in")
    answer = client.post(root + "sign-in", data={"csrf": CSRF.search(form.text).group(1), "token": token, "next": ""})
    assert answer.status_code == 303, answer.text
    return client, root


def test_a_page_of_fifty_in_a_space_of_a_million(benchmark, tmp_path):
    rng = np.random.default_rng(59)
    vectors = _memories(rng, _unit(rng.normal(size=(256, 384))), SIZE)
    store = Store(vectors, np.zeros(SIZE, dtype=np.int32), np.zeros(SIZE, dtype=bool), [SPACE], {"all": [0]})
    home = tmp_path / "home"
    ScopeFirst(store, home=home, embedder=load_embedder(None)).service.close()
    server = start_server(home, tmp_path, **RATES)
    try:
        token = server.token("--operator")
        web, root = _signed_in(server, token)
        api = server.client(token)
        html_first, html_deep, api_first, api_deep, seen = [], [], [], [], []
        for _ in range(5):  # warm: the partition opened, the templates compiled
            web.get(root + f"memories?space={SPACE}").raise_for_status()
        for _ in range(20):
            started = time.perf_counter()
            web.get(root + f"memories?space={SPACE}").raise_for_status()
            html_first.append(time.perf_counter() - started)
            started = time.perf_counter()
            api.get("/v1/memories", params={"space": SPACE}).raise_for_status()
            api_first.append(time.perf_counter() - started)
        cursor = ""
        for _ in range(PAGES):
            started = time.perf_counter()
            answer = web.get(root + f"memories?space={SPACE}" + (f"&cursor={cursor}" if cursor else ""))
            html_deep.append(time.perf_counter() - started)
            ids = LINK.findall(answer.text)
            assert len(ids) == 50, answer.text[-2000:]
            seen += ids
            cursor = OLDER.search(answer.text).group(1)
        api_cursor = None
        for _ in range(PAGES):
            started = time.perf_counter()
            answer = api.get("/v1/memories", params={"space": SPACE, **({"cursor": api_cursor} if api_cursor else {})})
            api_deep.append(time.perf_counter() - started)
            api_cursor = answer.json()["next_cursor"]
        benchmark.pedantic(lambda: web.get(root + f"memories?space={SPACE}&cursor={cursor}"), rounds=20, iterations=1)
        web.close()
        api.close()
    finally:
        stop_server(server)
    stats = {
        "rows": SIZE,
        "page": 50,
        "html_first": _ms(html_first),
        "html_deep": _ms(html_deep),
        "api_first": _ms(api_first),
        "api_deep": _ms(api_deep),
        "pages_followed": PAGES,
    }
    benchmark.extra_info.update(stats)
    print(json.dumps(stats, indent=1))
    assert len(seen) == len(set(seen)) == 50 * PAGES  # each page new memories, none repeated
