"""A partition's lexical index: BM25 postings over its texts, held in memory only.

The index is built from the image's texts when a partition is first searched with a query
text, kept current as rows are appended, and rebuilt without a forgotten row's postings: no
term of a forgotten text stays in it, and nothing of it is ever written to disk.

Layout, numpy arrays in CSR form so that it could later be persisted or memory-mapped:

    terms      the vocabulary (term id → term; ``term_id`` maps back)
    offsets    int64, len(terms) + 1: term t's postings are [offsets[t], offsets[t + 1])
    rows       int32, the row of each posting, ascending within a term
    freqs      float32, the term's frequency in that row
    lengths    float32 per row, its number of indexed terms

Rows appended since the last build sit in a tail of (term, row, freq) triples, folded into the
CSR once it grows past a share of it. The statistics of BM25 (rows, document frequencies,
average length) are taken at query time over the rows the caller may see, so a superseded or
expired row neither scores nor shifts the idf of the others.

What a text's terms are (and a query's) is ``words.py``'s; how a term gets its id, from a mapped
image's sorted terms or among those seen since, is ``vocabulary.py``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from indexing.relevance.vocabulary import SortedTerms, Vocabulary
from indexing.relevance.words import STEM, query_terms, stem, tokenize

K1 = 1.2
B = 0.75
FOLD_SHARE = 8  # fold the tail in when it holds more than 1/FOLD_SHARE of the postings
FOLD_MIN = 4096  # ... and at least this many


@dataclass(frozen=True)
class LexicalScores:
    """BM25 of the valid rows for one query: ``scores`` is dense over the partition's rows (0
    where no term matched or the row is not valid); ``ideal`` is the most any row could score
    for this query here (every term, saturated), so ``scores / ideal`` lies in [0, 1)."""

    scores: np.ndarray
    ideal: float
    postings: int  # postings read


class LexicalIndex:
    def __init__(self, stem: bool = STEM) -> None:
        self.stem = stem
        self.vocabulary = Vocabulary()
        self.offsets = np.zeros(1, dtype=np.int64)
        self.rows = np.zeros(0, dtype=np.int32)
        self.freqs = np.zeros(0, dtype=np.float32)
        self.lengths = np.zeros(0, dtype=np.float32)
        self._tail: list[np.ndarray] = []  # (3, m) int64 arrays: term, row, freq
        self._tail_size = 0
        self._tail_terms = np.zeros(0, dtype=np.int64)
        self._tail_rows = np.zeros(0, dtype=np.int64)
        self._tail_freqs = np.zeros(0, dtype=np.float32)

    @classmethod
    def build(cls, texts: list[str | None], stem: bool = STEM) -> LexicalIndex:
        """The index of rows ``0..len(texts)``; a ``None`` text (a removed row) has no postings."""
        index = cls(stem)
        index.append(0, texts)
        index._fold()
        return index

    @property
    def terms(self) -> list[str]:
        return self.vocabulary.to_list()

    @property
    def term_id(self) -> Vocabulary:
        return self.vocabulary

    @classmethod
    def from_arrays(
        cls,
        *,
        terms: list[str] | pa.Array,
        offsets: np.ndarray,
        rows: np.ndarray,
        freqs: np.ndarray,
        lengths: np.ndarray,
        stem: bool = STEM,
    ) -> LexicalIndex:
        """An index over arrays saved by ``sorted_arrays`` (a large partition's image maps them:
        ``terms`` is then its sorted Arrow array), or by ``arrays`` (``terms`` a list)."""
        index = cls(stem)
        index.vocabulary = Vocabulary.of(terms) if isinstance(terms, list) else Vocabulary(SortedTerms(terms))
        index.offsets, index.rows, index.freqs, index.lengths = offsets, rows, freqs, lengths
        return index

    def arrays(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(terms, offsets, rows, freqs, lengths), everything folded in."""
        self._fold()
        return self.terms, self.offsets, self.rows, self.freqs, self.lengths

    def sorted_arrays(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``arrays`` with the terms in code point order (term ids renumbered to match), as an
        image saves them, so a reader finds a term by binary search over the mapped file."""
        terms, offsets, rows, freqs, lengths = self.arrays()
        order = sorted(range(len(terms)), key=terms.__getitem__)
        counts = np.diff(offsets)[order]
        new_offsets = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(counts, out=new_offsets[1:])
        if len(order):
            starts = offsets[:-1][order]
            take = np.repeat(starts - new_offsets[:-1], counts) + np.arange(int(new_offsets[-1]))
        else:
            take = np.zeros(0, dtype=np.int64)
        return [terms[i] for i in order], new_offsets, rows[take], freqs[take], lengths

    def copy(self) -> LexicalIndex:
        """An index that can take writes without changing this one (arrays are replaced, never
        written in place, so they are shared)."""
        other = LexicalIndex(self.stem)
        other.vocabulary = self.vocabulary.copy()  # an image's mapped terms stay shared
        other.offsets, other.rows, other.freqs = self.offsets, self.rows, self.freqs
        other.lengths = np.array(self.lengths)  # written in place by remove
        other._tail, other._tail_size = list(self._tail), self._tail_size
        other._tail_terms, other._tail_rows, other._tail_freqs = self._tail_terms, self._tail_rows, self._tail_freqs
        return other

    @property
    def postings(self) -> int:
        return len(self.rows) + self._tail_size

    # -- writes -----------------------------------------------------------------------------

    def append(self, start: int, texts: Sequence[str | None]) -> None:
        """Index rows ``start, start + 1, …`` holding ``texts``."""
        n = start + len(texts)
        if n > len(self.lengths):
            self.lengths = np.concatenate([self.lengths, np.zeros(n - len(self.lengths), dtype=np.float32)])
        token_rows, tokens = tokenize([t or "" for t in texts])
        if not len(tokens):
            return
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(tokens)
        local = encoded.indices.to_numpy()
        words = encoded.dictionary.to_pylist()
        mapping = np.array([self._id(stem(w) if self.stem else w) for w in words], dtype=np.int64)
        triples = _count(mapping[local], token_rows + start)
        self.lengths[start:n] += np.bincount(token_rows, minlength=len(texts)).astype(np.float32)
        self._tail.append(triples)
        self._tail_size += triples.shape[1]
        if self._tail_size > max(FOLD_MIN, len(self.rows) // FOLD_SHARE):
            self._fold()
        else:
            self._tail_terms, self._tail_rows, self._tail_freqs = _split(np.concatenate(self._tail, axis=1))

    def remove(self, rows: list[int]) -> None:
        """Drop every posting of ``rows`` and every term left with none: a forgotten text
        leaves no trace in the index."""
        if not rows:
            return
        self._fold()
        gone = np.zeros(len(self.lengths), dtype=bool)
        gone[rows] = True
        terms = np.repeat(np.arange(len(self.vocabulary), dtype=np.int64), np.diff(self.offsets))
        keep = ~gone[self.rows]
        terms, post_rows, freqs = terms[keep], self.rows[keep], self.freqs[keep]
        vocabulary = self.vocabulary.to_list()
        used = np.bincount(terms, minlength=len(vocabulary)) > 0
        renumber = np.cumsum(used) - 1
        self.vocabulary = Vocabulary.of([t for t, u in zip(vocabulary, used) if u])
        self._set_csr(renumber[terms], post_rows, freqs)
        self.lengths[rows] = 0

    def _id(self, term: str) -> int:
        return self.vocabulary.add(term)

    def _fold(self) -> None:
        if not self._tail:
            return
        terms = np.repeat(np.arange(len(self.offsets) - 1, dtype=np.int64), np.diff(self.offsets))
        tail_terms, tail_rows, tail_freqs = _split(np.concatenate(self._tail, axis=1))
        all_terms = np.concatenate([terms, tail_terms])
        all_rows = np.concatenate([self.rows.astype(np.int64), tail_rows])
        order = np.lexsort((all_rows, all_terms))
        freqs = np.concatenate([self.freqs, tail_freqs])
        self._set_csr(all_terms[order], all_rows[order], freqs[order])

    def _set_csr(self, terms: np.ndarray, rows: np.ndarray, freqs: np.ndarray) -> None:
        """Postings sorted by (term, row)."""
        self.offsets = np.zeros(len(self.vocabulary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=len(self.vocabulary)), out=self.offsets[1:])
        self.rows = np.ascontiguousarray(rows, dtype=np.int32)
        self.freqs = np.ascontiguousarray(freqs, dtype=np.float32)
        self._tail, self._tail_size = [], 0
        self._tail_terms = self._tail_rows = np.zeros(0, dtype=np.int64)
        self._tail_freqs = np.zeros(0, dtype=np.float32)

    # -- reads ------------------------------------------------------------------------------

    def query_terms(self, text: str) -> list[str]:
        return query_terms(text, self.stem)

    def rows_sharing(self, terms: list[str], n: int, *, at_least: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows below ``n`` that hold at least ``at_least`` of ``terms`` (distinct), and how
        many each holds: read from the terms' postings, never a pass over the rows."""
        found = [self.vocabulary.get(t) for t in dict.fromkeys(terms)]
        parts = []
        for t in (i for i in found if i is not None):
            rows = self.rows[self.offsets[t] : self.offsets[t + 1]] if t + 1 < len(self.offsets) else self.rows[:0]
            if self._tail_size:
                rows = np.concatenate([rows, self._tail_rows[self._tail_terms == t]])
            parts.append(rows[rows < n])
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        rows, counts = np.unique(np.concatenate(parts).astype(np.int64), return_counts=True)
        keep = counts >= at_least
        return rows[keep], counts[keep]

    def score(self, terms: list[str], valid: np.ndarray, *, k1: float = K1, b: float = B) -> LexicalScores:
        """BM25 of each row where ``valid`` (a mask over rows ``0..len(valid)``) for the query
        ``terms``; corpus statistics come from the valid rows alone."""
        n = len(valid)
        scores = np.zeros(n, dtype=np.float32)
        found = [self.vocabulary.get(t) for t in terms]
        ids = [i for i in found if i is not None]
        count = int(valid.sum())
        if not ids or not count:
            return LexicalScores(scores, 0.0, 0)
        lengths = self.lengths[:n]
        average = float(lengths[valid].mean()) or 1.0
        norm = k1 * (1 - b + b * lengths / average)
        read, ideal = 0, 0.0
        for t in ids:
            if t + 1 < len(self.offsets):
                rows = self.rows[self.offsets[t] : self.offsets[t + 1]]
                freqs = self.freqs[self.offsets[t] : self.offsets[t + 1]]
            else:  # a term first seen since the last fold: its postings are all in the tail
                rows, freqs = self.rows[:0], self.freqs[:0]
            if self._tail_size:
                extra = self._tail_terms == t
                rows = np.concatenate([rows, self._tail_rows[extra]])
                freqs = np.concatenate([freqs, self._tail_freqs[extra]])
            read += len(rows)
            inside = rows < n
            rows, freqs = rows[inside], freqs[inside]
            keep = valid[rows]
            rows, freqs = rows[keep], freqs[keep]
            if not len(rows):
                continue
            idf = np.log1p((count - len(rows) + 0.5) / (len(rows) + 0.5))
            scores[rows] += idf * freqs * (k1 + 1) / (freqs + norm[rows])
            ideal += idf * (k1 + 1)
        return LexicalScores(scores, ideal, read)


def _count(terms: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(term, row, frequency) triples, sorted by term then row."""
    keys, freqs = np.unique((terms << 32) | rows, return_counts=True)
    return np.stack([keys >> 32, keys & 0xFFFFFFFF, freqs])


def _split(triples: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return triples[0], triples[1], triples[2].astype(np.float32)
