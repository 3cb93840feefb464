"""What the run bookkeeping costs a recall: the same query, on the same store, through

- ``before``: the recall path without runs (scope, search, the delivery log), as it was;
- ``fresh-run``: ``Esfis.recall`` with each call a run of its own (HTTP without a header);
- ``same-run``: ``Esfis.recall`` with every call in one run that already carries labels.

The query vector is given, so the model's cost stays out and the difference is the seal check,
the carried labels and the trail step. Correctness asserted: the three arms answer the same
memories, and every recall through the façade leaves one trail step.
"""

from __future__ import annotations

import numpy as np
import pytest

import server.facade.recall as recalling
from benchmarks.conftest import FULL
from indexing.embedding.testing import HashingEmbedder
from server.facade import open_service
from server.settings import Settings

MEMORIES = 20_000 if FULL else 2_000
ROUNDS = 2_000 if FULL else 50


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    home = tmp_path_factory.mktemp("runs") / "home"
    service = open_service(Settings(home=home, model=None), embedder=HashingEmbedder(dimension=384))
    service.operator.create_space("acme")
    writer = service.caller("seeder", space="acme")
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(500)]
    texts = [" ".join(rng.choice(words, 8)) for _ in range(MEMORIES)]
    from server.memories.input import NewMemory, new_ids

    now = service.clock()
    vectors = service._parts.embedder.embed_documents(texts)
    service._parts.memories.write(
        [
            NewMemory(
                id=i, space="acme", text=t, vector=v, ai="seeder", created_at=now, valid_from=now, valid_until=None
            )
            for i, t, v in zip(new_ids(len(texts)), texts, vectors)
        ]
    )
    query = service._parts.embedder.embed_query("w1 w2 w3 w4")
    yield service, writer, query
    service.close()


def before(service, caller, query):
    """The recall path as it was before runs: scope, search, one transaction for the delivery."""
    scope = service.scope(caller)
    asked = recalling.ask(service.clock(), "q", limit=10, as_of=None, where=None)
    now = asked.now
    outcome = recalling.answer(service._parts.memories, scope, asked, lambda: query)  # the same relevance as recall
    with service._parts.catalog.transaction() as tx:
        service._parts.deliveries.record(
            tx, caller, query="q", limit=10, at=now, searched=list(scope.allowed), items=outcome.items, cut=outcome.cut
        )
    return [m.id for m in outcome.memories]


@pytest.mark.parametrize("arm", ["before", "fresh-run", "same-run"])
def test_recall_with_run_bookkeeping(benchmark, world, arm):
    service, _, query = world
    benchmark.group = "run-bookkeeping"
    if arm == "before":
        caller = service.caller("claude-code", space="acme")
        call = lambda: before(service, caller, query)  # noqa: E731
    elif arm == "fresh-run":
        call = lambda: [  # noqa: E731
            m.id for m in service.recall(service.caller("claude-code", space="acme"), "q", query_vector=query).memories
        ]
    else:
        caller = service.caller("claude-code", space="acme", run="long-session")
        call = lambda: [m.id for m in service.recall(caller, "q", query_vector=query).memories]  # noqa: E731
    expected = before(service, service.caller("claude-code", space="acme"), query)
    steps_before = service._parts.catalog.one("SELECT count(*) AS n FROM run_steps")["n"]
    calls = []

    def counted():
        calls.append(1)
        return call()

    answer = benchmark.pedantic(counted, rounds=ROUNDS, iterations=1, warmup_rounds=5)
    assert answer == expected
    steps = service._parts.catalog.one("SELECT count(*) AS n FROM run_steps")["n"] - steps_before
    assert steps == (0 if arm == "before" else len(calls))
    benchmark.extra_info.update({"arm": arm, "memories": MEMORIES, "rounds": ROUNDS})
