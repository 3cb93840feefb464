"""One fact once: when two memories are the same fact, and what a write and a recall do about it.

Two texts are the same fact when their normalised texts are equal (Unicode NFKC, case folded,
whitespace collapsed, trailing punctuation dropped), or when their vectors' cosine reaches
``SAME_FACT_COSINE`` *and* the lexical check agrees: every name and number of either text (a word
with a digit, or capitalised past a sentence's start) is a word of the other, and their content
terms (BM25's: stop words dropped, stemmed) overlap by at least ``SAME_TERMS`` (Jaccard). The
cosine alone cannot tell "Acme's login uses Auth0" from "Acme's login uses Okta" (the names can)
nor "deploys happen on friday" from "… on thursday" (0.94 apart; the terms can). The threshold is calibrated on LongMemEval turns and paraphrases made from
them (``benchmarks/dedupe_calibration.py``; its figures in docs/recall.md).

- At write (``check_write``): the target partition only, among its memories current now, is
  searched by the new vector. A memory of the same fact is the duplicate; memories at least
  ``SIMILAR_COSINE`` close that are not the same fact (up to ``MAX_SIMILAR``) are ``similar``:
  likely the same subject with another value, for the writer to ``replace``. A writer may read
  every memory of the partition it writes (``server.facade.reach.writable`` asks the same scope
  a read does), so nothing it could not see is looked at.
- At recall (``fold_copies``): of two delivered memories that are the same fact, the later one
  wins; the earlier is dropped and counted.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from indexing.partitions.store import VectorStore
from indexing.relevance.words import query_terms
from indexing.rows import Hit
from server.clock import to_micros
from server.memories.data import Data, compact
from server.models import Similar
from server.spaces import partition_key

SAME_FACT_COSINE = 0.9  # calibrated: docs/recall.md, "One fact once"
SAME_TERMS = 0.6  # the content terms' Jaccard overlap the lexical check asks for
SIMILAR_COSINE = 0.6  # close enough to be about the same subject ("uses Okta" after "uses Auth0": 0.70)
MAX_SIMILAR = 3
NEIGHBOURS = 8  # rows of the target partition a write looks at
# A write scores only the rows that hold half of its content terms or more (read from the
# partition's lexical postings, not a pass over every vector): a copy holds more (its terms'
# overlap is SAME_TERMS at least), and an update of the same subject keeps most of its words.
SHARED_TERMS = 0.5
MOST_SCORED = 256  # of those, the ones sharing the most

_SPACES = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.!?;:,…]+$")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# A value written as one token with its joiners: an identifier (INC-1234, a-3), a version (v2.1),
# a path (secret/acme-stg), a time (10:30). Two of them differ as wholes: a-3 is not b-3.
_TOKEN = re.compile(r"[^\W_](?:[\w.\-/:]*[^\W_])?", re.UNICODE)
_OPENERS = frozenset("\"'“‘([ \t")  # what may stand between a sentence's end and its first word
_ENDS = frozenset(".!?…:;")


def normalised(text: str) -> str:
    """The text as equality compares it: NFKC, case folded, whitespace collapsed, trailing
    punctuation dropped."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _TRAILING.sub("", _SPACES.sub(" ", folded).strip())


def _words(text: str) -> set[str]:
    """The words of ``text`` and its joined tokens (``a-3`` besides ``a`` and ``3``), case folded."""
    text = unicodedata.normalize("NFKC", text)
    return {w.casefold() for w in (*_WORD.findall(text), *_TOKEN.findall(text))}


def names_and_numbers(text: str) -> set[str]:
    """The words of ``text`` that carry a value: any with a digit (and any joined token with one,
    whole: ``a-3``), and any capitalised past a sentence's start ("I" aside), case folded."""
    text = unicodedata.normalize("NFKC", text)
    found: set[str] = {t.casefold() for t in _TOKEN.findall(text) if any(c.isdigit() for c in t)}
    for match in _WORD.finditer(text):
        word = match.group()
        if any(c.isdigit() for c in word):
            found.add(word.casefold())
            continue
        if not word[0].isupper() or word == "I":
            continue
        if not _starts_sentence(text, match.start()):
            found.add(word.casefold())
    return found


def _starts_sentence(text: str, at: int) -> bool:
    """Whether a word at ``at`` opens the text or a sentence: past the quotes, brackets and
    blanks before it, the text begins, or a sentence's end (``.!?…:;`` then blanks, or a line
    break). Read backwards from ``at`` only as far as that: a copy of the text before each
    capitalised word, searched from its start, made a long text's check quadratic."""
    i = at
    while i and text[i - 1] in _OPENERS:
        i -= 1
    if not i:
        return True
    while i and text[i - 1].isspace():
        if text[i - 1] == "\n":
            return True
        i -= 1
    return bool(i) and text[i - 1] in _ENDS


def lexical_agrees(a: str, b: str) -> bool:
    """Every name and number of either text is a word of the other, and their content terms
    overlap by ``SAME_TERMS`` at least."""
    return _Texts([a, b]).agree(0, 1)


def same_fact(a: str, b: str, cosine: float) -> bool:
    """Whether two texts, ``cosine`` apart, say the same fact."""
    if cosine >= SAME_FACT_COSINE and lexical_agrees(a, b):
        return True
    return normalised(a) == normalised(b)


@dataclass(frozen=True)
class WriteCheck:
    duplicate_of: str | None  # the current memory of the same fact, if any
    similar: tuple[Similar, ...]  # best first, at most MAX_SIMILAR


NO_MATCH = WriteCheck(None, ())


def check_write(
    store: VectorStore,
    key: str,
    text: str,
    vector: np.ndarray,
    *,
    now: datetime,
    current: Callable[[list[str]], set[str]],
) -> WriteCheck:
    """What the target partition ``key`` already holds of ``text``: of its rows valid at ``now``
    that share ``SHARED_TERMS`` of its terms, the nearest by plain cosine, of which ``current``
    (the catalog's word) keeps the current ones."""
    if not store.exists(key):
        return NO_MATCH
    hits = store.search_sharing(
        key, vector, NEIGHBOURS, now=to_micros(now), text=text, share=SHARED_TERMS, most=MOST_SCORED
    ).hits
    close = [h for h in hits if h.score >= SIMILAR_COSINE or normalised(h.text) == normalised(text)]
    if not close:
        return NO_MATCH
    live = current([h.id for h in close])
    close = [h for h in close if h.id in live]
    for hit in close:
        if same_fact(text, hit.text, hit.score):
            return WriteCheck(hit.id, ())
    return WriteCheck(None, tuple(Similar(h.id, round(h.score, 6)) for h in close[:MAX_SIMILAR]))


def fold_copies(hits: Sequence[Hit], vectors: np.ndarray) -> list[int]:
    """Of ``hits`` (best first, with their ``vectors``, unit length), the positions to keep: of two
    that are the same fact, the later written wins, the earlier is dropped.

    Only pairs that could be the same fact are looked at: equal normalised texts, or a cosine of
    ``SAME_FACT_COSINE`` and more (one matrix product). The lexical check runs on those alone,
    each text's words read once: a recall's candidates are mostly unlike, and comparing every
    pair's words was most of a small partition's recall."""
    if len(hits) < 2:
        return list(range(len(hits)))
    close = np.argwhere(np.triu(vectors @ vectors.T >= SAME_FACT_COSINE, k=1))
    norms = [normalised(h.text) for h in hits]
    pairs = {(i, j) for i, j in close.tolist()}
    alike: dict[str, list[int]] = {}
    for j, norm in enumerate(norms):
        pairs.update((i, j) for i in alike.setdefault(norm, []))
        alike[norm].append(j)
    if not pairs:
        return list(range(len(hits)))
    texts = _Texts([h.text for h in hits])
    dropped: set[int] = set()
    for i, j in sorted(pairs):  # the order every pair was once compared in: the same outcome
        if i in dropped or j in dropped:
            continue
        if norms[i] == norms[j] or texts.agree(i, j):
            earlier = i if (hits[i].created_at, hits[i].id) < (hits[j].created_at, hits[j].id) else j
            dropped.add(earlier)
    return [i for i in range(len(hits)) if i not in dropped]


class _Texts:
    """The lexical check over texts compared in pairs (a recall's hits), each text read once and
    only as far as asked: its names and numbers, then its words, then its content terms (a pair
    mostly fails on names)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = texts
        self._names: dict[int, set[str]] = {}
        self._words: dict[int, set[str]] = {}
        self._terms: dict[int, set[str]] = {}

    def names(self, i: int) -> set[str]:
        if i not in self._names:
            self._names[i] = names_and_numbers(self.texts[i])
        return self._names[i]

    def words(self, i: int) -> set[str]:
        if i not in self._words:
            self._words[i] = _words(self.texts[i])
        return self._words[i]

    def terms(self, i: int) -> set[str]:
        if i not in self._terms:
            self._terms[i] = set(query_terms(self.texts[i]))
        return self._terms[i]

    def agree(self, i: int, j: int) -> bool:
        """Every name and number of either text is a word of the other, and their content terms
        overlap by ``SAME_TERMS`` at least."""
        if not (self.names(i) <= self.words(j) and self.names(j) <= self.words(i)):
            return False
        terms_a, terms_b = self.terms(i), self.terms(j)
        union = terms_a | terms_b
        return not union or len(terms_a & terms_b) / len(union) >= SAME_TERMS


def fold_candidates(
    ranked: list[tuple[Hit, str | None]], store: VectorStore, data: dict[str, Data]
) -> tuple[list[tuple[Hit, str | None]], int]:
    """A recall's candidates (best first, with their spaces) with copies folded (the later wins),
    and how many were. Memories whose data differ are never copies of each other (a filter over
    data may want either)."""
    if len(ranked) < 2:
        return ranked, 0
    rows_of: dict[str | None, list[int]] = {}
    for i, (_, space) in enumerate(ranked):
        rows_of.setdefault(space, []).append(i)
    vectors: list[np.ndarray | None] = [None] * len(ranked)
    for space, rows in rows_of.items():  # one look at each partition's version, not one a row
        for i, vector in zip(rows, store.vectors(partition_key(space), [ranked[i][0].id for i in rows])):
            vectors[i] = vector
    if any(v is None for v in vectors):  # forgotten meanwhile: the catalog's check already ran
        return ranked, 0
    alike: dict[str, list[int]] = {}
    for i, (hit, _) in enumerate(ranked):
        held = data.get(hit.id)
        alike.setdefault(compact(held) if held else "", []).append(i)
    kept: list[int] = []
    for group in alike.values():
        found = fold_copies([ranked[i][0] for i in group], np.stack([vectors[i] for i in group]))  # type: ignore[misc]
        kept += [group[j] for j in found]
    return [ranked[i] for i in sorted(kept)], len(ranked) - len(kept)
