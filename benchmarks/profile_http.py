"""Profile a real ``esfis serve`` answering one client's recalls, with py-spy (not part of the suite).

    python -m benchmarks.profile_http --size 1000000 --out benchmarks/results/partial/NAME

Builds (or reuses, under ``--cache``) a synthetic store of ``--size`` memories over 1,000 spaces
with a 10k-memory probe space, the one ``benchmarks/test_http_recall.py`` reads; starts
``esfis serve --workers 1``; times ``--queries`` recalls from one keep-alive client, with the
query embedding timed in this process beside it; then records the same load under
``py-spy record`` twice (a flame graph, ``NAME.svg``, then folded stacks, ``NAME.txt``, idle
threads included) and writes the figures to ``NAME.json``.
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
from pathlib import Path

import numpy as np

from benchmarks.longmemeval import load_workload
from indexing.embedding.embedder import load_embedder

PROBE = "probe-1p-10k"


def build(cache: Path, size: int) -> Path:
    home = cache / f"home-{size}"
    if (home / "ready").exists():
        return home
    from benchmarks.arms import ScopeFirst
    from benchmarks.synthetic import build_store

    if home.exists():
        shutil.rmtree(home)
    store = build_store(size, scopes={"1p-10k": (10_000, 1)})
    built = ScopeFirst(store, home=home, embedder=load_embedder(None))
    built.service.close()
    (home / "ready").write_text("")
    return home


def timed(client, questions: list[str], space: str = PROBE) -> list[float]:
    out = []
    for q in questions:
        began = time.perf_counter()
        client.post("/v1/recall", json={"query": q, "space": space}).raise_for_status()
        out.append(time.perf_counter() - began)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "esfis-profile")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--space", default=PROBE, help="the space recalled (a tail space such as t0999 is tiny)")
    parser.add_argument("--py-spy", default=str(Path(sys.executable).with_name("py-spy")))
    args = parser.parse_args()

    from benchmarks.conftest import RATES
    from tests.http.conftest import start_server, stop_server

    home = build(args.cache, args.size)
    asked = [q.text for q in load_workload().questions]
    questions = [asked[i % len(asked)] for i in range(args.queries)]
    embedder = load_embedder(None)
    embedder.load()
    work = args.cache / "work"
    work.mkdir(parents=True, exist_ok=True)
    server = start_server(home, work, workers=1, **RATES)
    try:
        token = server.agent_token("profile")
        with server.client(token) as client:
            timed(client, questions[:20], args.space)  # warm: the partition's image mapped, the sessions built
            latencies = timed(client, questions, args.space)
            embed = []
            for q in questions:
                began = time.perf_counter()
                embedder.embed_query(q)
                embed.append(time.perf_counter() - began)
            profiled: list[float] = []
            for fmt, suffix in (("flamegraph", ".svg"), ("raw", ".txt")):
                spy = subprocess.Popen(
                    [
                        args.py_spy,
                        "record",
                        "--pid",
                        str(server.process.pid),
                        "--idle",
                        "--rate",
                        "1000",
                        "--format",
                        fmt,
                        "-o",
                        str(args.out.with_suffix(suffix)),
                        "--nonblocking",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(0.3)  # py-spy attaches
                profiled += timed(client, questions, args.space)
                spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled
                spy.wait(60)
    finally:
        stop_server(server)
    figures = {
        "store_memories": args.size,
        "space": args.space,
        "queries": len(questions),
        "http_p50_ms": float(np.percentile(latencies, 50) * 1000),
        "http_p95_ms": float(np.percentile(latencies, 95) * 1000),
        "embed_p50_ms": float(np.percentile(embed, 50) * 1000),
        "embed_p95_ms": float(np.percentile(embed, 95) * 1000),
        "profiled_p50_ms": float(np.percentile(profiled, 50) * 1000),
    }
    figures["http_p50_over_embed_ms"] = figures["http_p50_ms"] - figures["embed_p50_ms"]
    args.out.with_suffix(".json").write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
