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
from server.memories.data import loaded
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


@pytest.fixture(scope="module")
def dated():
    """A corpus written in runs that share one time (as an import's rows do), some memories
    replaced (superseded) or forgotten; the newest-first order is (created_at, rowid)."""
    from tests.conftest import MovableClock

    clock = MovableClock()
    with tempfile.TemporaryDirectory() as tmp:
        svc = open_service(settings_for(Path(tmp)), embedder=HashingEmbedder(), clock=clock)
        svc.operator.create_space("acme")
        caller = svc.caller("prop", space="acme")
        rng = random.Random(69)
        ids = []
        for i, data in enumerate(_corpus(seed=69) + _corpus(seed=70)):
            if rng.random() < 0.3:
                clock.advance(seconds=1)  # else the same time as the one before
            ids.append(svc.remember(caller, f"dated memory {i} of the corpus", data=data, dedupe=False).id)
        for old in rng.sample(ids, 10):
            svc.replace(caller, old, f"replacing {old}", data={"team": "rare", "k": 1})
        for gone in rng.sample(ids, 5):
            svc.forget(caller, gone)
        yield svc, caller
        svc.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(where=filters(), count=st.integers(min_value=1, max_value=12))
def test_a_filter_with_no_query_answers_the_newest_matches_in_order_whichever_read_answers(dated, where, count):
    """The walk, the index's newest by value (read a few rows a term at a time, so terms are cut
    mid-run of one time) and the set read whole each give the newest ``count`` valid matches, in
    the memories page's order."""
    from server.memories import newest
    from server.spaces import partition_key

    svc, caller = dated
    data_filter = parse_filter(where)
    rows = svc._parts.catalog.all(
        "SELECT id, data, created_at, rowid FROM memories WHERE partition = ? AND forgotten_at IS NULL "
        "AND superseded_by IS NULL",
        (partition_key("acme"),),
    )
    matching = [r for r in rows if data_filter.matches(loaded(r[1]))]
    wanted = [r[0] for r in sorted(matching, key=lambda r: (r[2], r[3]), reverse=True)][:count]
    answers = {}
    for name, walk, first, most in (("walk", 1000, 2, 1024), ("by value", 1, 2, 1024), ("set", 1, 2, 0)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(newest, "WALK", walk)
            patch.setattr(newest, "FIRST_READ", first)
            patch.setattr(newest, "MOST_READ", most)
            answers[name] = [m.id for m in svc.recall(caller, None, limit=count, where=where).memories]
    assert answers == {"walk": wanted, "by value": wanted, "set": wanted}
