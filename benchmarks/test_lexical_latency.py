"""The cost of each recall method per partition: ``VectorStore.search`` of one partition
without the query text (cosine alone), with it (cosine fused with BM25), and with it followed
by pseudo-relevance feedback over its candidates (``indexing.relevance.feedback``, the default), at
partitions of 250, 10k and 100k rows (250 and 2k in quick mode). Real LongMemEval texts, cycled
to size; random unit vectors (the lexical cost does not depend on them; past 50k rows the IVF
path runs). The arms are timed in the same run, in turn, so their ratios are the figures."""

from __future__ import annotations

import time

import numpy as np
import pytest

from benchmarks.arms import scratch
from benchmarks.conftest import FULL
from benchmarks.longmemeval import load_workload
from indexing.partitions.store import VectorStore
from indexing.relevance.feedback import with_feedback
from indexing.rows import OPEN_END, RowBatch

SIZES = [250, 10_000, 100_000] if FULL else [250, 2_000]
ROUNDS = 200 if FULL else 20
NOW = 10**15


def partition(size: int) -> tuple[VectorStore, list[str]]:
    workload = load_workload(full=False)
    texts = [workload.texts[t] for t in workload.memory_text]
    rng = np.random.default_rng(size)
    vectors = rng.normal(size=(size, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = VectorStore(scratch("esfis-lexical-latency-"), model="bench", dimension=384)
    store.add(
        "p",
        RowBatch(
            [f"m{i}" for i in range(size)],
            [texts[i % len(texts)] for i in range(size)],
            vectors,
            np.zeros(size, dtype=np.int64),
            np.zeros(size, dtype=np.int64),
            np.full(size, OPEN_END, dtype=np.int64),
        ),
    )
    return store, [q.text for q in workload.questions]


@pytest.mark.parametrize("size", SIZES)
def test_lexical_signal_cost(benchmark, size):
    store, questions = partition(size)
    snap = store.live_partition("p")
    started = time.perf_counter()
    snap.lexicon()  # built on the first search with a text; timed here on its own
    build_ms = (time.perf_counter() - started) * 1000
    rng = np.random.default_rng(1)
    queries = rng.normal(size=(len(questions), 384)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    arms = ("cosine", "hybrid", "feedback")
    times: dict[str, list[float]] = {arm: [] for arm in arms}
    for i in range(ROUNDS):
        q, text = queries[i % len(queries)], questions[i % len(questions)]
        for arm in arms[i % 3 :] + arms[: i % 3]:  # each arm first as often as the others
            t0 = time.perf_counter()
            result = store.search("p", q, 20, now=NOW, text=None if arm == "cosine" else text)
            if arm == "feedback":
                result = with_feedback([result], q)[0]
            times[arm].append(time.perf_counter() - t0)
            assert len(result.hits) == 20
    p50 = {arm: float(np.percentile(t, 50) * 1000) for arm, t in times.items()}
    p95 = {arm: float(np.percentile(t, 95) * 1000) for arm, t in times.items()}
    store.stats.reset()
    store.search("p", queries[0], 20, now=NOW, text=questions[0])
    benchmark.extra_info.update(
        {
            "partition_rows": size,
            "cosine_p50_ms": p50["cosine"],
            "hybrid_p50_ms": p50["hybrid"],
            "cosine_p95_ms": p95["cosine"],
            "hybrid_p95_ms": p95["hybrid"],
            "added_p50_ms": p50["hybrid"] - p50["cosine"],
            "ratio_p50": p50["hybrid"] / p50["cosine"],
            "feedback_p50_ms": p50["feedback"],
            "feedback_p95_ms": p95["feedback"],
            "feedback_added_p50_ms": p50["feedback"] - p50["hybrid"],
            "lexical_build_ms": build_ms,
            "postings_per_query": store.stats.postings["p"],
            "index_postings": snap.lexicon().postings,
            "index_terms": len(snap.lexicon().terms),
        }
    )
    order = iter(range(10**6))

    def hybrid() -> None:
        i = next(order) % len(questions)
        store.search("p", queries[i], 20, now=NOW, text=questions[i])

    benchmark.pedantic(hybrid, rounds=ROUNDS, iterations=1)
    assert store.stats.postings["p"] > 0
