"""Pseudo-relevance feedback: the recall's candidates scored again against the query moved
towards the best two; it reorders what the partitions returned and nothing else."""

from __future__ import annotations

import numpy as np

from indexing.partitions.partition import LivePartition
from indexing.relevance.feedback import FEEDBACK_WEIGHT, with_feedback
from indexing.rows import OPEN_END, RowBatch, merge_best

DIM = 16


def unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def snapshot(rows: dict[str, np.ndarray], texts: dict[str, str] | None = None) -> LivePartition:
    snap = LivePartition(dimension=DIM)
    ids = list(rows)
    n = len(ids)
    snap.append(
        RowBatch(
            ids=ids,
            texts=[(texts or {}).get(i, "plain words") for i in ids],
            vectors=np.stack([rows[i] for i in ids]),
            created_at=np.zeros(n, dtype=np.int64),
            valid_from=np.zeros(n, dtype=np.int64),
            valid_until=np.full(n, OPEN_END, dtype=np.int64),
        )
    )
    return snap


def axis(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1
    return v


def test_a_row_like_the_best_answer_climbs_past_a_row_only_like_the_question():
    query = unit(axis(0))
    answer = unit(axis(0) * 0.9 + axis(1) * 0.45)  # the best match
    sibling = unit(axis(0) * 0.55 + axis(1) * 0.83)  # phrased like the answer, less like the question
    decoy = unit(axis(0) * 0.62 + axis(2) * 0.78)  # somewhat like the question, unlike the answer
    snap = snapshot({"answer": answer, "second": unit(answer + 0.05 * axis(3)), "sibling": sibling, "decoy": decoy})
    before = snap.search(query, 10, now=1, text="question")
    assert [h.id for h in before.hits][-2:] == ["decoy", "sibling"]
    after = with_feedback([before], query)[0]
    order = [h.id for h in after.hits]
    assert order.index("sibling") < order.index("decoy")
    moved = unit(query + FEEDBACK_WEIGHT * (answer + unit(answer + 0.05 * axis(3))) / 2)
    assert np.isclose(after.scores[order.index("sibling")], float(sibling @ moved), atol=1e-5)


def test_feedback_rescores_only_the_candidates_and_keeps_each_lexical_bonus():
    rng = np.random.default_rng(0)
    vectors = {f"r{i}": unit(rng.normal(size=DIM)) for i in range(60)}
    texts = {"r7": "the quokka lives here", "r30": "quokka again"}
    snap = snapshot(vectors, texts)
    query = unit(rng.normal(size=DIM))
    before = snap.search(query, 20, now=1, text="quokka")
    after = with_feedback([before], query)[0]
    assert set(after.rows.tolist()) == set(before.rows.tolist()) and len(after) == 20
    bonus_before = dict(zip(before.rows.tolist(), (before.scores - before.cosines).tolist()))
    bonus_after = dict(zip(after.rows.tolist(), (after.scores - after.cosines).tolist()))
    assert all(np.isclose(bonus_after[r], bonus_before[r], atol=1e-5) for r in bonus_before)
    assert bonus_before[snap.row_of["r7"]] > 0  # the lexical signal did take part
    assert list(after.scores) == sorted(after.scores, reverse=True)


def test_one_moved_query_serves_every_partition_so_their_scores_still_compare():
    rng = np.random.default_rng(1)
    shared = unit(rng.normal(size=DIM))
    first = snapshot({"a": shared, **{f"a{i}": unit(rng.normal(size=DIM)) for i in range(5)}})
    second = snapshot({"b": shared, **{f"b{i}": unit(rng.normal(size=DIM)) for i in range(9)}})
    query = unit(shared + 0.8 * rng.normal(size=DIM))
    results = with_feedback(
        [first.search(query, 10, now=1, text="x"), second.search(query, 10, now=1, text="x")], query
    )
    same = [h for _, h in merge_best(results, 20) if h.id in ("a", "b")]
    assert len(same) == 2 and np.isclose(same[0].score, same[1].score)  # one vector, one score
