"""What recall's filter over data costs (issue 61): one space of N memories, every one carrying
data, imported; recalls through the façade (hashing embedder: the model's cost is not the
filter's) without a filter, with a selective one (1 % of the rows match, none of them near the
query), with a broad one (half match), and with a filter and no query (the newest that match).
The arms run in turn, each first as often as the others, so their ratios are the figures.
N is 20,000 in full mode, 2,000 in quick."""

from __future__ import annotations

import io
import json
import time

import numpy as np
import pytest

from benchmarks.arms import scratch
from benchmarks.conftest import FULL
from indexing.embedding.testing import HashingEmbedder
from server.facade import open_service
from server.settings import Settings

SIZE = 20_000 if FULL else 2_000
ROUNDS = 60 if FULL else 12
ARMS = {
    "none": ("how do we deploy the billing service?", None),
    "selective": ("how do we deploy the billing service?", {"team": "rare"}),
    "broad": ("how do we deploy the billing service?", {"n": {"$lt": SIZE // 2}}),
    "no_query": (None, {"team": "rare"}),
}


@pytest.fixture(scope="module")
def service():
    svc = open_service(Settings(home=scratch("esfis-filter-bench-"), model=None), embedder=HashingEmbedder())
    svc.operator.create_space("acme")
    lines = [
        {
            "text": f"deploy note {i}: the billing service deploys through pipeline {i % 97}"
            if i % 100
            else f"unrelated fact {i} about the office coffee machine",
            "space": "acme",
            "data": {"team": "rare" if i % 100 == 0 else "common", "n": i},
        }
        for i in range(SIZE)
    ]
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    report = svc.operator.import_jsonl(io.BytesIO(body))
    assert report.imported == SIZE, report.errors
    yield svc
    svc.close()


def test_recall_filter_cost(benchmark, service):
    caller = service.caller("bench", space="acme")
    times: dict[str, list[float]] = {arm: [] for arm in ARMS}
    names = list(ARMS)
    for i in range(ROUNDS):
        for arm in names[i % len(names) :] + names[: i % len(names)]:
            query, where = ARMS[arm]
            started = time.perf_counter()
            found = service.recall(caller, query, limit=10, where=where).memories
            times[arm].append(time.perf_counter() - started)
            assert len(found) == 10
            if arm in ("selective", "no_query"):
                assert all(m.data["team"] == "rare" for m in found)  # the filter ran before the limit
    p50 = {arm: float(np.percentile(t, 50) * 1000) for arm, t in times.items()}
    benchmark.extra_info.update({"memories": SIZE, **{f"{arm}_p50_ms": p for arm, p in p50.items()}})
    benchmark.pedantic(lambda: service.recall(caller, *ARMS["selective"][:1], where=ARMS["selective"][1]), rounds=3)
