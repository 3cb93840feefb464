"""Today's ``esfis serve`` against another commit's, under the same load, in alternating rounds
(not part of the suite): on shared cores, only figures taken side by side compare.

    python -m benchmarks.compare_serve --base BASE_TREE --out FILE.json [--size 100000]

``BASE_TREE`` is an exported tree of the other commit (``git archive C | tar -x -C DIR``), run
with this virtual environment (its folder first on ``PYTHONPATH``). Both servers serve copies of
one synthetic store (``--size`` memories over 1,000 spaces); the clients are the load benchmark's
(``benchmarks/load_client.py``: processes, one keep-alive connection each, 90% recall). For each
client count, rounds alternate between the two servers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.arms import ScopeFirst
from benchmarks.conftest import RATES
from benchmarks.synthetic import build_store
from benchmarks.test_http_load import Clients, _cpu_s, _ms, _server_pids
from indexing.embedding.embedder import load_embedder
from tests.http.conftest import Server, free_port, start_server, stop_process, stop_server


def start_base(base: Path, home: Path, work: Path, env: dict[str, str]) -> Server:
    """The other commit's ``esfis serve``, one process (its own default then)."""
    import httpx

    port = free_port()
    log = home.parent / f"base-{port}.log"
    code = f"import sys; from server.cli import main; sys.exit(main(['serve', '--port', '{port}']))"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=base,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**env, "PYTHONPATH": str(base)},
        )
    server = Server(f"http://127.0.0.1:{port}", home, work, env, process, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{server.url}/healthz", timeout=1.0).json()["model"] == "ready":
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    stop_process(process)
    raise AssertionError(log.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument(
        "--base-schema", type=int, help="the base commit's catalog schema, when older: its copy is marked so"
    )
    parser.add_argument("--clients", default="1,16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "esfis-compare")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="this branch's server's workers")
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]

    shutil.rmtree(args.scratch, ignore_errors=True)
    store = build_store(args.size, scopes={})
    ScopeFirst(store, home=args.scratch / "new" / "home", embedder=load_embedder(None)).service.close()
    shutil.copytree(args.scratch / "new" / "home", args.scratch / "base" / "home", symlinks=True)
    if args.base_schema is not None:  # an older esfis refuses a newer catalog; it ignores the tables it lacks
        import sqlite3

        with sqlite3.connect(args.scratch / "base" / "home" / "esfis.db") as db:
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(args.base_schema),))
    sizes = np.bincount(store.space_of, minlength=len(store.spaces))
    hot = [store.spaces[i] for i in np.argsort(-sizes, kind="stable")[: max(counts)]]

    new = start_server(args.scratch / "new" / "home", args.scratch / "new", workers=args.workers, **RATES)
    base = start_base(
        args.base,
        args.scratch / "base" / "home",
        args.scratch / "base",
        new.env | {"ESFIS_HOME": str(args.scratch / "base" / "home")},
    )
    servers = {"base": base, "new": new}
    clients = {name: Clients(s.url, max(counts)) for name, s in servers.items()}
    results: dict = {
        "size": args.size,
        "base_tree": str(args.base),
        "rounds": args.rounds,
        "seconds": args.seconds,
        "workers_new": args.workers,
        "steps": [],
    }
    try:
        tokens = {
            name: [(s.agent_token("bench-load", space=space), space) for space in hot] for name, s in servers.items()
        }
        for name in servers:
            clients[name].step(tokens[name][: max(counts)], 1.0, seed=7)  # warm
        for count in counts:
            tallies: dict = {name: {"all_s": [], "requests": 0, "errors": 0, "cpu_s": 0.0} for name in servers}
            for r in range(args.rounds):
                for name in ("base", "new") if r % 2 == 0 else ("new", "base"):
                    pids = _server_pids(servers[name].process.pid)
                    before = _cpu_s(pids)
                    tally, _ = clients[name].step(tokens[name][:count], args.seconds, seed=100 * r + count)
                    tallies[name]["cpu_s"] += _cpu_s(pids) - before
                    tallies[name]["all_s"] += tally.all_s
                    tallies[name]["errors"] += tally.error_count
            for name, t in tallies.items():
                done = max(1, len(t["all_s"]))
                results["steps"].append(
                    {
                        "server": name,
                        "clients": count,
                        "requests": len(t["all_s"]),
                        "throughput_rps": round(len(t["all_s"]) / (args.rounds * args.seconds), 1),
                        "p50_ms": _ms(t["all_s"], 50),
                        "p95_ms": _ms(t["all_s"], 95),
                        "p99_ms": _ms(t["all_s"], 99),
                        "errors": t["errors"],
                        "server_cpu_ms_per_request": round(1000 * t["cpu_s"] / done, 2),
                    }
                )
                print(json.dumps(results["steps"][-1]), flush=True)
    finally:
        for c in clients.values():
            c.close()
        stop_server(new)
        stop_process(base.process)
    args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
