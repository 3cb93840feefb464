"""The words of a text as BM25 counts them: lower-cased, split on anything but letters and
digits (in any script), function words dropped, and each distinct term stemmed (Harman's
S-stemmer). A partition's texts and a query go through the same rules, so a query's terms meet
the postings of the same words.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pyarrow as pa

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
_SPLIT = r"[^\p{L}\p{N}]+"  # a term is a run of letters and digits, in any script
_WORD = re.compile(r"[^\W_]+")  # the same runs, for Python's re
BULK = 64  # texts from which Arrow's kernels beat Python's re (each kernel call costs ~1 ms)


STEM = True


@cache
def _stop_words() -> pa.Array:
    # Made at first use, not at import: building any Arrow array from Python objects imports
    # pandas (0.2 s), which a command that never indexes text (esfis space list) need not pay.
    return pa.array(sorted(STOP_WORDS))


def stem(term: str) -> str:
    """Harman's S-stemmer, the first rule that matches only: -ies → -y (not -eies, -aies), -es → -e
    (not -aes, -ees, -oes), -s → (not -us, -ss), each rule needing a letter before its ending.
    Applied to each distinct term, never to each token. String tests, not regular expressions: a
    long text has thousands of distinct terms, and three substitutions each were a fifth of
    its write (tests/indexing/test_lexical_index.py holds it to the rules as expressions)."""
    if term.endswith("ies") and len(term) > 3 and term[-4] not in "ae":
        return term[:-3] + "y"
    if term.endswith("es") and len(term) > 2 and term[-3] not in "aeo":
        return term[:-2] + "e"
    if term.endswith("s") and len(term) > 1 and term[-2] not in "us":
        return term[:-1]
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
    keep = pc.and_(pc.greater(pc.utf8_length(flat), 0), pc.invert(pc.is_in(flat, value_set=_stop_words())))
    return pc.filter(parents, keep).to_numpy().astype(np.int64), pc.filter(flat, keep)


def _terms(text: str) -> list[str]:
    # Arrow lower-cases each character alone; Python's full mapping differs for these two.
    lowered = text.replace("İ", "i").replace("Σ", "σ").lower()
    return [t for t in _WORD.findall(lowered) if t not in STOP_WORDS]


def query_terms(text: str, stemmed: bool = STEM) -> list[str]:
    """The distinct indexed terms of a query, in order."""
    return list(dict.fromkeys(stem(t) if stemmed else t for t in _terms(text)))
