"""One fact once, measured (issue 62): evidence recall on LongMemEval_S when every session's user
turns are remembered twice in different phrasings, and what the write-time check costs.

Quality. Each question with evidence is a space of its own; its haystack's user turns are
remembered through ``Esfis.remember`` (scope, barrier, the check, the write, the trail), then
each again as a paraphrase (``benchmarks.paraphrases``: how a person says a thing again in a
later session). Five sets: each turn once (no copies of ours; the check on, as ``remember``
does by default, so the haystack's own repeats are kept once), the same with ``dedupe=false``,
the copies with the check on, the copies with ``dedupe=false``,
and, as an ablation, the copies with neither the check nor the recall's fold (the fold replaced
here by a pass-through). Evidence recall@10: of a question's evidence turns (by text: a text
the haystack repeats is one turn), the share with a memory written for it (as said, or
paraphrased) among ``Esfis.recall``'s ten; averaged over the questions. The model's vectors are computed once and handed to the service by
``Recorded``, a real ``Embedder`` that answers from them (the real model for anything else).
Quick mode: the first ``QUICK_QUESTIONS`` questions of the shipped sample; full mode: the first
``FULL_QUESTIONS`` of the S split.

Cost. ``remember`` into a space of 10,000 memories, with the check and without, alternated on
one service; the model is the hashing test embedder in both (the same cost either way, so left
out): the difference of the two medians is what the check adds to a write.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from datetime import timedelta

import numpy as np
import pytest

from benchmarks.arms import scratch
from benchmarks.conftest import FULL
from benchmarks.longmemeval import embed_cached, load_workload, question_vectors
from benchmarks.paraphrases import paraphrase
from indexing.embedding.testing import HashingEmbedder
from indexing.identity import Identified
from server.facade import open_service
from server.facade import recall as recall_module
from server.memories.input import NewMemory, new_ids
from server.models import Held
from server.settings import Settings

# Quick mode (the default test run, where the paraphrases' vectors may not be cached yet): two
# questions; ESFIS_BENCH_DEDUPE_QUESTIONS asks for more (the sample holds 20).
QUICK_QUESTIONS = int(os.environ.get("ESFIS_BENCH_DEDUPE_QUESTIONS", "2"))
FULL_QUESTIONS = 60
SEEDED = 10_000  # memories in the target space when the write cost is measured
ROUNDS = 600 if FULL else 150
DIM = 384


# The cost's texts: ten words each from a vocabulary of 2,000 drawn by Zipf's law, as real text
# is, so a new text shares its common words with many rows (the check's worst case is words that
# every memory holds).
VOCABULARY = np.array([f"w{i}" for i in range(2000)])
ZIPF = 1 / np.arange(1, 2001)
ZIPF /= ZIPF.sum()


def _words(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(VOCABULARY, size=10, p=ZIPF))


class Recorded(Identified):
    """Vectors computed beforehand, by text; anything else from ``fallback`` (the real model)."""

    def __init__(self, texts: Sequence[str], vectors: np.ndarray, fallback) -> None:
        self._vectors = {t: vectors[i] for i, t in enumerate(texts)}
        self._fallback = fallback
        self._name, self._dimension, self._prompts = fallback.name, fallback.dimension, fallback.prompts

    def load(self) -> None:
        """The vectors are in memory already."""

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self._vectors]
        if missing:
            for t, v in zip(missing, self._fallback.embed_documents(missing)):
                self._vectors[t] = v
        return np.stack([self._vectors[t] for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._fallback.embed_query(text)


def _evidence_recall(arm: str, workload, chosen: list[int], embedder, q_vecs: np.ndarray) -> tuple[float, int, int]:
    """(evidence recall@10, memories stored, copies refused by the check) for one arm."""
    service = open_service(Settings(home=scratch(f"esfis-bench-dedupe-{arm}-") / "home", model=None), embedder=embedder)
    stored = refused = 0
    found: list[float] = []
    try:
        for qi in chosen:
            question = workload.questions[qi]
            service.operator.create_space(question.space)
            caller = service.caller("bench", space=question.space)
            rows = np.flatnonzero(workload.memory_space == qi)
            # memory id → the turn (text) it was first written for: a memory the check took for
            # another turn's copy answers for that turn only, so a wrong merge costs recall here
            text_of: dict[str, int] = {}
            passes = [False] if arm.startswith("once") else [False, True]
            evidence = {int(workload.memory_text[r]) for r in question.evidence}
            for said_again in passes:
                for row in rows:
                    text = workload.texts[workload.memory_text[row]]
                    if said_again:
                        text = paraphrase(text, seed=int(row))
                    written = service.remember(caller, text, dedupe=not arm.endswith("dedupe off"))
                    assert not isinstance(written, Held)
                    if written.duplicate_of is not None:
                        refused += 1
                    else:
                        stored += 1
                    text_of.setdefault(written.id, int(workload.memory_text[row]))
            answer = service.recall(caller, question.text, query_vector=q_vecs[qi]).memories
            texts_found = {text_of[m.id] for m in answer if m.id in text_of}
            found.append(len(evidence & texts_found) / len(evidence))
    finally:
        service.close()
    return float(np.mean(found)), stored, refused


@pytest.fixture(scope="module")
def lme():
    from indexing.embedding.embedder import load_embedder

    model = load_embedder(None)
    workload = load_workload(granularity="turn")
    with_evidence = [i for i, q in enumerate(workload.questions) if q.evidence]
    chosen = with_evidence[: FULL_QUESTIONS if FULL else QUICK_QUESTIONS]
    rows = np.flatnonzero(np.isin(workload.memory_space, chosen))
    originals = sorted({workload.texts[workload.memory_text[r]] for r in rows})
    again = sorted({paraphrase(workload.texts[workload.memory_text[r]], seed=int(r)) for r in rows})
    texts = originals + again
    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:12]
    vectors = np.asarray(embed_cached(texts, f"{model.name.lower()}-dedupe-{key}", model), dtype=np.float32)
    return workload, chosen, Recorded(texts, vectors, model), question_vectors(workload, model)


def test_evidence_recall_with_copies(benchmark, lme, monkeypatch):
    workload, chosen, embedder, q_vecs = lme
    benchmark.group = "dedupe-quality"
    arms = {}

    def measure():
        for arm in ("once", "once, dedupe off", "copies, dedupe on", "copies, dedupe off"):
            arms[arm] = _evidence_recall(arm, workload, chosen, embedder, q_vecs)
        # The ablation: what the copies cost when neither the write nor the recall folds them.
        with monkeypatch.context() as unfolded:
            unfolded.setattr(recall_module, "fold_candidates", lambda ranked, *_: (ranked, 0))
            arms["copies, no check, no fold"] = _evidence_recall(
                "copies, dedupe off", workload, chosen, embedder, q_vecs
            )

    benchmark.pedantic(measure, rounds=1, iterations=1)
    once, on, off = (arms[a][0] for a in ("once", "copies, dedupe on", "copies, dedupe off"))
    benchmark.extra_info.update(
        {
            "questions": len(chosen),
            "recall_once": once,
            "recall_dedupe_on": on,
            "recall_dedupe_off": off,
            "recall_once_dedupe_off": arms["once, dedupe off"][0],
            "recall_no_fold": arms["copies, no check, no fold"][0],
            "gap_dedupe_on": once - on,
            "stored": {a: arms[a][1] for a in arms},
            "refused_as_copies": {a: arms[a][2] for a in arms},
        }
    )
    print(
        f"\nevidence recall@10 over {len(chosen)} questions: once {once:.4f} (dedupe off: "
        f"{arms['once, dedupe off'][0]:.4f}), twice with dedupe on {on:.4f}, off {off:.4f}, "
        f"neither check nor fold {arms['copies, no check, no fold'][0]:.4f}"
    )
    print(f"stored / refused: { {a: arms[a][1:] for a in arms} }")
    assert arms["copies, dedupe on"][2] > 0  # the check refused copies
    assert arms["copies, dedupe off"][2] == 0  # and with it off, refused none


@pytest.fixture(scope="module")
def full_space():
    service = open_service(
        Settings(home=scratch("esfis-bench-dedupe-cost-") / "home", model=None), embedder=HashingEmbedder(dimension=DIM)
    )
    service.operator.create_space("big")
    since = service.clock() - timedelta(days=1)
    rng = np.random.default_rng(62)
    for _ in range(0, SEEDED, 2000):
        said = [_words(rng) for _ in range(2000)]
        vectors = rng.normal(size=(2000, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        service._parts.memories.write(
            [
                NewMemory(
                    id=i,
                    space="big",
                    text=said[j],
                    vector=v,
                    ai="seeder",
                    created_at=since,
                    valid_from=since,
                    valid_until=None,
                )
                for j, (i, v) in enumerate(zip(new_ids(2000), vectors))
            ]
        )
    yield service, rng
    service.close()


def test_write_cost_of_the_check(benchmark, full_space):
    service, rng = full_space
    benchmark.group = "dedupe-cost"
    caller = service.caller("bench", space="big")
    took: dict[bool, list[float]] = {True: [], False: []}
    n = [0]

    def remember_both():
        for dedupe in (True, False):
            n[0] += 1
            started = time.perf_counter()
            service.remember(caller, _words(rng), dedupe=dedupe)
            took[dedupe].append(time.perf_counter() - started)

    # Timed here, whether pytest-benchmark times or not (the default run disables it): the first
    # calls build the partition's lexical index, so they warm up and are left out.
    for _ in range(10 + ROUNDS):
        remember_both()
    benchmark.pedantic(remember_both, rounds=1, iterations=1)
    on, off = (float(np.median(took[d][10 : 10 + ROUNDS]) * 1000) for d in (True, False))
    benchmark.extra_info.update(
        {
            "memories": SEEDED,
            "rounds": ROUNDS,
            "p50_with_check_ms": on,
            "p50_without_check_ms": off,
            "check_ms": on - off,
        }
    )
    print(f"\nremember at {SEEDED} memories: p50 with the check {on:.3f} ms, without {off:.3f} ms")
