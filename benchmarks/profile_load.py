"""Where a loaded server's CPU goes: ``esfis serve`` under the load benchmark's 16 clients, sampled
by py-spy, each sample given to one stage (not part of the suite).

    python -m benchmarks.profile_load --out benchmarks/results/profile-load

The store, the clients and the mix are ``benchmarks/test_http_load.py``'s full mode (100k memories
over 1,000 spaces, 90 % recalls, 10 % writes, every query different), on the SQLite catalog and
the default workers. py-spy records every worker (``--subprocesses``, busy samples only) for
``--seconds``; a sample's stage is the first of ``STAGES`` with a pattern in its stack, so the
embedding's matrix work counts as the embedding, not as the request handler around it. Writes ``NAME.txt`` (py-spy's folded stacks) and
``NAME.json`` (the load's figures and each stage's share of the samples).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

# (stage, patterns), in priority: a sample belongs to the first stage with a pattern in any of
# its frames, so the callers come before what they call (rate limits before the catalog they count in).
STAGES = (
    ("query and text embedding (ONNX)", ("onnxruntime", "indexing/embedding/")),
    ("delivery log and run steps", ("server/deliveries", "server/barrier/runs", "access_log")),
    ("rate limits", ("rate_limits", "/limits/")),
    ("partitions and relevance (search, writes, lance)", ("indexing/", "lance")),
    ("catalog (SQLite)", ("server/catalog/", "sqlite3")),
    ("validation and JSON (pydantic)", ("pydantic", "/json/", "orjson", "server/shapes/")),
    ("logging", ("logging/",)),
    ("HTTP and ASGI (uvicorn, starlette, fastapi)", ("uvicorn", "starlette", "fastapi", "h11", "httptools")),
    ("asyncio and threads", ("asyncio", "threading.py", "concurrent/futures", "anyio")),
)
OTHER = "everything else"
# py-spy counts a thread blocked on a Python lock, queue or condition as busy: a stack whose
# innermost frame is such a wait is kept apart and out of the shares. The event loop's own run
# (uvloop, in C below the frame: its sockets and its poll, busy and idle alike) is a stage of
# its own, beside the shares, since the two cannot be told apart from Python.
WAITING = "waiting (a thread blocked on a lock, a queue or a condition)"
LOOP = "event loop in C (uvloop: socket I/O and its poll)"
WAIT_FRAMES = (
    "Condition.wait (threading.py",
    "Event.wait (threading.py",
    "Queue.get (queue.py",
    "_worker (concurrent/futures/thread.py",
    "QueueListener.dequeue (logging/handlers.py",  # the log thread waiting for a line (its SimpleQueue's get is C)
)
# A thread waiting for the SQLite catalog's own lock sits on a ``with self._lock:`` line of the
# catalog (the acquire is C): those lines, found in the source, count as waiting too.
CATALOG_SOURCE = Path(__file__).resolve().parent.parent / "server" / "catalog" / "sqlite.py"
LOCK_LINES = tuple(
    f"(server/catalog/sqlite.py:{n})"
    for n, line in enumerate(CATALOG_SOURCE.read_text().splitlines(), start=1)
    if line.strip() == "with self._lock:"
)


def stage_of(stack: str) -> str:
    innermost = stack.rsplit(";", 1)[-1]
    if any(innermost.startswith(frame) for frame in WAIT_FRAMES) or innermost.endswith(LOCK_LINES):
        return WAITING
    if innermost.startswith("Runner.run (asyncio/runners.py"):
        return LOOP
    for stage, patterns in STAGES:
        if any(p in stack for p in patterns):
            return stage
    return OTHER


def shares(folded: Path) -> dict[str, Any]:
    """Each stage's share of the samples that are neither waiting nor the event loop's C, and
    those two's shares of all samples."""
    counts: Counter[str] = Counter()
    for line in folded.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            counts[stage_of(stack)] += int(n)
    everything = sum(counts.values()) or 1
    apart = {name: round(counts.pop(name, 0) / everything, 4) for name in (WAITING, LOOP)}
    busy = sum(counts.values()) or 1
    return {
        "stage_shares": {stage: round(n / busy, 4) for stage, n in counts.most_common()},
        "apart_share_of_all_samples": apart,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument(
        "--write-share", type=float, default=None, help="the load's share of remembers (default: the benchmark's)"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--py-spy", default=str(Path(sys.executable).with_name("py-spy")))
    args = parser.parse_args()

    from benchmarks.arms import ScopeFirst
    from benchmarks.conftest import RATES, REPO
    from benchmarks.synthetic import build_store
    from benchmarks.test_http_load import MAIN_CLIENTS, WRITE_SHARE, Clients, _cpu_s, _ms, _server_pids
    from indexing.embedding.embedder import load_embedder
    from server.http.workers import default_workers
    from server.settings import Settings
    from tests.http.conftest import start_server, stop_server

    work = Path(tempfile.mkdtemp(prefix="esfis-profile-load-"))
    store = build_store(100_000, scopes={}, space_count=1_000)
    home = work / "home"
    ScopeFirst(store, settings=Settings(home=home, model=None), embedder=load_embedder(None)).service.close()
    sizes = np.bincount(store.space_of, minlength=len(store.spaces))
    hot = [store.spaces[i] for i in np.argsort(-sizes, kind="stable")[:MAIN_CLIENTS]]
    workers = default_workers()
    server = start_server(home, work, workers=workers, **RATES)
    clients = Clients(server.url, MAIN_CLIENTS)
    try:
        assignment = [(server.agent_token("profile-load", space=space), space) for space in hot]
        clients.step(assignment, 3.0, seed=7)  # every worker warm
        pids = _server_pids(server.process.pid)
        folded = args.out.with_suffix(".txt")
        spy = subprocess.Popen(
            [args.py_spy, "record", "--pid", str(server.process.pid), "--subprocesses", "--rate", "200"]
            + ["--format", "raw", "-o", str(folded), "--nonblocking"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # py-spy attaches to every worker
        before = _cpu_s(pids)
        write_share = WRITE_SHARE if args.write_share is None else args.write_share
        tally, seconds = clients.step(assignment, args.seconds, seed=11, write_share=write_share)
        cpu = _cpu_s(pids) - before
        spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled
        spy.wait(120)
        # The stacks name files by this machine's paths: kept relative to the checkout.
        folded.write_text(folded.read_text().replace(f"{REPO}/", ""))
    finally:
        clients.close()
        stop_server(server)
        shutil.rmtree(work, ignore_errors=True)  # a 100k-memory store: a few GB left behind otherwise
    figures = {
        "store_memories": store.size,
        "spaces": len(store.spaces),
        "workers": workers,
        "clients": MAIN_CLIENTS,
        "write_share": write_share,
        "seconds": round(seconds, 1),
        "requests": len(tally.all_s),
        "throughput_rps": round(len(tally.all_s) / seconds, 1),
        "p50_ms": _ms(tally.all_s, 50),
        "p95_ms": _ms(tally.all_s, 95),
        "errors": tally.error_count,
        "server_cpu_ms_per_request": round(1000 * cpu / max(1, len(tally.all_s)), 2),
        "note": "py-spy samples the server while it serves: the figures above include its cost",
    }
    figures.update(shares(folded))
    args.out.with_suffix(".json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
