"""HTTP recall end to end — a real ``esfis serve`` on a real port, the query embedded by the
server — on a synthetic store (1M memories in full mode) read from a 10k-memory scope.

Target (issue 5): p50 ≤ 15 ms and p95 ≤ 30 ms on a 1M-memory store, embedding included.
Correctness asserted: every answer comes from the caller's scope.
"""

from __future__ import annotations

from benchmarks.arms import ScopeFirst
from benchmarks.conftest import FULL, RATES
from benchmarks.http_timing import percentiles_ms, timed_recalls
from benchmarks.longmemeval import load_workload
from benchmarks.synthetic import build_store
from indexing.embedding.embedder import load_embedder
from tests.http.conftest import start_server, stop_server

SIZE = 1_000_000 if FULL else 10_000
SCOPE = ("1p-10k", (10_000, 1)) if FULL else ("1p-2k", (2_000, 1))
QUERIES = 200 if FULL else 20


def test_http_recall_end_to_end(benchmark, tmp_path):
    label, spec = SCOPE
    store = build_store(SIZE, scopes={label: spec})
    home = tmp_path / "home"
    built = ScopeFirst(store, home=home, embedder=load_embedder(None))
    served_by = built.served_by(label)["served_by"]
    built.service.close()
    questions = [q.text for q in load_workload().questions[:QUERIES]]
    server = start_server(home, tmp_path, **RATES)
    try:
        token = server.token("--ai", "bench")
        space = f"probe-{label}"
        with server.client(token) as client:
            client.post("/v1/recall", json={"query": "warm up", "space": space}).raise_for_status()
            latencies, outside = timed_recalls(client, questions, space)
            cycle = iter(questions * 3)
            benchmark.pedantic(
                lambda: client.post("/v1/recall", json={"query": next(cycle), "space": space}),
                rounds=len(questions),
                iterations=1,
            )
    finally:
        stop_server(server)
    benchmark.extra_info.update(
        {
            "store_memories": store.size,
            "scope": label,
            "queries": len(questions),
            **percentiles_ms(latencies),
            "answers_from_other_spaces": outside,
            "served_by": served_by,
        }
    )
    assert outside == 0
