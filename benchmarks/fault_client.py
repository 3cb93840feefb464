"""One client of the fault drill (``benchmarks/test_fault_drill.py``), a process of its own: an
agent on one space, on one keep-alive connection, mixing remembers and recalls until told to stop.

Run as ``python -m benchmarks.fault_client COMMAND_JSON``: ``{"url", "token", "space", "seed",
"write_share", "text_bytes", "events"}``. It prints ``ready``, then sends requests one after the
other, without pause and without honouring ``Retry-After`` (a steady load: the drill measures the
server, not a client's patience), until a line or the end of its stdin, and then answers one JSON
line of counts. Every request is appended to ``events`` as it is answered, one JSON list a line,
flushed at once, so the drill reads the load as it goes and keeps it if this process dies:
``[began, answered, op, status, code, retry_after, id, text]``: wall-clock seconds (the drill's
own clock marks the faults), ``remember`` or ``recall``, the HTTP status (0: no answer, the
connection failed; ``code`` then names the exception), the error's code, the ``Retry-After``
header, and for an acknowledged remember (any 2xx) its id and text, to be read back after the drill.
"""

from __future__ import annotations

import http.client
import json
import random
import sys
import threading
import time
from urllib.parse import urlsplit

from benchmarks.load_client import TOPICS

TIMEOUT_S = 120.0  # an answer held by a stopped object store still comes back within this
WORDS = ["pipeline", "runner", "cache", "deploy", "region", "shard", "build", "artifact", "queue", "ledger"]


def fact(rng: random.Random, seed: int, n: int, topic: str, size: int) -> str:
    """A distinct fact of about ``size`` bytes: no two alike, so none is answered as a duplicate."""
    words = [f"client {seed} fact {n}: acme changed how {topic} work"]
    while sum(len(w) + 1 for w in words) < size:
        words.append(f"{rng.choice(WORDS)}{rng.randrange(10**6)}")
    return " ".join(words)


def run(command: dict, stop: threading.Event) -> dict:
    parts = urlsplit(command["url"])
    space, seed = command["space"], command["seed"]
    rng = random.Random(seed)
    headers = {"Authorization": f"Bearer {command['token']}", "Content-Type": "application/json"}
    counts = {"requests": 0, "acknowledged": 0, "no_answer": 0}

    def connect() -> http.client.HTTPConnection:
        return http.client.HTTPConnection(parts.hostname, parts.port, timeout=TIMEOUT_S)

    conn = connect()
    n = 0
    with open(command["events"], "a", encoding="utf-8") as events:
        while not stop.is_set():
            n += 1
            topic = rng.choice(TOPICS)
            writing = rng.random() < command["write_share"]
            if writing:
                text = fact(rng, seed, n, topic, command["text_bytes"])
                op, path, body = "remember", "/v1/memories", {"text": text, "space": space}
            else:
                text = None
                op, path, body = "recall", "/v1/recall", {"query": f"how do {topic} work here?", "space": space}
            began = time.time()
            try:
                conn.request("POST", path, body=json.dumps(body), headers=headers)
                answer = conn.getresponse()
                data = answer.read()
            except (OSError, http.client.HTTPException) as exc:  # no answer: the worker died, the port closed
                events.write(json.dumps([began, time.time(), op, 0, type(exc).__name__, None, None, None]) + "\n")
                events.flush()
                counts["requests"] += 1
                counts["no_answer"] += 1
                conn.close()
                conn = connect()
                time.sleep(0.05)  # a refused connection answers at once: no spinning on it
                continue
            answered = time.time()
            code = None
            if answer.status >= 400:
                try:
                    code = json.loads(data)["error"]["code"]
                except (ValueError, KeyError, TypeError):
                    code = "unparsed"
            ident = None
            if writing and 200 <= answer.status < 300:
                ident = json.loads(data)["id"]
                counts["acknowledged"] += 1
            retry_after = answer.getheader("Retry-After")
            line = [began, answered, op, answer.status, code, retry_after, ident, text if ident else None]
            events.write(json.dumps(line) + "\n")
            events.flush()
            counts["requests"] += 1
    conn.close()
    return counts


def main() -> None:
    command = json.loads(sys.argv[1])
    stop = threading.Event()

    def watch() -> None:
        sys.stdin.readline()  # a line, or the end of stdin: stop
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    print("ready", flush=True)
    counts = run(command, stop)
    try:
        print(json.dumps(counts), flush=True)
    except BrokenPipeError:  # the drill went away first: its answers are in the events file
        pass


if __name__ == "__main__":
    main()
