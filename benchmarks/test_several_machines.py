"""HTTP recall on the deployment for several machines (a PostgreSQL catalog, the partitions on
S3) beside the embedded default (SQLite, a local folder), and the cost of loading a partition
cold from object storage against searching it warm.

Both deployments hold the same synthetic store and answer the same questions, each through a
real ``esfis serve``; the requests alternate between the two, so the machine's noise falls on
both alike. PostgreSQL is a real cluster started here, S3 is moto's server (a Python process on
this machine: object storage over a network would cost more per request; the figures say what
esfis adds, not what a cloud's S3 costs).

Cold: a store opened afresh (a new Lance session, nothing cached) searches the scope's partition
once, reading its rows from where they lie; warm: the same search once the partition is in
memory. Correctness asserted: every answer comes from the caller's scope.
"""

from __future__ import annotations

import os
import time

import numpy as np

from benchmarks.arms import ScopeFirst
from benchmarks.conftest import FULL, RATES
from benchmarks.http_timing import percentiles_ms, timed_recalls
from benchmarks.longmemeval import load_workload
from benchmarks.synthetic import build_store
from indexing.embedding.embedder import load_embedder
from indexing.partitions.store import VectorStore
from server.catalog.partition_sync import PostgresPartitionSync
from server.settings import Settings
from server.spaces import partition_key
from tests import objectstore
from tests.catalogs import Cluster
from tests.http.conftest import start_server, stop_server

SIZE = 100_000 if FULL else 3_000
SCOPE = ("1p-10k", (10_000, 1)) if FULL else ("1p-2k", (2_000, 1))
QUERIES = 200 if FULL else 10
SPACES = 1_000 if FULL else 20  # a write to S3 costs tens of ms: the quick store stays small
COLD_ROUNDS = 5 if FULL else 2
NOW_MICROS = 10**16


def cold_and_warm_ms(
    where: str, local, model: str, dimension: int, key: str, query: np.ndarray, catalog: str | None = None
) -> tuple[float, float]:
    """(median first search of a freshly opened store, median search once warm), in ms. With
    ``catalog``, the partitions' versions are read there, as a server on S3 reads them."""
    cold = []
    for i in range(COLD_ROUNDS):
        sync = None if catalog is None else PostgresPartitionSync(catalog)
        store = VectorStore(
            where,
            local=None if local is None else local / f"cold-{i}",
            model=model,
            dimension=dimension,
            coordination=sync,
        )
        started = time.perf_counter()
        result = store.search(key, query, 10, now=NOW_MICROS)
        cold.append(time.perf_counter() - started)
        assert len(result.rows) == 10, "the partition was read"
        if sync is not None and i < COLD_ROUNDS - 1:
            sync.close()
    warm = []
    for _ in range(50):
        started = time.perf_counter()
        store.search(key, query, 10, now=NOW_MICROS)
        warm.append(time.perf_counter() - started)
    if sync is not None:
        sync.close()
    return float(np.median(cold) * 1000), float(np.median(warm) * 1000)


def test_several_machines_http_recall(benchmark, tmp_path, monkeypatch):
    label, spec = SCOPE
    store = build_store(SIZE, scopes={label: spec}, space_count=SPACES)
    embedder = load_embedder(None)
    s3 = objectstore.server()
    cluster = Cluster().start()
    servers = []
    try:
        for name, value in s3.env.items():
            monkeypatch.setenv(name, value)
        vectors = f"s3://{s3.bucket()}/esfis"
        shared = {"ESFIS_CATALOG": cluster.new_catalog(), "ESFIS_VECTORS": vectors}
        embedded = ScopeFirst(store, home=tmp_path / "embedded", embedder=embedder)
        remote = ScopeFirst(
            store,
            embedder=embedder,
            settings=Settings(home=tmp_path / "remote", model=None, catalog=shared["ESFIS_CATALOG"], vectors=vectors),
        )
        for built in (embedded, remote):
            built.service.close()
        space = f"probe-{label}"
        key = partition_key(space)
        query = embedder.embed_query(load_workload().questions[0].text)
        local_root = tmp_path / "embedded" / "vectors"
        cold_local, warm_local = cold_and_warm_ms(str(local_root), None, embedder.name, embedder.dimension, key, query)
        cold_s3, warm_s3 = cold_and_warm_ms(
            vectors, tmp_path / "cold", embedder.name, embedder.dimension, key, query, catalog=shared["ESFIS_CATALOG"]
        )

        servers.append(start_server(tmp_path / "embedded", tmp_path, **RATES))
        servers.append(start_server(tmp_path / "remote", tmp_path, **RATES, **shared, **s3.env))
        questions = [q.text for q in load_workload().questions[:QUERIES]]
        clients = [server.client(server.token("--ai", "bench")) for server in servers]
        timings: list[list[float]] = [[], []]
        outside = 0
        for client in clients:
            client.post("/v1/recall", json={"query": "warm up", "space": space}).raise_for_status()
        for question in questions:  # alternating, so noise falls on both alike
            for i, client in enumerate(clients):
                took, other = timed_recalls(client, [question], space)
                timings[i] += took
                outside += other
        cycle = iter(questions * 3)
        benchmark.pedantic(
            lambda: clients[1].post("/v1/recall", json={"query": next(cycle), "space": space}),
            rounds=len(questions),
            iterations=1,
        )
        for client in clients:
            client.close()
    finally:
        for server in servers:
            stop_server(server)
        cluster.stop()
        objectstore.stop()
        for name in s3.env:
            os.environ.pop(name, None)
    embedded_ms, remote_ms = percentiles_ms(timings[0]), percentiles_ms(timings[1])
    benchmark.extra_info.update(
        {
            "store_memories": store.size,
            "scope": label,
            "queries": len(questions),
            "embedded_p50_ms": embedded_ms["p50_ms"],
            "embedded_p95_ms": embedded_ms["p95_ms"],
            "remote_p50_ms": remote_ms["p50_ms"],
            "remote_p95_ms": remote_ms["p95_ms"],
            "cold_local_ms": cold_local,
            "warm_local_ms": warm_local,
            "cold_s3_ms": cold_s3,
            "warm_s3_ms": warm_s3,
            "answers_from_other_spaces": outside,
        }
    )
    assert outside == 0
