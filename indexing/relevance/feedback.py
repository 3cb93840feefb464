"""Pseudo-relevance feedback over a recall's own candidates.

After each reached partition has ranked its valid rows (cosine fused with BM25), the best
``FEEDBACK_ROWS`` candidates of the whole recall are taken as relevant: the query vector moves
towards their mean (Rocchio, ``q + FEEDBACK_WEIGHT · mean``, renormalised), and every candidate is
scored again by its cosine to the moved query, its lexical bonus kept. A question phrased
unlike its answer ("what did I buy?") borrows the words of the first answer found, and the
other turns about the same thing climb into the top ten.

Only the candidates the partitions already returned are rescored, all of them from partitions
the caller reaches, valid now: feedback reorders, it never reaches a row the first pass did
not. One moved query serves every partition, so scores still compare across partitions.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from indexing.rows import PartitionResult

FEEDBACK_ROWS = 2  # the recall's best candidates taken as relevant
FEEDBACK_WEIGHT = 0.5  # how far the query moves towards their mean


def with_feedback(
    results: list[PartitionResult], query: np.ndarray, *, rows: int = FEEDBACK_ROWS, weight: float = FEEDBACK_WEIGHT
) -> list[PartitionResult]:
    """Each result's candidates scored again against the moved query, best first."""
    if not any(len(r) for r in results) or any(len(r) and r.cosines is None for r in results):
        return results
    vectors = [r.vectors() if len(r) else None for r in results]
    scores = np.concatenate([r.scores for r in results])
    source = np.repeat(np.arange(len(results)), [len(r) for r in results])
    rank = np.concatenate([np.arange(len(r)) for r in results])
    best = np.argsort(-scores, kind="stable")[:rows]  # the order merge_best keeps
    relevant = np.stack([vectors[source[b]][rank[b]] for b in best])
    moved = np.asarray(query, dtype=np.float32) + weight * relevant.mean(axis=0)
    norm = float(np.linalg.norm(moved))
    if norm <= 0:
        return results
    moved /= norm
    out = []
    for result, these in zip(results, vectors):
        if these is None:
            out.append(result)
            continue
        cosines = these @ moved
        fused = cosines + (result.scores - result.cosines)  # the lexical bonus, unchanged
        order = np.argsort(-fused, kind="stable")
        out.append(replace(result, rows=result.rows[order], scores=fused[order], cosines=cosines[order]))
    return out
