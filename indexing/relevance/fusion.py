"""Hybrid relevance inside one partition: the cosine of each valid row fused with its BM25.

Both signals are computed inside the partition, over the rows valid now, after the caller's
reach and permissions have chosen it; nothing is compared across partitions but the fused
score itself, so the fused score must mean the same thing in every partition. Methods:

    scaled     cosine + w · σ(cosine) · BM25 / unit(BM25), the deviations taken over the
               partition's valid rows (the default). Its score is a cosine plus a lexical
               bonus in the partition's own units of cosine spread, so a row no term matched
               keeps its plain cosine and scores compare across partitions as cosines do.
               BM25's unit is its deviation, or its mean where that is larger (``lexical_unit``):
               where most rows score about alike (a term every memory of a space holds) the
               deviation nears zero while the scores do not, and the bonus grew without bound
               (30,000 above the cosine), lifting that whole partition above every other in a
               merge. While at most half the rows score (BM25's usual case) the deviation is
               the larger, and it ranks exactly as z does inside a partition
    z          z(cosine) + w · z(BM25), standardised over the partition's candidates: the same
               ranking inside a partition, but a 3-row partition and a 10k-row one do not
               share a scale, and merged recalls lose evidence (benchmarks/evidence.py, split)
    anchored   cosine + w · BM25 / ideal: the ideal is the most a row could score for this
               query here, so the bonus lies in [0, w) whatever the partition's size
    rrf        reciprocal-rank fusion, 1 / (k + rank): ranks only, no scale at all
    cosine     the vector signal alone (lexical weight 0)

Past the IVF threshold the cosine is known only for the probed rows; the best lexical rows the
probe missed are scored exactly and join the candidates, so a rare term still finds its row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from indexing.relevance.lexical import LexicalIndex, LexicalScores

LEXICAL_EXTRA = 256  # best lexical rows an IVF probe missed, scored exactly and added
SPREAD_SAMPLE = 2048  # rows sampled for the cosine's spread past the IVF threshold


class RowVectors(Protocol):
    """A partition's vectors in its one numbering, as fusion reads them: the rows it asks for, and
    an even sample of the valid rows for the cosine's spread (an image keeps one contiguous: a
    stride through its mapped vectors would page the file in). ``partitions.numbering.NumberedRows`` is one."""

    def __getitem__(self, rows: np.ndarray, /) -> np.ndarray: ...

    def spread_sample(self, valid: np.ndarray, /) -> np.ndarray: ...


@dataclass(frozen=True)
class Fusion:
    method: str = "scaled"
    weight: float = 0.5
    k: int = 60  # rrf only

    def __call__(
        self,
        cos: np.ndarray,
        lex: np.ndarray,
        *,
        ideal: float,
        spread: float | None = None,
        lex_spread: float | None = None,
    ) -> np.ndarray:
        """Fused scores of candidates whose cosine is ``cos`` and BM25 ``lex``; ``spread`` is the
        standard deviation of the cosine over the partition's valid rows (default: of ``cos``),
        ``lex_spread`` BM25's over the candidates (default: of ``lex``)."""
        if self.method == "cosine" or not len(cos):
            return cos
        if self.method == "anchored":
            return cos + self.weight * lex / ideal if ideal > 0 else cos
        if self.method == "scaled":
            sigma = lexical_unit(lex) if lex_spread is None else lex_spread
            if sigma <= 0:
                return cos
            return cos + self.weight * (cos.std() if spread is None else spread) * lex / sigma
        if self.method == "z":
            return _z(cos) + self.weight * _z(lex)
        if self.method == "rrf":
            # A row no query term matched is not in the lexical list: it gets no lexical share.
            return 1 / (self.k + _ranks(cos)) + np.where(lex > 0, self.weight / (self.k + _ranks(lex)), 0.0)
        raise ValueError(f"unknown fusion {self.method!r}")


def lexical_unit(lex: np.ndarray) -> float:
    """BM25's unit in ``scaled``: its standard deviation over the candidates, or its mean where
    that is larger (most of them scoring about alike), so no bonus exceeds w · σ(cosine) times
    the best BM25 over the mean."""
    return float(max(lex.std(), lex.mean())) if len(lex) else 0.0


DEFAULT = Fusion("scaled", 0.5)  # chosen on LongMemEval_S: docs/recall.md, "Hybrid recall"


@dataclass(frozen=True)
class Fused:
    rows: np.ndarray
    scores: np.ndarray
    extra_scored: int  # cosines computed for lexical rows the probe missed
    postings: int  # lexical postings read
    cosines: np.ndarray | None = None  # each row's plain cosine (None: the scores are cosines)
    units: tuple[float, float] | None = None  # scaled's σ(cosine) and σ(BM25), as they were taken
    lexical: LexicalScores | None = None  # BM25 of every row (0 where not valid), for rows scored in these units

    def narrowed(self, rows: np.ndarray, cos: np.ndarray, fusion: Fusion = DEFAULT) -> np.ndarray:
        """Scores of other valid ``rows`` (cosines ``cos``) in this fusion's units and BM25: what
        each would score among these candidates (a narrowed search's rows, ``partitions.allowed``)."""
        if self.lexical is None or self.units is None:
            return cos
        lex = self.lexical.scores[rows]
        return fusion(cos, lex, ideal=self.lexical.ideal, spread=self.units[0], lex_spread=self.units[1])


def fuse_lexical(
    index: LexicalIndex,
    vectors: RowVectors | np.ndarray,
    query: np.ndarray,
    *,
    text: str,
    rows: np.ndarray,
    cos: np.ndarray,
    valid: np.ndarray,
    fusion: Fusion = DEFAULT,
) -> Fused:
    """Fuse the cosine ``cos`` of candidate ``rows`` (valid rows only) with BM25 of ``text``;
    ``index`` and ``vectors`` are the partition's (a plain matrix will do: the spread is then
    taken from a stride through it)."""
    if fusion.method == "cosine":
        return Fused(rows, cos, 0, 0, cos)
    lex = index.score(index.query_terms(text), valid)
    extra, spread = 0, None
    if len(rows) < int(valid.sum()):  # an IVF probe: add the best lexical rows it missed
        spread = cosine_spread(vectors, query, valid)
        seen = np.zeros(len(valid), dtype=bool)
        seen[rows] = True
        missed = np.flatnonzero((lex.scores > 0) & ~seen)
        if len(missed) > LEXICAL_EXTRA:
            missed = missed[np.argpartition(-lex.scores[missed], LEXICAL_EXTRA - 1)[:LEXICAL_EXTRA]]
        if len(missed):
            rows = np.concatenate([rows, missed])
            cos = np.concatenate([cos, vectors[missed] @ query])
            extra = len(missed)
    if fusion.method == "scaled" and spread is None and len(cos):
        spread = float(cos.std())
    lexical = lex.scores[rows]
    taken = (spread, lexical_unit(lexical)) if spread is not None and len(cos) else None
    return Fused(rows, fusion(cos, lexical, ideal=lex.ideal, spread=spread), extra, lex.postings, cos, taken, lex)


def cosine_spread(vectors: RowVectors | np.ndarray, query: np.ndarray, valid: np.ndarray) -> float:
    """The cosine's standard deviation over the valid rows, from an even sample of them: the
    probed rows of an IVF search are the nearest ones, and their spread is too narrow."""
    if not isinstance(vectors, np.ndarray):  # a partition's vectors: its image keeps a contiguous sample
        sample = vectors.spread_sample(valid)
        if len(sample) >= 2:
            return float((sample @ query).std())
    rows = np.flatnonzero(valid)
    sample = rows[:: max(1, len(rows) // SPREAD_SAMPLE)]
    return float((vectors[sample] @ query).std())


def _z(a: np.ndarray) -> np.ndarray:
    return (a - a.mean()) / (a.std() + 1e-9)


def _ranks(a: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(a), dtype=np.float64)
    ranks[np.argsort(-a, kind="stable")] = np.arange(len(a))
    return ranks
