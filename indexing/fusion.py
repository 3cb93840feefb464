"""Hybrid relevance inside one partition: the cosine of each valid row fused with its BM25.

Both signals are computed inside the partition, over the rows valid now, after the caller's
reach and permissions have chosen it; nothing is compared across partitions but the fused
score itself, so the fused score must mean the same thing in every partition. Methods:

    anchored   cosine + w · BM25 / ideal: the ideal is the most a row could score for this
               query here, so the bonus lies in [0, w) whatever the partition's size; the
               score stays a cosine with a bounded lexical bonus (the default)
    z          z(cosine) + w · z(BM25), standardised over the partition's candidates: ranks
               well inside one partition, but a 3-row partition and a 10k-row one do not
               share a scale
    rrf        reciprocal-rank fusion, 1 / (k + rank): ranks only, no scale at all
    cosine     the vector signal alone (lexical weight 0)

Past the IVF threshold the cosine is known only for the probed rows; the best lexical rows the
probe missed are scored exactly and join the candidates, so a rare term still finds its row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from indexing.lexical import query_terms

if TYPE_CHECKING:
    from indexing.snapshot import Snapshot

LEXICAL_EXTRA = 256  # best lexical rows an IVF probe missed, scored exactly and added


@dataclass(frozen=True)
class Fusion:
    method: str = "anchored"
    weight: float = 0.3
    k: int = 60  # rrf only

    def __call__(self, cos: np.ndarray, lex: np.ndarray, ideal: float) -> np.ndarray:
        """Fused scores of candidates whose cosine is ``cos`` and BM25 ``lex``."""
        if self.method == "cosine" or not len(cos):
            return cos
        if self.method == "anchored":
            return cos + self.weight * lex / ideal if ideal > 0 else cos
        if self.method == "z":
            return _z(cos) + self.weight * _z(lex)
        if self.method == "rrf":
            # A row no query term matched is not in the lexical list: it gets no lexical share.
            return 1 / (self.k + _ranks(cos)) + np.where(lex > 0, self.weight / (self.k + _ranks(lex)), 0.0)
        raise ValueError(f"unknown fusion {self.method!r}")


DEFAULT = Fusion()


@dataclass(frozen=True)
class Fused:
    rows: np.ndarray
    scores: np.ndarray
    extra_scored: int  # cosines computed for lexical rows the probe missed
    postings: int  # lexical postings read


def fuse_lexical(
    snap: "Snapshot", query: np.ndarray, text: str, rows: np.ndarray, cos: np.ndarray, valid: np.ndarray,
    fusion: Fusion = DEFAULT,
) -> Fused:
    """Fuse the cosine ``cos`` of candidate ``rows`` (valid rows only) with BM25 of ``text``."""
    if fusion.method == "cosine":
        return Fused(rows, cos, 0, 0)
    lex = snap.lexicon().score(query_terms(text), valid)
    extra = 0
    if len(rows) < int(valid.sum()):  # an IVF probe: add the best lexical rows it missed
        seen = np.zeros(len(valid), dtype=bool)
        seen[rows] = True
        missed = np.flatnonzero((lex.scores > 0) & ~seen)
        if len(missed) > LEXICAL_EXTRA:
            missed = missed[np.argpartition(-lex.scores[missed], LEXICAL_EXTRA - 1)[:LEXICAL_EXTRA]]
        if len(missed):
            rows = np.concatenate([rows, missed])
            cos = np.concatenate([cos, snap.vectors[missed] @ query])
            extra = len(missed)
    return Fused(rows, fusion(cos, lex.scores[rows], lex.ideal), extra, lex.postings)


def _z(a: np.ndarray) -> np.ndarray:
    return (a - a.mean()) / (a.std() + 1e-9)


def _ranks(a: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(a), dtype=np.float64)
    ranks[np.argsort(-a, kind="stable")] = np.arange(len(a))
    return ranks
