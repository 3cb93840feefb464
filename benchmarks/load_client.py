"""One load client, a process of its own: an agent on one project, on one keep-alive connection.

Run as ``python -m benchmarks.load_client URL``; it reads one JSON command a line on stdin,
``{"token", "space", "start_at", "seconds", "seed", "write_share"}``, waits until ``start_at``
(wall clock, so every client of a step starts together), then mixes recalls (the query embedded
by the server) and remembers until ``seconds`` have passed, and answers one JSON line: its
latencies, errors, answers from another space, empty answers, and what it wrote. The standard
library's HTTP client keeps the client's own CPU small: it shares the machine with the server.
"""

from __future__ import annotations

import http.client
import json
import random
import sys
import time
from urllib.parse import urlsplit

TOPICS = [
    "deploys",
    "login",
    "billing retries",
    "the on-call rotation",
    "database backups",
    "feature flags",
    "the build cache",
    "rate limits",
    "the staging cluster",
    "error budgets",
]
MAX_ERRORS_KEPT = 20


def run_step(url: str, command: dict) -> dict:
    parts = urlsplit(url)
    token, space = command["token"], command["space"]
    rng = random.Random(command["seed"])
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    out: dict = {"recall_s": [], "write_s": [], "errors": [], "error_count": 0, "outside": 0, "empty": 0, "written": []}
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)

    def error(text: str) -> None:
        out["error_count"] += 1
        if len(out["errors"]) < MAX_ERRORS_KEPT:
            out["errors"].append(text[:200])

    time.sleep(max(0.0, command["start_at"] - time.time()))
    deadline = time.monotonic() + command["seconds"]
    n = 0
    while time.monotonic() < deadline:
        n += 1
        topic = rng.choice(TOPICS)
        writing = rng.random() < command["write_share"]
        if writing:
            text = f"load client {command['seed']} note {n}: {space} changed how {topic} work"
            path, body = "/v1/memories", {"text": text, "space": space}
        else:
            path, body = "/v1/recall", {"query": f"how do {topic} work here?", "space": space}
        began = time.perf_counter()
        try:
            conn.request("POST", path, body=json.dumps(body), headers=headers)
            answer = conn.getresponse()
            data = answer.read()
        except (OSError, http.client.HTTPException) as exc:  # a transport error is an error too
            error(f"{path} {type(exc).__name__}: {exc}")
            conn.close()
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
            continue
        elapsed = time.perf_counter() - began
        if writing:
            out["write_s"].append(elapsed)
            if answer.status != 201:
                error(f"remember {answer.status} {data[:200]!r}")
            else:
                out["written"].append((space, json.loads(data)["id"], text))
        else:
            out["recall_s"].append(elapsed)
            if answer.status != 200:
                error(f"recall {answer.status} {data[:200]!r}")
                continue
            memories = json.loads(data)["memories"]
            out["outside"] += sum(1 for m in memories if m["space"] != space)
            out["empty"] += not memories
    conn.close()
    return out


def main() -> None:
    url = sys.argv[1]
    print("ready", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        print(json.dumps(run_step(url, json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
