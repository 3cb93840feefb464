"""``fold_copies`` looks only at pairs that could be the same fact (equal normalised texts, or a
cosine of ``SAME_FACT_COSINE`` and more) and reads each text's words once; its outcome is the
one comparing every pair with ``same_fact`` gives, on any hits (a property over random ones)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from indexing.rows import Hit
from server.memories.duplicates import fold_copies, same_fact

WORDS = ["Acme", "login", "uses", "Auth0", "Okta", "deploys", "on", "friday", "thursday", "v2.1", "a-3", "b-3"]


def every_pair(hits: list[Hit], vectors: np.ndarray) -> list[int]:
    """The rule as first written: every pair compared by ``same_fact``, best first."""
    cosines = vectors @ vectors.T
    dropped: set[int] = set()
    for i in range(len(hits)):
        if i in dropped:
            continue
        for j in range(i + 1, len(hits)):
            if j in dropped:
                continue
            if same_fact(hits[i].text, hits[j].text, float(cosines[i, j])):
                earlier = i if (hits[i].created_at, hits[i].id) < (hits[j].created_at, hits[j].id) else j
                dropped.add(earlier)
                if earlier == i:
                    break
    return [i for i in range(len(hits)) if i not in dropped]


def random_hits(rng: random.Random, n: int) -> tuple[list[Hit], np.ndarray]:
    """Texts from a few words (copies, case and punctuation variants among them), and vectors in
    a few tight clusters, so close pairs and equal texts meet both with and without each other."""
    texts, vectors = [], []
    centres = np.random.default_rng(rng.randrange(1 << 30)).normal(size=(3, 16))
    for _ in range(n):
        if texts and rng.random() < 0.3:
            text = rng.choice(texts)
            text = rng.choice([text, text.upper(), text + ".", "  " + text])
        else:
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))
        texts.append(text)
        vector = centres[rng.randrange(3)] + np.random.default_rng(rng.randrange(1 << 30)).normal(
            scale=rng.choice([0.01, 0.2, 1.0]), size=16
        )
        vectors.append(vector / np.linalg.norm(vector))
    hits = [Hit(f"m{i}", 1.0 - i / 100, t, rng.randrange(5), 0, None) for i, t in enumerate(texts)]
    return hits, np.array(vectors, dtype=np.float32).reshape(n, 16)


@pytest.mark.parametrize("seed", range(300))
def test_folding_only_close_pairs_keeps_what_comparing_every_pair_keeps(seed):
    rng = random.Random(seed)
    hits, vectors = random_hits(rng, rng.randint(0, 24))
    assert fold_copies(hits, vectors) == every_pair(hits, vectors)


def test_equal_texts_fold_whatever_their_vectors():
    hits = [Hit(f"m{i}", 1.0, "Deploys on Friday", i, 0, None) for i in range(3)]
    vectors = np.eye(3, 8, dtype=np.float32)  # orthogonal: only the texts make them one fact
    assert fold_copies(hits, vectors) == [2]  # the later written wins


def _names_as_first_written(text: str) -> set[str]:
    """``names_and_numbers`` with its sentence check as first written: the text before each
    capitalised word copied and searched with a regular expression (quadratic in a long text)."""
    import re
    import unicodedata

    from server.memories.duplicates import _TOKEN, _WORD

    sentence_end = re.compile(r"[.!?…:;\n]\s*$")
    text = unicodedata.normalize("NFKC", text)
    found = {t.casefold() for t in _TOKEN.findall(text) if any(c.isdigit() for c in t)}
    for match in _WORD.finditer(text):
        word = match.group()
        if any(c.isdigit() for c in word):
            found.add(word.casefold())
            continue
        if not word[0].isupper() or word == "I":
            continue
        before = text[: match.start()].rstrip("\"'“‘([ \t")
        if before and not sentence_end.search(before):
            found.add(word.casefold())
    return found


@pytest.mark.parametrize("seed", range(4))
def test_names_read_backwards_are_the_names_the_first_rule_found(seed):
    from server.memories.duplicates import names_and_numbers

    rng = random.Random(seed)
    pieces = ["Acme", "uses", "I", "v2", " ", ". ", "!\n", "? ", "…", ": ", ";", "\n", "\t", '"', "“", "(", "[",
              "\u3000", "\r", "Okta", "a-3", "INC-1234", "'", "‘"]  # fmt: skip
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        assert names_and_numbers(text) == _names_as_first_written(text), repr(text)
