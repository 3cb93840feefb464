"""``indexing.relevance.top.largest``: the k largest scores found through block maxima are the
ones a selection over the whole array finds, whatever the length, k, ties or the partial block."""

from __future__ import annotations

import numpy as np
import pytest

from indexing.relevance.top import BLOCK, BLOCKS_FROM, largest


def _kth_and_above(scores: np.ndarray, k: int) -> tuple[set[int], float]:
    """The indices strictly above the k-th largest score, and that score."""
    kth = np.sort(scores)[::-1][k - 1]
    return set(np.flatnonzero(scores > kth).tolist()), float(kth)


@pytest.mark.parametrize("n", [1, 9, 10, 11, BLOCKS_FROM - 1, BLOCKS_FROM, BLOCKS_FROM + 1, 10_000, 10_007, 65_536 + 5])
@pytest.mark.parametrize("k", [1, 10, 37, 2_000])  # 2,000: more than the blocks of most lengths
def test_the_largest_are_those_a_full_selection_finds(n, k):
    rng = np.random.default_rng(n * 100 + k)
    scores = rng.standard_normal(n).astype(np.float32)
    found = largest(scores, k)
    assert len(found) == min(k, n) and len(set(found.tolist())) == len(found)
    if k >= n:
        assert sorted(found.tolist()) == list(range(n))
        return
    assert set(found.tolist()) == set(np.argpartition(-scores, k - 1)[:k].tolist())


def test_the_best_rows_in_the_last_partial_block_are_found():
    scores = np.zeros(BLOCKS_FROM + BLOCK // 2, dtype=np.float32)
    scores[-3:] = [3.0, 2.0, 1.0]  # only in the block that does not fill
    assert set(largest(scores, 3).tolist()) == {len(scores) - 3, len(scores) - 2, len(scores) - 1}


def test_ties_and_minus_infinity_keep_the_count_and_the_values():
    rng = np.random.default_rng(3)
    scores = np.round(rng.standard_normal(20_000), 1).astype(np.float32)  # many equal scores
    scores[::7] = -np.inf
    for k in (1, 10, 100):
        found = largest(scores, k)
        above, kth = _kth_and_above(scores, k)
        assert len(found) == k
        assert above <= set(found.tolist())  # every score above the k-th is in
        assert np.all(scores[found] >= kth)  # and the rest equal it (which of them: arbitrary)


def test_many_equal_block_maxima_still_give_exactly_k():
    scores = np.ones(50_000, dtype=np.float32)
    found = largest(scores, 10)
    assert len(found) == 10 and len(set(found.tolist())) == 10


def test_nan_scores_are_taken_last_as_a_full_selection_takes_them():
    rng = np.random.default_rng(5)
    scores = rng.standard_normal(10_000).astype(np.float32)
    scores[::3] = np.nan  # a block's maximum is then NaN: no block would pass the threshold
    found = largest(scores, 10)
    assert set(found.tolist()) == set(np.argpartition(-scores, 9)[:10].tolist())
    assert not np.isnan(scores[found]).any()
    few = rng.standard_normal(10_000).astype(np.float32)
    few[[100, 5000]] = np.nan
    few[101] = 10.0  # the best score, in a block whose maximum is NaN
    assert 101 in largest(few, 10).tolist()
    assert set(largest(few, 10).tolist()) == set(np.argpartition(-few, 9)[:10].tolist())
