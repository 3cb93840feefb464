"""The ``k`` best scores of a long array, without sorting or selecting over all of it.

``np.argpartition`` moves indices through the whole array: about 100 µs for 10,000 scores on
the machines we measure on, as long as the matrix product that made them takes by half. The k
best scores lie in the blocks whose maximum is among the k largest maxima: if ``t`` is the k-th
largest block maximum, k scores are at least ``t``, so no score of a block whose maximum is
below ``t`` can be among the best k. So the array is cut into blocks, their maxima are taken
(one vectorised reduction), and only the blocks at or above ``t`` are searched: about k
blocks, whatever the array's length. Exact: it returns what ``argpartition`` returns, up to
the order and to which of equal scores at the boundary (ties are as arbitrary there).
"""

from __future__ import annotations

import numpy as np

BLOCK = 64  # scores a block: k blocks of it are what is left to select from
BLOCKS_FROM = 4096  # below this many scores, argpartition over all of them costs less


def largest(scores: np.ndarray, k: int) -> np.ndarray:
    """The indices of the ``k`` largest of ``scores`` (1-D; NaN taken last), in no order; every index
    when there are no more than ``k``."""
    n = len(scores)
    if k >= n:
        return np.arange(n)
    if n < BLOCKS_FROM or k >= n // BLOCK:  # small, or a k that needs most of the blocks anyway
        return np.argpartition(-scores, k - 1)[:k]
    whole = n - n % BLOCK
    maxima = scores[:whole].reshape(-1, BLOCK).max(axis=1)
    if np.isnan(maxima).any():  # a block holding NaN has a NaN maximum: left to argpartition
        return np.argpartition(-scores, k - 1)[:k]
    threshold = np.partition(maxima, len(maxima) - k)[len(maxima) - k]
    blocks = np.flatnonzero(maxima >= threshold)
    candidates = (blocks[:, None] * BLOCK + np.arange(BLOCK)).ravel()
    if whole < n:  # the last, partial block: always a candidate
        candidates = np.concatenate([candidates, np.arange(whole, n)])
    return candidates[np.argpartition(-scores[candidates], k - 1)[:k]]
