"""Recall's filter as a property (issue 61): for any filter over a fixed corpus of memories with
varied data (strings with LIKE's wildcards and quotes, numbers, booleans, null, times, nested
objects, lists), a recall with the filter answers exactly the memories whose data the filter
matches, no more and none fewer, with a query or without: the catalog's narrowing and the
partitions' allow-sets never lose a row nor let one through."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.embedding.testing import HashingEmbedder
from server.facade import open_service
from server.memories.data_filter import parse_filter
from tests.catalogs import settings_for

VALUES = [
    "a%b",
    "a_b",
    "axb",
    "Rare",
    "rare",
    'quo"te',
    "back\\slash",
    "2026-03-01T10:00:00Z",
    "2026-03-01T11:00:00+01:00",
    "2026-04-01T00:00:00+00:00",
    0,
    1,
    1.0,
    2.5,
    -3,
    True,
    False,
    None,
    [1, 2],
    {"b": "rare"},
]
KEYS = ["k", "team", "a.b", "n"]
SIZE = 60


def _corpus(seed: int = 61) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(SIZE):
        data: dict = {"i": i}
        for key in rng.sample(KEYS[:2] + ["n", "a"], rng.randint(0, 3)):
            data[key] = {"b": rng.choice(VALUES)} if key == "a" else rng.choice(VALUES)
        out.append(data)
    return out


@pytest.fixture(scope="module")
def world():
    with tempfile.TemporaryDirectory() as tmp:
        svc = open_service(settings_for(Path(tmp)), embedder=HashingEmbedder())
        svc.operator.create_space("acme")
        caller = svc.caller("prop", space="acme")
        ids = {}
        for data in _corpus():
            memory = svc.remember(caller, f"memory number {data['i']} of the corpus", data=data, dedupe=False)
            ids[memory.id] = data
        yield svc, caller, ids
        svc.close()


OPS = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$exists"]
scalar = st.sampled_from(VALUES)


@st.composite
def filters(draw):
    chosen = {}
    for key in draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True)):
        op = draw(st.sampled_from(OPS + ["plain"]))
        if op == "plain":
            chosen[key] = draw(scalar)
        elif op == "$in":
            chosen[key] = {"$in": draw(st.lists(scalar, max_size=4))}
        elif op == "$exists":
            chosen[key] = {"$exists": draw(st.booleans())}
        elif op in ("$eq", "$ne"):
            chosen[key] = {op: draw(scalar)}
        else:
            bound = draw(
                st.sampled_from(
                    [v for v in VALUES if isinstance(v, int | float) and not isinstance(v, bool)]
                    + ["2026-03-01T10:30:00Z", "2026-03-01T09:00:00Z"]
                )
            )
            chosen[key] = {op: bound}
    return chosen


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(where=filters())
def test_a_filtered_recall_answers_exactly_the_matching_memories(world, where):
    svc, caller, ids = world
    wanted = {i for i, data in ids.items() if parse_filter(where).matches(data)}
    listed = {m.id for m in svc.recall(caller, None, limit=100, where=where).memories}
    ranked = {m.id for m in svc.recall(caller, "memory of the corpus", limit=100, where=where).memories}
    assert listed == wanted and ranked == wanted
