"""A hostile agent, a process of its own (``benchmarks/test_hostile_neighbour.py``): one real
agent token that does, as fast as its limits allow, what issue 60's review did to a server.

Run as ``python -m benchmarks.hostile_client URL TOKEN SPACE SOURCE_ADDRESS THREADS``. It says
``ready``, then each of ``THREADS`` threads (one keep-alive connection each, from
``SOURCE_ADDRESS``, so its address limit is its own) goes round four calls until stdin closes:
``GET /mcp`` asking for an event stream (answered 405: ``/mcp`` keeps no stream), a run token
opened (``POST /v1/runs``), a recall of its space and a personal write carrying it (the first is
held for the operator, the rest refused while it waits), and a malformed body (cut JSON on
``/v1/recall``, 3,000 nested arrays in an MCP tool argument). It answers one JSON line: the
statuses it got, by call, and ``first_429_at``: when (``time.monotonic()``, one clock for every
process of the machine) it was first refused, the moment its allowance was spent and it stood at
its limits (None if never).
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from collections import Counter
from urllib.parse import urlsplit

NESTED = "[" * 3000 + "]" * 3000
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _calls(space: str) -> list[tuple[str, str, str, str | None, dict[str, str]]]:
    """(name, method, path, body, extra headers), in the order each thread goes round them."""
    deep = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "recall", "arguments": {"query": '
        + NESTED
        + "}}}"
    )
    json_body = {"Content-Type": "application/json"}
    return [
        ("stream", "GET", "/mcp", None, {"Accept": "text/event-stream"}),
        ("run", "POST", "/v1/runs", "{}", json_body),
        ("read", "POST", "/v1/recall", json.dumps({"query": "deploys", "space": space}), json_body),
        ("hold", "POST", "/v1/memories", json.dumps({"text": "what the space said", "personal": True}), json_body),
        ("cut", "POST", "/v1/recall", '{"query": "deploys', json_body),
        ("nested", "POST", "/mcp", deep, MCP_HEADERS),
    ]


FIRST_429: list[float] = []  # when any thread was first refused


def hammer(url: str, token: str, space: str, source: str, stop: threading.Event, seen: Counter) -> None:
    parts = urlsplit(url)
    calls = _calls(space)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, source_address=(source, 0))
    while not stop.is_set():
        for name, method, path, body, extra in calls:
            try:
                connection.request(method, path, body=body, headers={"Authorization": f"Bearer {token}", **extra})
                answer = connection.getresponse()
                answer.read()
                seen[f"{name} {answer.status}"] += 1
                if answer.status == 429 and not FIRST_429:
                    FIRST_429.append(time.monotonic())
            except (OSError, http.client.HTTPException):
                seen[f"{name} dropped"] += 1
                connection.close()
                connection = http.client.HTTPConnection(
                    parts.hostname or "127.0.0.1", parts.port, source_address=(source, 0)
                )
    connection.close()


def main(argv: list[str]) -> None:
    url, token, space, source, threads = argv[0], argv[1], argv[2], argv[3], int(argv[4])
    stop = threading.Event()
    counts = [Counter() for _ in range(threads)]
    workers = [
        threading.Thread(target=hammer, args=(url, token, space, source, stop, counts[i]), daemon=True)
        for i in range(threads)
    ]
    print("ready", flush=True)
    for worker in workers:
        worker.start()
    sys.stdin.read()  # until the benchmark closes it
    stop.set()
    for worker in workers:
        worker.join(timeout=30)
    total: Counter = Counter()
    for seen in counts:
        total.update(seen)
    print(json.dumps({"answers": dict(total), "first_429_at": min(FIRST_429, default=None)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
