"""Batched query embedding (``indexing.embedding.batching``), the default ONNX model on the CPU.

- lone: one query after another, through the batcher and straight to the model, interleaved
  (target, issue 23: the batcher slows a lone query by at most 0.3 ms at p50);
- concurrent: N threads embedding queries at once for a fixed time, with and without the
  batcher: queries per second, p50/p95 per query, and the batch sizes the batcher made.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from benchmarks.conftest import FULL
from benchmarks.longmemeval import load_workload
from indexing.embedding.batching import BatchingEmbedder
from indexing.embedding.embedder import load_embedder

QUERIES = 200 if FULL else 20
CONCURRENT_S = 5.0 if FULL else 0.5
THREADS = (4, 16) if FULL else (4,)


@pytest.fixture(scope="module")
def questions() -> list[str]:
    return [q.text for q in load_workload().questions[:QUERIES]]


@pytest.fixture(scope="module")
def model():
    embedder = load_embedder(None)
    embedder.load()
    return embedder


def test_lone_query_through_the_batcher(benchmark, model, questions):
    batching = BatchingEmbedder(model)
    batching.load()
    direct, batched = [], []
    for q in questions * 2:  # interleaved, so both meet the machine in the same state
        began = time.perf_counter()
        model.embed_query(q)
        direct.append(time.perf_counter() - began)
        began = time.perf_counter()
        batching.embed_query(q)
        batched.append(time.perf_counter() - began)
    cycle = iter(questions * 3)
    benchmark.pedantic(lambda: batching.embed_query(next(cycle)), rounds=len(questions), iterations=1)
    p50 = {name: float(np.percentile(v, 50) * 1000) for name, v in (("direct", direct), ("batched", batched))}
    benchmark.extra_info.update(
        {
            "queries": len(direct),
            "direct_p50_ms": p50["direct"],
            "batched_p50_ms": p50["batched"],
            "lone_overhead_p50_ms": p50["batched"] - p50["direct"],
            "direct_p95_ms": float(np.percentile(direct, 95) * 1000),
            "batched_p95_ms": float(np.percentile(batched, 95) * 1000),
        }
    )
    assert batching.queries.stats.sizes.keys() == {1}  # alone, every one


def _hammer(embed, questions: list[str], threads: int, seconds: float) -> tuple[int, list[float]]:
    latencies: list[list[float]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads)

    def loop(i: int) -> None:
        start.wait()
        deadline = time.monotonic() + seconds
        n = i
        while time.monotonic() < deadline:
            began = time.perf_counter()
            embed(questions[n % len(questions)])
            latencies[i].append(time.perf_counter() - began)
            n += threads

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    flat = [x for per in latencies for x in per]
    return len(flat), flat


@pytest.mark.parametrize("threads", THREADS)
def test_concurrent_queries_with_and_without_the_batcher(benchmark, model, questions, threads):
    batching = BatchingEmbedder(model)
    batching.load()
    done_direct, direct = _hammer(model.embed_query, questions, threads, CONCURRENT_S)
    result: dict = {}
    benchmark.pedantic(
        lambda: result.update(zip(("n", "lat"), _hammer(batching.embed_query, questions, threads, CONCURRENT_S))),
        rounds=1,
        iterations=1,
    )
    sizes = batching.queries.stats.sizes
    benchmark.extra_info.update(
        {
            "threads": threads,
            "seconds": CONCURRENT_S,
            "direct_qps": round(done_direct / CONCURRENT_S, 1),
            "batched_qps": round(result["n"] / CONCURRENT_S, 1),
            "direct_p50_ms": float(np.percentile(direct, 50) * 1000),
            "direct_p95_ms": float(np.percentile(direct, 95) * 1000),
            "batched_p50_ms": float(np.percentile(result["lat"], 50) * 1000),
            "batched_p95_ms": float(np.percentile(result["lat"], 95) * 1000),
            "mean_batch": round(sum(k * v for k, v in sizes.items()) / max(1, sum(sizes.values())), 2),
        }
    )
    assert result["n"] > 0
