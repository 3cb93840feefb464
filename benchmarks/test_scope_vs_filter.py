"""Scope-first against post-filter, single-table prefilter, an in-memory scope mask, an
in-memory post-filter and the numpy floor, on synthetic clustered stores of growing size,
callers reading 1 and 3 partitions, and a scope-size sweep.

Each case runs a metrics pass (recall@10 against exact in-scope truth, answers with fewer than
k rows, vectors scored and how many of them out of scope, per-query latency, what served the
partitions) and a timed pass under pytest-benchmark. Correctness is asserted (and runs in CI,
quick mode); timings never are. The report checks the targets (``benchmarks/targets.py``):
the index search within 1.5× the floor in every cell, the whole recall within 0.2× the
prefilter, recall@10 of 1.0 from an exact scan and ≥ 0.95 from an IVF image.

The two ratio targets divide one arm's p50 by another's. Each arm's own pass runs minutes apart
from the other's (the arms between them build and query whole tables), and this machine's speed
can move more than a bound of 1.5× allows in that time (docs/benchmarks.md). So the cell's last
case (the floor) also runs a *paired* pass: the arms those targets compare take turns over the
same queries, ``PAIRED_BLOCK`` queries a turn, so every p50 of the pass comes from the same
seconds; the report divides those (``paired_p50_ms``).
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from benchmarks.arms import NOW, Floor, InMemory, ScopeFirst, SingleTable, partition_rows
from benchmarks.conftest import FULL, rss_mb
from benchmarks.synthetic import build_store, exact_top_k, queries_for, recall_at_k
from indexing.relevance.ann import ANN_THRESHOLD
from server.clock import to_micros
from server.spaces import partition_key

K = 10
QUERIES = 200 if FULL else 25
COUNTED_QUERIES = 20 if FULL else 5  # LanceDB's plan is analysed on these (it runs the query again)
IN_MEMORY_FETCH = 16
# The in-memory post-filter scans the whole store for each query (about a minute a cell at 1M with
# every query): its p50 is read on the first 50 queries, the same 50 every run.
WHOLE_STORE_QUERIES = 50 if FULL else QUERIES
SIZES = [10_000, 100_000, 1_000_000] if FULL else [10_000]
FIXED_SCOPES = {"1p-10k": (10_000, 1), "3p-10k": (10_000, 3)} if FULL else {"1p-2k": (2_000, 1), "3p-2k": (2_000, 3)}
SWEEP = {"1p-1k": (1_000, 1), "1p-50k": (50_000, 1), "1p-100k": (100_000, 1)} if FULL else {}
ARMS = [
    "scope-first",
    "scope-first-index",
    "post-filter-x1",
    "post-filter-x4",
    "post-filter-x16",
    "prefilter",
    "in-memory-scope-mask",
    f"in-memory-post-filter-x{IN_MEMORY_FETCH}",
    "floor",
]
# ESFIS_BENCH_ARMS=scope-first-index,floor re-measures some arms without building the others.
ARMS = [a for a in ARMS if a in os.environ.get("ESFIS_BENCH_ARMS", ",".join(ARMS)).split(",")]
SIZES = [int(s) for s in os.environ.get("ESFIS_BENCH_SIZES", ",".join(map(str, SIZES))).split(",")]
EXACT_ARMS = ("scope-first", "scope-first-index", "prefilter", "in-memory-scope-mask", "floor")
# The arms the ratio targets compare, timed side by side in the floor's case (``paired_p50_ms``).
PAIRED_ARMS = ("floor", "scope-first-index", "scope-first", "prefilter")
PAIRED_BLOCK = 25  # queries an arm answers in a row, in its turn of the paired pass

_built: dict[int, dict] = {}


def world(size: int) -> dict:
    """Store, arms and queries for one store size, built once per session."""
    if size not in _built:
        _built.clear()  # keep one store in memory at a time
        scopes = dict(FIXED_SCOPES) | (SWEEP if size == max(SIZES) else {})
        store = build_store(size, scopes=scopes)
        before = rss_mb()
        started = time.perf_counter()
        scope_first = ScopeFirst(store)
        built_scope = time.perf_counter() - started
        single = SingleTable(store) if any(a.startswith("post") or a == "prefilter" for a in ARMS) else None
        floor = Floor(store)
        queries = {label: queries_for(store, label, QUERIES) for label in store.scopes}
        allowed = {label: store.in_scope(label) for label in store.scopes}
        truth = {label: [exact_top_k(store.vectors, allowed[label], q, K) for q in qs] for label, qs in queries.items()}
        _built[size] = dict(
            store=store,
            scope_first=scope_first,
            single=single,
            floor=floor,
            memory=InMemory(store),
            queries=queries,
            truth=truth,
            allowed=allowed,
            rss=rss_mb() - before,
            build_s=built_scope,
        )
    return _built[size]


def runner(w: dict, arm: str, label: str, *, counted: bool = False):
    """The arm's query; ``counted`` gives the variant whose answer carries what it scored."""
    micros = to_micros(NOW)
    if arm == "scope-first":
        return lambda q: w["scope_first"].recall(label, q, K)
    if arm == "scope-first-index":
        sf = w["scope_first"]
        if counted:
            return lambda q: sf.search_counted(label, q, K, micros)
        return lambda q: sf.search(label, q, K, micros)
    if arm.startswith("post-filter"):
        fetch = int(arm.rsplit("x", 1)[1])
        return lambda q: w["single"].post_filter(label, q, K, fetch)
    if arm == "prefilter":
        return lambda q: w["single"].prefilter(label, q, K)
    if arm == "in-memory-scope-mask":
        return lambda q: w["memory"].scope_mask(label, q, K)
    if arm.startswith("in-memory-post-filter"):
        fetch = int(arm.rsplit("x", 1)[1])
        return lambda q: w["memory"].post_filter(label, q, K, fetch)
    return lambda q: w["floor"].search(label, q, K)


def served(w: dict, arm: str, label: str) -> dict:
    """What served the cell, and in which configuration."""
    if arm.startswith("scope-first"):
        return w["scope_first"].served_by(label)
    if arm.startswith("post-filter"):
        single = w["single"]
        return {
            "served_by": "LanceDB IVF_PQ" if single.indexed else "LanceDB flat",
            "config": single.post_filter_config,
        }
    if arm == "prefilter":
        return {"served_by": "LanceDB flat", "config": w["single"].prefilter_config}
    if arm.startswith("in-memory"):
        what = (
            "mask over every row, kept rows gathered and scanned"
            if arm == "in-memory-scope-mask"
            else f"every row scanned, top {K * IN_MEMORY_FETCH}, then the mask"
        )
        return {"served_by": "numpy, whole store", "config": f"one in-memory matrix: {what}"}
    return {"served_by": "numpy, scope gathered", "config": "the caller's valid rows gathered beforehand"}


def scored_counts(w: dict, arm: str, label: str, queries: np.ndarray) -> tuple[list, list, str]:
    """Vectors scored per query and those out of scope, counted (see ``Answer``)."""
    if arm.startswith("post-filter") or arm == "prefilter":
        single, fetch = w["single"], int(arm.rsplit("x", 1)[1]) if arm.startswith("post") else 0
        answers = [
            single.count_post_filter(label, q, K, fetch) if fetch else single.count_prefilter(label, q, K)
            for q in queries[:COUNTED_QUERIES]
        ]
    else:
        run = runner(w, arm, label, counted=True)
        answers = [run(q) for q in queries[:COUNTED_QUERIES]]
    kinds = {a.out_of_scope_kind for a in answers}
    return [a.scored for a in answers], [a.out_of_scope_scored for a in answers], " / ".join(sorted(kinds))


def paired_p50_ms(w: dict, label: str, queries: np.ndarray) -> dict[str, float]:
    """Each of ``PAIRED_ARMS`` built in this session over the same queries, in turns of
    ``PAIRED_BLOCK`` queries (the arms' order shuffled each turn, so none always follows the
    same other), after two warm-up queries each: the p50 of each arm, all taken within the same
    seconds. In turns of many queries, not query by query: between two queries of one arm the
    others would evict its vectors from the processor's cache (and a LanceDB query leaves its
    threads busy a while after it), so each arm would be timed cold, unlike its own pass (the
    turns' length was chosen ad hoc: docs/benchmarks.md)."""
    arms = [a for a in PAIRED_ARMS if a in ARMS and (a != "prefilter" or w["single"] is not None)]
    runs = [runner(w, arm, label) for arm in arms]
    for run in runs:
        for q in queries[:2]:
            run(q)
    rng = np.random.default_rng(7)
    latencies: list[list[float]] = [[] for _ in arms]
    for start in range(0, len(queries), PAIRED_BLOCK):
        block = queries[start : start + PAIRED_BLOCK]
        for at in rng.permutation(len(arms)):
            run, times = runs[at], latencies[at]
            for q in block:
                started = time.perf_counter()
                run(q)
                times.append(time.perf_counter() - started)
    return {arm: float(np.percentile(t, 50) * 1000) for arm, t in zip(arms, latencies)}


CASES = [(size, label, arm) for size in SIZES for label in FIXED_SCOPES for arm in ARMS]
CASES += [(max(SIZES), label, arm) for label in SWEEP for arm in ARMS]


@pytest.mark.parametrize("size, label, arm", CASES, ids=[f"{s}-{l}-{a}" for s, l, a in CASES])
def test_scope_first_vs_filters(benchmark, size, label, arm):
    w = world(size)
    run = runner(w, arm, label)
    queries, truth, allowed = w["queries"][label], w["truth"][label], w["allowed"][label]
    if arm.startswith("in-memory-post-filter"):
        queries, truth = queries[:WHOLE_STORE_QUERIES], truth[:WHOLE_STORE_QUERIES]
    sf = w["scope_first"]
    latencies, recalls, short = [], [], 0
    for q, t in zip(queries, truth):
        started = time.perf_counter()
        answer = run(q)
        latencies.append(time.perf_counter() - started)
        rows = [sf.row_of[h.id] for h in answer] if arm == "scope-first-index" else answer.rows
        if arm == "scope-first":  # the whole recall: judged against its own exact answer (feedback included)
            whole = sf.truth(w["store"], label, q, K)
            recalls.append(recall_at_k(w["store"].vectors, whole.query, rows, whole.rows, whole.candidates & allowed))
        else:
            recalls.append(recall_at_k(w["store"].vectors, q, rows, t, allowed))
        short += len(rows) < K
    scored, outside, kind = scored_counts(w, arm, label, queries)
    store = w["store"]
    stats = {
        "store_size": store.size,
        "scope": label,
        "arm": arm,
        "scope_rows": int(allowed.sum()),
        "partition_rows": partition_rows(store, label),
        "scope_partitions": len(store.scopes[label]),
        "largest_partition_rows": int(max(np.sum(store.space_of == i) for i in store.scopes[label])),
        "recall_at_10": float(np.mean(recalls)),
        "underfilled_share": short / len(queries),
        "scored_per_query": float(np.mean(scored)),
        "out_of_scope_scored_per_query": float(np.mean(outside)),
        "out_of_scope_kind": kind,
        "counted_queries": len(scored),
        "p50_ms": float(np.percentile(latencies, 50) * 1000),
        "p95_ms": float(np.percentile(latencies, 95) * 1000),
        "queries": len(queries),
        **served(w, arm, label),
    }
    if arm == "floor":  # the cell's last case: every arm of it is built and warm
        stats["paired_p50_ms"] = paired_p50_ms(w, label, queries)
    benchmark.extra_info.update(stats)
    cycle = iter(np.concatenate([queries] * 3))
    benchmark.pedantic(lambda: run(next(cycle)), rounds=len(queries), iterations=1, warmup_rounds=2)
    if arm in EXACT_ARMS:
        assert stats["out_of_scope_scored_per_query"] == 0
        assert stats["underfilled_share"] == 0
    if arm.startswith("scope-first"):
        ivf_expected = sum(int(np.sum(store.space_of == i)) >= ANN_THRESHOLD for i in store.scopes[label])
        assert stats["ivf_partitions"] == ivf_expected, stats  # the IVF switch counts expired rows too
        assert stats["recall_at_10"] >= (0.95 if stats["ivf_partitions"] else 1.0)
    elif arm in EXACT_ARMS:
        assert stats["recall_at_10"] == 1.0


SINGLE_SPACE = 1_000_000 if FULL else 60_000


def test_single_large_space_uses_ann_inside_the_partition(benchmark):
    """One space of ``SINGLE_SPACE`` memories, past ``ANN_THRESHOLD``: the partition is served by
    its IVF image. Targets: recall@10 ≥ 0.95 at p50 ≤ 10 ms (full mode)."""
    _built.clear()
    store = build_store(SINGLE_SPACE, scopes={"1p-all": (SINGLE_SPACE, 1)}, seed=5)
    # build_store adds 1,000 small spaces beside the probe; keep only the probe's rows.
    keep = store.space_of == store.scopes["1p-all"][0]
    from benchmarks.synthetic import Store

    store = Store(
        store.vectors[keep],
        np.zeros(int(keep.sum()), dtype=np.int32),
        store.expired[keep],
        ["probe-1p-all"],
        {"1p-all": [0]},
    )
    sf = ScopeFirst(store)
    queries = queries_for(store, "1p-all", QUERIES)
    allowed = store.in_scope("1p-all")
    truth = [sf.truth(store, "1p-all", q, K) for q in queries]  # the whole recall's exact answer
    sf.recall("1p-all", queries[0], K)  # load the partition and build its index
    latencies, recalls, outside, scored, short = [], [], 0, 0, 0
    for q, t in zip(queries, truth):
        started = time.perf_counter()
        answer = sf.recall("1p-all", q, K)
        latencies.append(time.perf_counter() - started)
        recalls.append(recall_at_k(store.vectors, t.query, answer.rows, t.rows, t.candidates & allowed))
        outside += answer.out_of_scope_scored
        scored += answer.scored or 0
        short += len(answer.rows) < K
    snapshot = sf.service._parts.store.live_partition(partition_key("probe-1p-all"))
    stats = {
        "store_size": store.size,
        "scope": "1p-all (single space)",
        "arm": "scope-first",
        "scope_rows": int(store.in_scope("1p-all").sum()),
        "partition_rows": store.size,
        "scope_partitions": 1,
        "largest_partition_rows": store.size,
        "recall_at_10": float(np.mean(recalls)),
        "underfilled_share": short / len(queries),
        "scored_per_query": scored / len(queries),
        "out_of_scope_scored_per_query": outside / len(queries),
        "out_of_scope_kind": "counted",
        "counted_queries": len(queries),
        "single_space": True,
        **sf.served_by("1p-all"),
        "p50_ms": float(np.percentile(latencies, 50) * 1000),
        "p95_ms": float(np.percentile(latencies, 95) * 1000),
        "ivf_lists": len(snapshot.base.lists.centroids) if snapshot.base else 0,
        "nprobe": snapshot.base.lists.nprobe if snapshot.base else 0,
    }
    benchmark.extra_info.update(stats)
    cycle = iter(np.concatenate([queries] * 3))
    benchmark.pedantic(lambda: sf.recall("1p-all", next(cycle), K), rounds=len(queries), iterations=1)
    assert snapshot.base is not None  # served by the partition's image and its IVF lists
    assert stats["served_by"] == "IVF image"
    assert stats["recall_at_10"] >= 0.95 and outside == 0 and short == 0
