"""Synthetic multi-tenant stores: clustered 384-d vectors (never uniform noise), 1,000 spaces
with Zipf sizes, and callers that read 1 or 3 partitions.

Topics are shared across spaces — every space talks about deploys, auth, billing — so the
memories nearest a query are often in *other* spaces: exactly where post-filtering under-fills.
A probe space of fixed size (the "scope") is planted in every store, so latency can be compared
at a fixed scope size as the store grows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DIM = 384
TOPICS = 512
SPACES = 1000
EXPIRED_SHARE = 0.05  # rows whose validity has ended: every arm must skip them


@dataclass(frozen=True)
class Store:
    vectors: np.ndarray  # (n, DIM) float32, unit length
    space_of: np.ndarray  # (n,) int32 space index
    expired: np.ndarray  # (n,) bool
    spaces: list[str]  # space index → name
    scopes: dict[str, list[int]]  # caller label → space indices it reads

    @property
    def size(self) -> int:
        return len(self.vectors)

    def in_scope(self, label: str) -> np.ndarray:
        return np.isin(self.space_of, self.scopes[label]) & ~self.expired


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def zipf_sizes(total: int, count: int, exponent: float = 1.1) -> np.ndarray:
    weights = 1.0 / np.arange(1, count + 1) ** exponent
    sizes = np.maximum(1, np.floor(weights / weights.sum() * total)).astype(np.int64)
    sizes[0] = max(1, sizes[0] + total - sizes.sum())  # the largest space absorbs the rounding
    return sizes


def _memories(rng: np.random.Generator, topics: np.ndarray, n: int) -> np.ndarray:
    """Memories of one space, clustered at several scales as text embeddings are: a few shared
    topics, a space-specific accent, sub-topics inside each topic, then per-memory noise."""
    mine = topics[rng.choice(len(topics), size=8, replace=False)]
    accent = _unit(rng.normal(size=DIM)) * 0.35
    subtopics = max(4, n // 200)
    centres = _unit(
        mine[rng.integers(0, len(mine), size=subtopics)]
        + rng.normal(size=(subtopics, DIM)).astype(np.float32) * (0.5 / np.sqrt(DIM))
    )
    picks = centres[rng.integers(0, subtopics, size=n)]
    noise = rng.normal(size=(n, DIM)).astype(np.float32) * (0.35 / np.sqrt(DIM))
    return _unit(picks + accent + noise)


def build_store(
    total: int,
    *,
    scopes: dict[str, tuple[int, int]],
    seed: int = 7,
    space_count: int = SPACES,
    expired_share: float = EXPIRED_SHARE,
) -> Store:
    """A store of about ``total`` memories over ``space_count`` (1,000) Zipf-sized spaces plus planted scopes.

    ``scopes`` maps a caller label to (rows, partitions): a probe space of that many rows, split
    over the space and its children when partitions > 1 (a caller in the parent reads them all).
    """
    rng = np.random.default_rng(seed)
    topics = _unit(rng.normal(size=(TOPICS, DIM)))
    planted = sum(size for size, _ in scopes.values())
    sizes = zipf_sizes(max(total - planted, space_count), space_count)
    spaces = [f"t{i:04d}" for i in range(space_count)]
    blocks = [_memories(rng, topics, int(s)) for s in sizes]
    space_of = [np.full(int(s), i, dtype=np.int32) for i, s in enumerate(sizes)]
    callers: dict[str, list[int]] = {}
    for label, (size, parts) in scopes.items():
        shares = [size // parts] * parts
        shares[0] += size - sum(shares)
        names = [f"probe-{label}"] + [f"probe-{label}/child{j}" for j in range(1, parts)]
        callers[label] = []
        for name, share in zip(names, shares):
            callers[label].append(len(spaces))
            spaces.append(name)
            blocks.append(_memories(rng, topics, share))
            space_of.append(np.full(share, callers[label][-1], dtype=np.int32))
    vectors = np.concatenate(blocks)
    expired = rng.random(len(vectors)) < expired_share
    return Store(vectors, np.concatenate(space_of), expired, spaces, callers)


def queries_for(store: Store, label: str, count: int, seed: int = 11) -> np.ndarray:
    """Queries near in-scope memories (a caller asks about its own work), slightly perturbed."""
    rng = np.random.default_rng(seed)
    rows = np.flatnonzero(store.in_scope(label))
    picked = store.vectors[rng.choice(rows, size=count, replace=len(rows) < count)]
    return _unit(picked + rng.normal(size=picked.shape).astype(np.float32) * (0.4 / np.sqrt(DIM)))


def best_first(scores: np.ndarray, count: int) -> np.ndarray:
    """``np.argsort(-scores, kind="stable")[:count]`` without sorting every score: the ``count``-th
    best found by a partition, only the scores that reach it sorted (ties keep their order)."""
    if len(scores) <= count:
        return np.argsort(-scores, kind="stable")
    bar = np.partition(scores, len(scores) - count)[len(scores) - count]
    reach = np.flatnonzero(scores >= bar)
    return reach[np.argsort(-scores[reach], kind="stable")[:count]]


def _scores(vectors: np.ndarray, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The cosine of ``rows``; the whole matrix is not copied when every row is asked (1.5 GB at 1M)."""
    return vectors @ query if len(rows) == len(vectors) else vectors[rows] @ query


def exact_top_k(vectors: np.ndarray, mask: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    rows = np.flatnonzero(mask)
    return rows[best_first(_scores(vectors, rows, query), k)]


@dataclass(frozen=True)
class Truth:
    """The exact answer a recall should give, and how to judge another answer against it."""

    rows: np.ndarray  # the exact top k, best first
    query: np.ndarray  # the query the answer's scores are taken against
    candidates: np.ndarray  # bool: the rows that may count


def recall_truth(
    vectors: np.ndarray,
    space_of: np.ndarray,
    mask: np.ndarray,
    query: np.ndarray,
    k: int,
    pool: int,
    feedback_rows: int,
    feedback_weight: float,
) -> Truth:
    """What esfis's whole recall answers when no query term matches a stored text (so relevance is
    the cosine), computed exactly: each partition's best ``pool`` valid rows, the query moved
    towards the best ``feedback_rows`` of them all (``indexing.relevance.feedback``), those
    candidates rescored against it, the best ``k``. Partitions are the spaces of ``space_of``."""
    rows = np.flatnonzero(mask)
    cos = _scores(vectors, rows, query)
    pools = []
    partitions = space_of[rows]
    for space in np.unique(partitions):
        mine = np.flatnonzero(partitions == space)
        pools.append(mine[best_first(cos[mine], pool)])
    picked = np.concatenate(pools) if pools else np.zeros(0, dtype=np.int64)
    best = picked[best_first(cos[picked], feedback_rows)]
    moved = query + feedback_weight * vectors[rows[best]].mean(axis=0)
    moved = (moved / np.linalg.norm(moved)).astype(np.float32)
    candidates = np.zeros(len(vectors), dtype=bool)
    candidates[rows[picked]] = True
    scores = vectors[rows[picked]] @ moved
    return Truth(rows[picked][np.argsort(-scores)[:k]], moved, candidates)


def recall_at_k(
    vectors: np.ndarray, query: np.ndarray, rows: list[int], truth: np.ndarray, allowed: np.ndarray | None = None
) -> float:
    """Tie-aware recall@k, the one definition every benchmark uses (``targets.RECALL_DEFINITION``):
    the share of the k answers wanted (``truth``, the exact in-scope top k) whose exact score
    reaches the exact k-th best score. A row counts once; a row outside ``allowed`` (the caller's
    valid rows) never counts."""
    if len(truth) == 0:
        return 1.0
    bar = float(vectors[truth[-1]] @ query) - 1e-5
    distinct = [r for r in dict.fromkeys(int(r) for r in rows) if allowed is None or allowed[r]]
    good = sum(1 for r in distinct if float(vectors[r] @ query) >= bar)
    return min(good, len(truth)) / len(truth)
