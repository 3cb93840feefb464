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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

K1 = 1.2
B = 0.75
FOLD_SHARE = 8  # fold the tail in when it holds more than 1/FOLD_SHARE of the postings
FOLD_MIN = 4096  # ... and at least this many
# Function words carry no topic; dropping them keeps postings short and scores on content.
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "from",
        "by",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "i",
        "you",
        "he",
        "she",
        "it",
        "we",
        "they",
        "me",
        "my",
        "your",
        "our",
        "their",
        "this",
        "that",
        "these",
        "those",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "not",
        "no",
        "so",
        "as",
        "what",
        "which",
        "who",
        "whom",
        "how",
        "when",
        "where",
        "why",
        "can",
        "could",
        "would",
        "should",
        "will",
        "just",
        "about",
        "into",
        "than",
        "then",
        "there",
        "here",
        "very",
        "also",
        "any",
        "some",
        "am",
        "im",
        "its",
        "it's",
        "i'm",
        "i've",
        "ive",
        "dont",
        "don't",
    ]
)
_STOP = pa.array(sorted(STOP_WORDS))
_SPLIT = r"[^\p{L}\p{N}]+"  # a term is a run of letters and digits, in any script
_WORD = re.compile(r"[^\W_]+")  # the same runs, for Python's re
BULK = 64  # texts from which Arrow's kernels beat Python's re (each kernel call costs ~1 ms)


# Harman's S-stemmer, the first rule that matches only: -ies → -y (not -eies, -aies), -es → -e
# (not -aes, -ees, -oes), -s → (not -us, -ss). No rule's output ends as a later rule needs, so
# applying all three in turn is the same. Applied to each distinct term, never to each token.
_STEPS = [
    (re.compile(r"^(.*[^ae])ies$"), r"\1y"),
    (re.compile(r"^(.*[^aeo])es$"), r"\1e"),
    (re.compile(r"^(.*[^us])s$"), r"\1"),
]
STEM = True


def stem(term: str) -> str:
    for pattern, replacement in _STEPS:
        term = pattern.sub(replacement, term)
    return term


def tokenize(texts: list[str]) -> tuple[np.ndarray, pa.Array]:
    """Every word of ``texts`` in order, and the text each came from (lower-cased, split on
    anything but letters and digits, stop words dropped). Many texts go through Arrow's C++
    kernels, a few through ``re``; both give the same words (tests/indexing/test_lexical_index.py)."""
    if len(texts) < BULK:
        terms = [_terms(text) for text in texts]
        rows = [i for i, these in enumerate(terms) for _ in these]
        return np.array(rows, dtype=np.int64), pa.array([t for these in terms for t in these], pa.large_string())
    import pyarrow.compute as pc  # here, not at import: a command that never searches need not load it

    split = pc.split_pattern_regex(pc.utf8_lower(pa.array(texts, type=pa.large_string())), pattern=_SPLIT)
    parents = pc.list_parent_indices(split)
    flat = pc.list_flatten(split)
    keep = pc.and_(pc.greater(pc.utf8_length(flat), 0), pc.invert(pc.is_in(flat, value_set=_STOP)))
    return pc.filter(parents, keep).to_numpy().astype(np.int64), pc.filter(flat, keep)


def _terms(text: str) -> list[str]:
    # Arrow lower-cases each character alone; Python's full mapping differs for these two.
    lowered = text.replace("İ", "i").replace("Σ", "σ").lower()
    return [t for t in _WORD.findall(lowered) if t not in STOP_WORDS]


def query_terms(text: str, stemmed: bool = STEM) -> list[str]:
    """The distinct indexed terms of a query, in order."""
    return list(dict.fromkeys(stem(t) if stemmed else t for t in _terms(text)))


@dataclass(frozen=True)
class LexicalScores:
    """BM25 of the valid rows for one query: ``scores`` is dense over the partition's rows (0
    where no term matched or the row is not valid); ``ideal`` is the most any row could score
    for this query here (every term, saturated), so ``scores / ideal`` lies in [0, 1)."""

    scores: np.ndarray
    ideal: float
    postings: int  # postings read


class SortedTerms:
    """Terms sorted by code point in one Arrow string array (a large partition's image maps it
    from its file), found by binary search over the raw UTF-8 bytes, whose order is the code
    points'. A million-term vocabulary stays in the page cache, shared by every process, instead
    of becoming a Python dict in each."""

    def __init__(self, array: pa.Array) -> None:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        array = array.cast(pa.large_string())
        self._array = array
        _, offsets, data = array.buffers()
        self._offsets = np.frombuffer(offsets, dtype=np.int64)[array.offset : array.offset + len(array) + 1]
        self._data = memoryview(data) if data is not None else memoryview(b"")

    def __len__(self) -> int:
        return len(self._array)

    def _bytes(self, i: int) -> bytes:
        return bytes(self._data[self._offsets[i] : self._offsets[i + 1]])

    def find(self, term: str) -> int:
        """The term's position, or -1."""
        key, lo, hi = term.encode(), 0, len(self._array)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._bytes(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(self._array) and self._bytes(lo) == key else -1

    def to_list(self) -> list[str]:
        return self._array.to_pylist()


class Vocabulary:
    """Term ids: those of a mapped image (``SortedTerms``, ids in sorted order), then the terms
    first seen since, in a dict of their own."""

    def __init__(self, base: SortedTerms | None = None) -> None:
        self.base = base
        self._base_len = len(base) if base is not None else 0
        self.extra: list[str] = []
        self.extra_id: dict[str, int] = {}

    def __len__(self) -> int:
        return self._base_len + len(self.extra)

    def __contains__(self, term: str) -> bool:
        return self.get(term) is not None

    def get(self, term: str) -> int | None:
        i = self.extra_id.get(term)
        if i is not None:
            return i
        if self.base is not None:
            j = self.base.find(term)
            if j >= 0:
                return j
        return None

    def add(self, term: str) -> int:
        i = self.get(term)
        if i is None:
            i = self.extra_id[term] = len(self)
            self.extra.append(term)
        return i

    def copy(self) -> Vocabulary:
        other = Vocabulary(self.base)
        other.extra, other.extra_id = list(self.extra), dict(self.extra_id)
        return other

    def to_list(self) -> list[str]:
        return (self.base.to_list() if self.base is not None else []) + self.extra

    @classmethod
    def of(cls, terms: list[str]) -> Vocabulary:
        vocabulary = cls()
        vocabulary.extra, vocabulary.extra_id = list(terms), {t: i for i, t in enumerate(terms)}
        return vocabulary


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
