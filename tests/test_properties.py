"""Invariants as property tests: recall never returns a memory outside the caller's reach, and
gives at most ``limit`` results, best first. Hashing embedder: these test the logic."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.embedding.testing import HashingEmbedder
from server.facade import EVERYWHERE, open_service
from server.spaces import contains
from tests.catalogs import settings_for

SPACES = ["acme", "acme/platform", "acme/platform/api", "acme/finance", "acme2", "acme-corp", "globex", "globex/hr"]
WORDS = ["auth", "login", "deploy", "database", "cache", "queue", "billing", "oncall", "budget", "release"]

memory = st.tuples(st.sampled_from([None, *SPACES]), st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
caller_space = st.sampled_from([None, *SPACES])


def reach(space: str | None) -> set[str | None]:
    return {None} | ({s for s in SPACES if contains(space, s)} if space else set())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    memories=st.lists(memory, min_size=1, max_size=25),
    where=caller_space,
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    limit=st.integers(min_value=1, max_value=12),
    denied=st.sets(st.sampled_from(SPACES), max_size=2),
)
def test_recall_stays_in_reach_at_most_limit_best_first(memories, where, query, limit, denied):
    with tempfile.TemporaryDirectory() as tmp:
        svc = open_service(settings_for(Path(tmp)), embedder=HashingEmbedder())
        for name in SPACES:
            svc.operator.create_space(name)
        for space in denied:
            svc.operator.deny("agent", EVERYWHERE if space is None else space)
        for space, words in memories:
            svc.remember(svc.caller("writer", space=space), " ".join(words), personal=space is None)
        result = svc.recall(svc.caller("agent", space=where), " ".join(query), limit=limit)
        allowed = {s for s in reach(where) if not any(s is not None and contains(d, s) for d in denied)}
        assert {m.space for m in result.memories} <= allowed
        assert len(result.memories) <= limit
        scores = [m.score for m in result.memories]
        assert scores == sorted(scores, reverse=True)
        # One fact once: the same words (the hashing embedder's same vector) are one fact, kept
        # once in a space by remember and once in a recall by its fold (server.memories.duplicates).
        in_scope = len({frozenset(words) for space, words in memories if space in allowed})
        assert len(result.memories) == min(limit, in_scope)
        svc.close()
