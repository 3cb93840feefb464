"""The recall path's own cost, embedding left out: ``Esfis.recall`` with the query vector given,
on a store of many spaces (1,000 spaces in full mode), from a caller standing in one of them.

What is timed is everything between the vector and the answer: the caller's scope (space →
permissions), the run's seal, the search of each reached partition, the catalog's last word on
validity and labels, and the one transaction that records the delivery and the run's step. Each
call is a fresh caller, a run of its own, as an HTTP request without a run header is.

Target (issue 13): HTTP recall p50 ≤ query embedding + 2.5 ms and p95 ≤ 12 ms at 1M memories
over 1,000 spaces; this measures the core's share of it. Correctness asserted: every answer
comes from the caller's partitions, and every recall leaves one delivery.
"""

from __future__ import annotations

import time
from datetime import timedelta

import numpy as np
import pytest

from benchmarks.arms import scratch
from benchmarks.conftest import FULL
from indexing.embedding.testing import HashingEmbedder
from server.facade import open_service
from server.memories.input import NewMemory, new_ids
from server.settings import Settings

SPACES = 1000 if FULL else 200
PER_SPACE = 1000 if FULL else 50
ROUNDS = 2000 if FULL else 200
DIM = 384
CALLER_SPACE = "s0001"


@pytest.fixture(scope="module")
def world():
    service = open_service(
        Settings(home=scratch("esfis-bench-recall-") / "home", model=None), embedder=HashingEmbedder(dimension=DIM)
    )
    rng = np.random.default_rng(13)
    since = service.clock() - timedelta(days=1)
    for s in range(SPACES):
        name = f"s{s:04d}"
        service._parts.registry.add_named(name)
        vectors = rng.normal(size=(PER_SPACE, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        service._parts.memories.write(
            [
                NewMemory(
                    id=i,
                    space=name,
                    text=f"memory {j} of {name}",
                    vector=v,
                    ai="seeder",
                    created_at=since,
                    valid_from=since,
                    valid_until=None,
                )
                for j, (i, v) in enumerate(zip(new_ids(PER_SPACE), vectors))
            ]
        )
    query = rng.normal(size=DIM).astype(np.float32)
    yield service, query / np.linalg.norm(query)
    service.close()


def test_recall_path_without_embedding(benchmark, world):
    service, query = world
    benchmark.group = "recall-overhead"
    deliveries_before = service._parts.catalog.one("SELECT count(*) AS n FROM deliveries")["n"]
    answers: list[list] = []
    took: list[float] = []  # timed here too: with --benchmark-disable (the test run) there are no stats

    def recall():
        started = time.perf_counter()
        caller = service.caller("bench", space=CALLER_SPACE)
        answers.append(service.recall(caller, "what did we decide", query_vector=query).memories)
        took.append(time.perf_counter() - started)

    benchmark.pedantic(recall, rounds=ROUNDS, iterations=1, warmup_rounds=20)
    assert answers and all(len(a) == 10 for a in answers)
    assert {m.space for a in answers for m in a} == {CALLER_SPACE}
    recorded = service._parts.catalog.one("SELECT count(*) AS n FROM deliveries")["n"] - deliveries_before
    assert recorded == len(answers)
    data = took[-ROUNDS:]
    benchmark.extra_info.update(
        {
            "spaces": SPACES,
            "memories": SPACES * PER_SPACE,
            "rounds": ROUNDS,
            "p50_ms": float(np.percentile(data, 50) * 1000),
            "p95_ms": float(np.percentile(data, 95) * 1000),
        }
    )
