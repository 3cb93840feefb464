"""The lexical index: BM25 that matches a plain reference, stays current under appends and
removals, and takes its statistics from the valid rows only."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest

from indexing.partitions.partition import LivePartition
from indexing.relevance.fusion import Fusion
from indexing.relevance.lexical import K1, B, LexicalIndex
from indexing.relevance.words import BULK, query_terms, stem, tokenize
from indexing.rows import OPEN_END, RowBatch

TEXTS = [
    "The deploy pipeline runs on GitHub Actions",
    "Postgres backups run nightly; backups kept 30 days",
    "Café naïve über: unicode terms index too",
    "",
    "the the the of and",  # stop words only: no postings
    "GitHub tokens rotate monthly",
]


# Harman's S-stemmer as regular expressions, the first rule that matches only: the reference the
# stemmer's string tests are held to.
S_STEMMER = [
    (re.compile(r"^(.*[^ae])ies$"), r"\1y"),
    (re.compile(r"^(.*[^aeo])es$"), r"\1e"),
    (re.compile(r"^(.*[^us])s$"), r"\1"),
]


def stemmed_by_the_rules(term: str) -> str:
    for pattern, replacement in S_STEMMER:
        if pattern.match(term):
            return pattern.sub(replacement, term)
    return term


def test_the_stemmer_is_harmans_rules_on_every_short_term():
    """Every term of up to six letters over the letters the rules name, and a few others."""
    terms = ("".join(letters) for n in range(7) for letters in itertools.product("aeiousxé", repeat=n))
    wrong = [t for t in terms if stem(t) != stemmed_by_the_rules(t)]
    assert not wrong, wrong[:10]


def test_the_stemmer_on_words():
    cases = {
        "queries": "query",
        "aies": "aie",
        "eies": "eie",
        "ies": "ie",
        "horses": "horse",
        "toes": "toe",
        "does": "doe",
        "bees": "bee",
        "cats": "cat",
        "bus": "bus",
        "glass": "glass",
        "s": "s",
        "is": "i",
    }
    assert {w: stem(w) for w in cases} == cases
    assert all(stem(w) == stemmed_by_the_rules(w) for w in cases)


def test_the_bulk_and_the_small_tokenizers_agree():
    texts = TEXTS + ["İstanbul ² x_y naïve Ünïcödé—ТЕСТ 東京タワー d’Artagnan 3.14 e-mail ΟΔΟΣ Straße ǅ"] * 70
    rows, tokens = tokenize(texts)  # Arrow's kernels (more than BULK texts)
    assert len(texts) >= BULK
    small = [tokenize([t]) for t in texts]
    assert tokens.to_pylist() == [tok for _, toks in small for tok in toks.to_pylist()]
    assert rows.tolist() == [i for i, (_, toks) in enumerate(small) for _ in range(len(toks))]


@pytest.mark.parametrize(
    "word, term",
    [
        ("flies", "fly"),
        ("cases", "case"),
        ("cars", "car"),
        ("bus", "bus"),
        ("class", "class"),
        ("shoes", "shoe"),
        ("series", "sery"),
    ],
)
def test_plurals_fold_to_one_term(word, term):
    assert query_terms(word) == [term]
    index = LexicalIndex.build([f"one {word} here"])
    assert term in index.term_id


def reference(texts: list[str], query: str) -> np.ndarray:
    docs = [[stem(w) for w in tokenize([t])[1].to_pylist()] for t in texts]
    average = np.mean([len(d) for d in docs])
    scores = np.zeros(len(docs))
    for term in query_terms(query):
        df = sum(term in d for d in docs)
        if not df:
            continue
        idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
        for i, d in enumerate(docs):
            f = d.count(term)
            scores[i] += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * len(d) / average)) if f else 0
    return scores


@pytest.mark.parametrize("query", ["github backups", "unicode café", "the of", "nothing matches zzz"])
def test_bm25_matches_the_reference(query):
    index = LexicalIndex.build(TEXTS)
    got = index.score(query_terms(query), np.ones(len(TEXTS), dtype=bool))
    assert np.allclose(got.scores, reference(TEXTS, query), atol=1e-5)
    assert (got.scores < got.ideal + 1e-9).all()


def test_appends_and_removals_match_a_fresh_build():
    index = LexicalIndex.build(TEXTS[:2])
    for i in range(2, len(TEXTS)):
        index.append(i, [TEXTS[i]])
    index.remove([1])
    fresh = LexicalIndex.build([t if i != 1 else None for i, t in enumerate(TEXTS)])
    valid = np.ones(len(TEXTS), dtype=bool)
    valid[1] = False
    for query in ("github backups", "nightly unicode"):
        assert np.allclose(index.score(query_terms(query), valid).scores, fresh.score(query_terms(query), valid).scores)
    assert "nightly" not in index.term_id and sorted(index.terms) == sorted(fresh.terms)


def test_a_term_first_seen_in_an_append_scores_before_any_fold():
    index = LexicalIndex.build(TEXTS)
    index.append(len(TEXTS), ["a brand new xylograph"])
    got = index.score(query_terms("xylograph github"), np.ones(len(TEXTS) + 1, dtype=bool))
    fresh = LexicalIndex.build(TEXTS + ["a brand new xylograph"])
    assert got.scores[-1] > 0
    assert np.allclose(
        got.scores, fresh.score(query_terms("xylograph github"), np.ones(len(TEXTS) + 1, dtype=bool)).scores
    )


def batch(texts: list[str], vectors: np.ndarray, until: list[int]) -> RowBatch:
    n = len(texts)
    return RowBatch(
        [f"r{i}" for i in range(n)],
        texts,
        vectors,
        np.zeros(n, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
        np.array(until, dtype=np.int64),
    )


def test_an_ended_row_neither_scores_nor_shifts_the_others():
    """Validity before relevance: a superseded row holding the query's term gets no lexical score,
    and the remaining rows score exactly as in a partition that never held it."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(4, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = ["kiwi orchard notes", "kiwi harvest plan", "apple orchard", "pear tree"]
    with_ended = LivePartition(dimension=8)
    with_ended.append(batch(texts, vectors, [OPEN_END, 5, OPEN_END, OPEN_END]))  # r1 ended at 5
    without = LivePartition(dimension=8)
    keep = [0, 2, 3]
    without.append(
        RowBatch(
            [f"r{i}" for i in keep],
            [texts[i] for i in keep],
            vectors[keep],
            np.zeros(3, dtype=np.int64),
            np.zeros(3, dtype=np.int64),
            np.full(3, OPEN_END),
        )
    )
    query = vectors[1]  # the ended row is the perfect vector match too
    got = with_ended.search(query, 10, now=10, text="kiwi harvest")
    assert "r1" not in [h.id for h in got.hits]
    expected = without.search(query, 10, now=10, text="kiwi harvest")
    assert [(h.id, round(h.score, 6)) for h in got.hits] == [(h.id, round(h.score, 6)) for h in expected.hits]


def test_fusions_keep_cosine_order_when_no_term_matches():
    cos = np.array([0.9, 0.1, 0.5])
    for fusion in (Fusion("anchored", 0.3), Fusion("z", 0.3), Fusion("rrf", 1.0)):
        assert list(np.argsort(-fusion(cos, np.zeros(3), ideal=0.0))) == [0, 2, 1]


def test_scaled_bonus_stays_bounded_when_every_row_scores_about_alike_and_is_unchanged_when_few_do():
    """``scaled``'s BM25 unit is its deviation, or its mean where that is larger: a term every
    row holds (BM25 near-constant, deviation near zero) adds at most w · σ(cosine) · max/mean,
    not a bonus divided by almost nothing; where at most half the rows score, nothing changes."""
    rng = np.random.default_rng(3)
    cos = rng.uniform(0.1, 0.6, size=30)
    alike = 0.016 + rng.normal(0, 1e-7, size=30)  # one common term in every row
    fused = Fusion("scaled", 0.5)(cos, alike, ideal=float(alike.max()))
    bound = 0.5 * cos.std() * alike.max() / alike.mean()
    assert np.all(fused - cos <= bound + 1e-12) and np.all(fused - cos >= 0)
    sparse = np.zeros(30)
    sparse[[2, 7, 11]] = [3.1, 1.2, 0.4]  # the usual case: few rows match
    expected = cos + 0.5 * cos.std() * sparse / sparse.std()
    assert np.allclose(Fusion("scaled", 0.5)(cos, sparse, ideal=3.1), expected)


def test_past_the_ivf_threshold_a_rare_term_finds_the_row_the_probe_missed(monkeypatch, tmp_path):
    import indexing.partitions.image_cache as image_cache
    from indexing.partitions.store import VectorStore

    monkeypatch.setattr(image_cache, "ANN_THRESHOLD", 2000)
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(2500, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = vectors[0]
    far = int(np.argmin(vectors @ query))  # the row least like the query: no probe reaches it
    texts = [f"note {i} about the weather" for i in range(2500)]
    texts[far] = "the vault combination is zanzibar"
    store = VectorStore(tmp_path, model="m", dimension=16)
    store.add("space:p", batch(texts, vectors, [OPEN_END] * 2500), compact=False)
    store.settle("space:p")  # the partition's image, with its IVF lists and postings
    assert store.live_partition("space:p").base is not None
    assert f"r{far}" not in [h.id for h in store.search("space:p", query, 10, now=1).hits]
    result = store.search("space:p", query, 10, now=1, text="zanzibar")
    assert result.hits[0].id == f"r{far}"  # scored exactly beside the probe, then fused
    assert result.postings == 1 and result.scored < 2500


def test_an_index_saved_with_sorted_terms_scores_exactly_as_the_one_it_was_saved_from():
    # An image saves its vocabulary sorted and a reader finds terms by binary search over the
    # mapped bytes, never building a dict of them: same terms, same postings, same scores.
    import pyarrow as pa

    rng = np.random.default_rng(3)
    words = ["zeta", "alpha", "Ünïcödé", "東京", "ǅemal", "a1", "b", "straße", "naïve", "ΟΔΟΣ", "x_y", "42"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 8)))) for _ in range(300)]
    original = LexicalIndex.build(texts)
    terms, offsets, rows, freqs, lengths = original.sorted_arrays()
    assert terms == sorted(terms) and len(set(terms)) == len(terms)
    mapped = LexicalIndex.from_arrays(
        terms=pa.array(terms, pa.large_string()), offsets=offsets, rows=rows, freqs=freqs, lengths=lengths
    )
    assert mapped.vocabulary.base is not None and not mapped.vocabulary.extra  # nothing in a dict
    valid = np.ones(len(texts), dtype=bool)
    valid[::7] = False
    for word in words + ["absent", "zz", ""]:
        expect = original.score(original.query_terms(word), valid)
        got = mapped.score(mapped.query_terms(word), valid)
        assert np.allclose(got.scores, expect.scores) and got.postings == expect.postings, word
    # It takes writes as the list-based one does: a new term, then a forget of its row.
    both = mapped.copy()
    both.append(len(texts), ["quokka alpha"])
    assert "quokka" in both.term_id and "quokka" not in mapped.term_id
    both.remove([len(texts)])
    assert "quokka" not in both.term_id
