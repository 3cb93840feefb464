"""An inverted-file (IVF) index over one partition's vectors, in numpy.

Small partitions are scanned exactly. Past ``ANN_THRESHOLD`` rows a partition gets this index, built
when data is written (``indexing/partitions/image.py``): k-means centroids, and the vectors stored
grouped by nearest centroid, so each list is one contiguous block of the image that a single
matrix-vector product scores. A query scores the centroids, then the ``nprobe`` nearest lists,
exactly. Rows written after the build sit in a tail that every query scans exactly, so nothing is
missed between builds.

Why 50,000: below it an exact numpy scan stays within single-digit milliseconds on these
machines (the benchmark report measures it), and exact search gives recall 1.0, which scopes
up to 50k must keep.

The number of lists probed is calibrated at build time (``calibrate``) to reach recall@10 ≥ 0.97
for queries made from the partition's own rows, moved away from them to the distance a real
question stands from its best match (stored rows themselves, or near copies of them, are easy
queries: calibrating on them under-probes real questions).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ANN_THRESHOLD = 50_000
KMEANS_ITERATIONS = 8
TRAINING_POINTS_PER_LIST = 48
CROWDED_LIST = 2.0  # a list past this many times the mean size is split at training
SPLIT_ROUNDS = 3
TARGET_RECALL = 0.97  # recall@10 the probe count is calibrated to, on the partition's own rows
CALIBRATION_QUERIES = 128
QUERY_COSINE = 0.6  # how close a calibration query is to the row it was made from


def list_count_for(rows: int) -> int:
    """About 2·√rows lists: ~1,000 vectors a list at 250k, ~500 at 60k."""
    return int(max(64, min(4096, round(2 * np.sqrt(rows)))))


def probe_steps(lists: int) -> list[int]:
    """Probe counts tried by calibration: 8, 12, 16, 24, 32, … up to a quarter of the lists."""
    steps, n = [], 8
    while n < max(lists // 4, 9):
        steps.append(n)
        n = int(n * 1.5)
    return steps + [max(lists // 4, 8)]


def train(sample: np.ndarray, lists: int, seed: int = 0) -> np.ndarray:
    """About ``lists`` k-means centroids (unit length), trained on a sample of the rows; a list
    that would hold more than ``CROWDED_LIST`` times the mean is split (``_split_crowded``), so
    there may be more."""
    rng = np.random.default_rng(seed)
    sample = np.ascontiguousarray(sample)
    centroids = _kmeans(sample, lists, rng, KMEANS_ITERATIONS)
    return _split_crowded(sample, centroids, rng)


def _kmeans(points: np.ndarray, count: int, rng: np.random.Generator, iterations: int) -> np.ndarray:
    centroids = points[rng.choice(len(points), size=count, replace=False)].copy()
    for _ in range(iterations):
        assign = nearest(points, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assign, points)
        counts = np.bincount(assign, minlength=count).astype(np.float32)
        empty = counts == 0
        sums[~empty] /= counts[~empty, None]
        sums[empty] = points[rng.choice(len(points), size=int(empty.sum()))]
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = (sums / np.maximum(norms, 1e-12)).astype(np.float32)
    return centroids


def _split_crowded(sample: np.ndarray, centroids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each list holding more than ``CROWDED_LIST`` times the mean, split by a k-means of its own
    rows into parts of about the mean. Why: questions come from where rows are dense, so they
    probe the crowded lists, and the rows a query scores grow with the spread of the lists'
    sizes (Σ size² / Σ size), not with their mean. K-means on clustered text leaves lists ten
    times the mean; split, a query scores a fraction of the rows for the same recall (the
    probe count is calibrated after)."""
    mean = len(sample) / len(centroids)
    for _ in range(SPLIT_ROUNDS):  # a part may itself be crowded once every row is reassigned
        assign = nearest(sample, centroids)
        sizes = np.bincount(assign, minlength=len(centroids))
        extra = []
        for crowded in np.flatnonzero(sizes > CROWDED_LIST * mean):
            rows = sample[assign == crowded]
            count = min(len(rows), int(np.ceil(len(rows) / mean)))
            parts = _distinct(_kmeans(rows, count, rng, KMEANS_ITERATIONS))
            if len(parts) > 1:
                centroids[crowded] = parts[0]
                extra.append(parts[1:])
        if not extra:
            break
        centroids = np.concatenate([centroids, *extra])
    return _distinct(centroids)


def _distinct(centroids: np.ndarray) -> np.ndarray:
    """Each centroid once, in order. One text stored many times is one point: a list of its
    copies cannot be split, and k-means would give it several equal centroids."""
    _, first = np.unique(centroids, axis=0, return_index=True)
    return centroids[np.sort(first)]


def training_sample(rows: int, seed: int = 0) -> np.ndarray:
    """Which rows train the centroids: ``TRAINING_POINTS_PER_LIST`` a list, sorted."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(rows, size=min(rows, list_count_for(rows) * TRAINING_POINTS_PER_LIST), replace=False))


def calibration_queries(rows: np.ndarray, seed: int = 0) -> np.ndarray:
    """Queries made from ``rows``: each moved in a random direction until its cosine to its row
    is ``QUERY_COSINE``, as far as a real question typically stands from the memory it finds."""
    rng = np.random.default_rng(seed)
    rows = np.asarray(rows, dtype=np.float32)
    noise = rng.normal(size=rows.shape).astype(np.float32)
    noise -= np.sum(noise * rows, axis=1, keepdims=True) * rows  # orthogonal to the row
    noise /= np.maximum(np.linalg.norm(noise, axis=1, keepdims=True), 1e-12)
    queries = rows + np.sqrt(1 / QUERY_COSINE**2 - 1) * noise
    return (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)


def nearest(points: np.ndarray, centroids: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """The list of each point: its nearest centroid."""
    out = np.empty(points.shape[0], dtype=np.int32)
    for start in range(0, points.shape[0], chunk):
        out[start : start + chunk] = np.argmax(points[start : start + chunk] @ centroids.T, axis=1)
    return out


@dataclass
class IvfLists:
    """Centroids and list boundaries over vectors stored grouped by list: list ``l`` is rows
    ``offsets[l]:offsets[l+1]`` of the grouped matrix."""

    centroids: np.ndarray  # (lists, dim)
    offsets: np.ndarray  # (lists + 1,) int64
    nprobe: int

    @classmethod
    def of(cls, centroids: np.ndarray, assign: np.ndarray) -> tuple[IvfLists, np.ndarray]:
        """The lists for rows assigned to ``centroids``, and the order that groups the rows."""
        order = np.argsort(assign, kind="stable")
        offsets = np.zeros(len(centroids) + 1, dtype=np.int64)
        np.cumsum(np.bincount(assign, minlength=len(centroids)), out=offsets[1:])
        return cls(centroids, offsets, probe_steps(len(centroids))[-1]), order

    def list_of(self, rows: np.ndarray) -> np.ndarray:
        """The list each grouped row number belongs to."""
        return (np.searchsorted(self.offsets, rows, side="right") - 1).astype(np.int32)

    def candidates(self, grouped: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(grouped row numbers, scores) of every vector in the ``nprobe`` lists nearest the query."""
        centroid_scores = self.centroids @ query
        probe = np.argpartition(-centroid_scores, min(self.nprobe, len(centroid_scores)) - 1)[: self.nprobe]
        rows: list[np.ndarray] = []
        scores: list[np.ndarray] = []
        for l in probe:
            start, end = int(self.offsets[l]), int(self.offsets[l + 1])
            if start == end:
                continue
            rows.append(np.arange(start, end))
            scores.append(grouped[start:end] @ query)
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        return np.concatenate(rows), np.concatenate(scores)

    def calibrate(self, grouped: np.ndarray, seed: int = 0) -> None:
        """Calibrate on queries made from rows of ``grouped`` chosen at random."""
        rng = np.random.default_rng(seed)
        n = grouped.shape[0]
        queries = calibration_queries(grouped[rng.choice(n, size=min(CALIBRATION_QUERIES, n), replace=False)], seed)
        own = np.full(len(queries), -1)
        top = TopTen(queries, own)
        top.add(0, grouped)
        self.calibrate_with(grouped, queries, own=own, truth=top.sets())

    def calibrate_with(self, grouped, queries: np.ndarray, *, own: np.ndarray, truth: list[set[int]]) -> None:
        """Pick the fewest probes that reach ``TARGET_RECALL`` on this partition's own data.

        How many lists a query must visit depends on how the data clusters, which no constant
        knows: ``queries`` (made from stored rows, ``calibration_queries``; ``own`` names a row
        to leave out of each one's answers, or -1), ``truth`` their exact top 10, and the probe
        count grows until recall is met.
        ``grouped`` only needs slicing, so a build can read lists from its file as it goes.
        """
        for nprobe in probe_steps(len(self.centroids)):
            self.nprobe = nprobe
            found = 0
            for query, q, expected in zip(queries, own, truth):
                rows, scores = self.candidates(grouped, query)
                scores = np.where(rows == q, -np.inf, scores)
                top = rows[np.argpartition(-scores, min(10, len(scores) - 1))[:10]]
                found += len(expected & set(top.tolist()))
            if found / (10 * len(queries)) >= TARGET_RECALL:
                return


class TopTen:
    """The exact top 10 rows of each query (its own row excluded), fed in batches of rows, so a
    build never holds the whole matrix at once."""

    def __init__(self, queries: np.ndarray, own: np.ndarray) -> None:
        self.queries, self.own = queries, own
        self.rows = np.full((len(queries), 10), -1, dtype=np.int64)
        self.scores = np.full((len(queries), 10), -np.inf, dtype=np.float32)

    def add(self, first: int, vectors: np.ndarray) -> None:
        scores = self.queries @ np.asarray(vectors).T
        rows = np.arange(first, first + scores.shape[1])
        scores[self.own[:, None] == rows[None, :]] = -np.inf
        merged = np.concatenate([self.scores, scores], axis=1)
        merged_rows = np.concatenate([self.rows, np.broadcast_to(rows, scores.shape)], axis=1)
        keep = np.argpartition(-merged, 9, axis=1)[:, :10]
        self.scores = np.take_along_axis(merged, keep, axis=1)
        self.rows = np.take_along_axis(merged_rows, keep, axis=1)

    def sets(self) -> list[set[int]]:
        return [set(r[r >= 0].tolist()) for r in self.rows]
