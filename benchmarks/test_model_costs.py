"""What another embedding model costs around the recall itself: ``esfis reindex`` time, and HTTP
recall through a real ``esfis serve`` whose model embeds each query.

Per model arm (``benchmarks/model_arms.py``): the default model, and the arms
``ESFIS_BENCH_MODELS=embeddinggemma,…`` adds (another model's arms take more than a day on two
cores in full mode); ``ESFIS_BENCH_MODEL_ARMS=embeddinggemma`` measures only those (a partial run).

- **Reindex**: a store of real LongMemEval user turns (``ESFIS_BENCH_REINDEX_ROWS``, 20,000 in
  full mode) made by another model, moved to the arm's model by ``reindex_store``, the
  command's own code path; the time, rows/s and seconds per 100k memories.
- **HTTP recall**: the synthetic store of 100k memories over 1,000 spaces (a 10k scope), its
  clustered 384-d vectors carried into the model's dimension by a fixed random isometry (cosines
  unchanged), served by ``esfis serve`` with ``ESFIS_MODEL`` set to the arm's model. Asserted:
  no answer from another space.
"""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np
import pytest

from benchmarks.arms import NOW, ScopeFirst
from benchmarks.conftest import FULL, RATES
from benchmarks.http_timing import percentiles_ms, timed_recalls
from benchmarks.longmemeval import load_workload
from benchmarks.model_arms import ARMS, chosen_arms
from benchmarks.synthetic import build_store
from indexing.embedding.testing import HashingEmbedder
from server.facade import open_service, reindex_store
from server.memories.input import NewMemory, new_id
from server.settings import Settings
from tests.http.conftest import start_server, stop_server

CHOSEN = os.environ.get("ESFIS_BENCH_MODEL_ARMS")
MODEL_ARMS = CHOSEN.split(",") if CHOSEN else chosen_arms()
# 20,000 rows in full mode: the reindex is the embedding, linear in rows (reported per 100k); 100k
# rows were 16 minutes of a full run.
REINDEX_ROWS = int(os.environ.get("ESFIS_BENCH_REINDEX_ROWS") or (20_000 if FULL else 300))
HTTP_SIZE, HTTP_SCOPE = (100_000, ("1p-10k", (10_000, 1))) if FULL else (10_000, ("1p-2k", (2_000, 1)))
QUERIES = 200 if FULL else 20
HTTP_ARMS = [a for a in MODEL_ARMS if a != "embeddinggemma-int8"]  # a server runs the product's runtimes only


def lifted(vectors: np.ndarray, dimension: int) -> np.ndarray:
    """The same unit vectors in ``dimension`` dimensions, every cosine kept (orthonormal columns)."""
    if dimension == vectors.shape[1]:
        return vectors
    basis, _ = np.linalg.qr(np.random.default_rng(11).normal(size=(dimension, vectors.shape[1])))
    return np.ascontiguousarray(vectors @ basis.T.astype(np.float32), dtype=np.float32)


@pytest.mark.parametrize("arm", MODEL_ARMS)
def test_reindex_time_per_100k_memories(benchmark, tmp_path, arm):
    turns = load_workload(full=False).texts
    texts = [turns[i % len(turns)] + ("" if i < len(turns) else f" ({i // len(turns)})") for i in range(REINDEX_ROWS)]
    home = tmp_path / "home"
    svc = open_service(Settings(home=home, model=None), embedder=HashingEmbedder(64, "before"), clock=lambda: NOW)
    try:
        svc._parts.registry.add_named("lme")
        old = HashingEmbedder(64, "before")
        for start in range(0, len(texts), 4096):
            chunk = texts[start : start + 4096]
            vectors = old.embed_documents(chunk)
            svc._parts.memories.write(
                [
                    NewMemory(
                        id=new_id(),
                        space="lme",
                        text=t,
                        vector=v,
                        ai="bench",
                        created_at=NOW,
                        valid_from=NOW,
                        valid_until=None,
                    )
                    for t, v in zip(chunk, vectors)
                ]
            )
    finally:
        svc.close()
    embedder = ARMS[arm].make()
    embedder.load()
    started = time.perf_counter()
    report = reindex_store(Settings(home=home, model=None), embedder=embedder)
    seconds = time.perf_counter() - started
    assert report.rows == len(texts)
    benchmark.extra_info.update(
        {
            "model": ARMS[arm].model,
            "runtime": ARMS[arm].runtime,
            "rows": report.rows,
            "seconds": seconds,
            "rows_per_s": report.rows / seconds,
            "seconds_per_100k": seconds * 100_000 / report.rows,
        }
    )
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)


@pytest.mark.parametrize("arm", HTTP_ARMS)
def test_http_recall_with_the_model(benchmark, tmp_path, arm):
    label, spec = HTTP_SCOPE
    embedder = ARMS[arm].make()
    store = build_store(HTTP_SIZE, scopes={label: spec})
    store = dataclasses.replace(store, vectors=lifted(store.vectors, embedder.dimension))
    home = tmp_path / "home"
    built = ScopeFirst(store, home=home, embedder=embedder)
    served_by = built.served_by(label)["served_by"]
    built.service.close()
    questions = [q.text for q in load_workload().questions[:QUERIES]]
    model = getattr(embedder, "path", None)
    server = start_server(home, tmp_path, **RATES, **({"ESFIS_MODEL": str(model)} if arm != "minilm" else {}))
    try:
        token = server.token("--ai", "bench")
        space = f"probe-{label}"
        with server.client(token) as client:
            client.post("/v1/recall", json={"query": "warm up", "space": space}).raise_for_status()
            latencies, outside = timed_recalls(client, questions, space)
            cycle = iter(questions * 3)
            benchmark.pedantic(
                lambda: client.post("/v1/recall", json={"query": next(cycle), "space": space}),
                rounds=min(len(questions), 50),
                iterations=1,
            )
    finally:
        stop_server(server)
    benchmark.extra_info.update(
        {
            "model": ARMS[arm].model,
            "store_memories": store.size,
            "scope": label,
            "dimension": embedder.dimension,
            "queries": len(questions),
            **percentiles_ms(latencies),
            "answers_from_other_spaces": outside,
            "served_by": served_by,
        }
    )
    assert outside == 0
