"""The int8 query graph against the fp32 one (``indexing.embedding.query_graph``): what a query
costs, how far its vector moves, and what the swap does to evidence recall on LongMemEval_S.

Full mode: all 498 questions, their haystacks from the cached fp32 vectors (``python -m
benchmarks.longmemeval``); quick mode: the shipped sample's first questions, embedded now. Every
stored vector is fp32 in both arms; only the query's graph differs, as in the product.

Reported: CPU per query on each graph (this process's CPU time over the questions, one at a
time); the least cosine of a question's served vector to its fp32 one; the same for word
fragments of 1 to 40 tokens from the questions' own words, by length (what a short query does);
evidence recall (any@5, all@5, all@10, nDCG@10) of esfis's served ranking under each arm.
Targets (issue 34): every question at cosine ≥ 0.99; all@10 within 0.005 of fp32's.
"""

from __future__ import annotations

import random
import time

import numpy as np

from benchmarks.conftest import FULL
from benchmarks.evidence import EvidenceStore, metrics, served_default
from benchmarks.longmemeval import load_workload, question_vectors, text_vectors
from indexing.embedding.onnx_embedder import OnnxEmbedder
from indexing.embedding.query_graph import SHORT_QUERY_TOKENS, cosines
from server.settings import Settings

QUICK_QUESTIONS = 3
FRAGMENT_LENGTHS = ((1, 4), (4, 8), (8, 12), (12, 20), (20, 40))
METRIC_NAMES = ("any@5", "all@5", "all@10", "ndcg@10")


def _embedders() -> tuple[OnnxEmbedder, OnnxEmbedder]:
    cache = Settings.from_env().cache
    assert cache is not None
    int8, fp32 = OnnxEmbedder(cache=cache), OnnxEmbedder(cache=cache, query_precision="fp32")
    int8.load()
    fp32.load()
    assert int8.query_runtime == "onnx int8", int8.int8_refused
    return int8, fp32


def _cpu_ms(embed, texts: list[str]) -> float:
    embed(texts[0])
    began = time.process_time()
    for t in texts:
        embed(t)
    return 1000 * (time.process_time() - began) / len(texts)


def _fragments(words: list[str], fp32: OnnxEmbedder) -> dict[tuple[int, int], list[str]]:
    rng = random.Random(34)
    out: dict[tuple[int, int], list[str]] = {span: [] for span in FRAGMENT_LENGTHS}
    graph = fp32._query
    assert graph is not None
    for _ in range(2000):
        text = " ".join(rng.sample(words, rng.choice((1, 2, 3, 4, 5, 6, 8, 10, 14, 20, 28))))
        n = len(graph.encode([text])[0].ids)
        for span in FRAGMENT_LENGTHS:
            if span[0] <= n < span[1] and len(out[span]) < 60:
                out[span].append(text)
    return out


def test_int8_query_graph_against_fp32(benchmark):
    int8, fp32 = _embedders()
    workload = load_workload()
    if FULL:
        questions = list(range(len(workload.questions)))
        vectors = np.asarray(text_vectors(workload), dtype=np.float32)
        reference = question_vectors(workload)  # what the other benchmarks query with: the int8 graph's
    else:
        questions = list(range(QUICK_QUESTIONS))
        needed = np.unique(workload.memory_text[workload.memory_space < QUICK_QUESTIONS])
        vectors = np.zeros((len(workload.texts), fp32.dimension), dtype=np.float32)
        vectors[needed] = fp32.embed_documents([workload.texts[i] for i in needed])
        reference = None
    asked = [workload.questions[i].text for i in questions]
    got = int8.embed_queries(asked)
    own = fp32.embed_queries(asked)
    if reference is not None:  # the other benchmarks ask the questions as the product does
        assert float(cosines(got, reference[questions]).min()) > 1 - 1e-5
    question_cosine = cosines(own, got)

    words = sorted({w for t in (q.text for q in workload.questions) for w in t.split()})
    by_length = {}
    for (low, high), texts in _fragments(words, fp32).items():
        if texts:
            c = cosines(fp32.embed_queries(texts), int8.embed_queries(texts))
            by_length[f"{low}-{high - 1} tokens"] = {"texts": len(texts), "min_cosine": round(float(c.min()), 4)}

    ev = EvidenceStore(workload, vectors, questions)
    try:
        scores = {"fp32": [], "int8": []}
        for n, qi in enumerate(questions):
            q = workload.questions[qi]
            if not q.evidence:
                continue
            rows = ev.rows[qi]
            evidence = set(rows[np.isin(rows, list(q.evidence))].tolist())
            for arm, qvec in (("fp32", own[n]), ("int8", got[n])):
                served = served_default(ev.store, ev.key(qi), qvec, q.text)
                ranked = [int(h.id[1:]) for h in served]
                scores[arm].append(metrics(ranked, evidence))
    finally:
        ev.close()
    recall = {arm: dict(zip(METRIC_NAMES, map(float, np.mean(v, axis=0)))) for arm, v in scores.items()}
    cycle = iter(asked * 3)
    benchmark.pedantic(lambda: int8.embed_query(next(cycle)), rounds=min(len(asked), 200), iterations=1)
    benchmark.extra_info.update(
        {
            "questions": len(asked),
            "questions_with_evidence": len(scores["fp32"]),
            "short_query_tokens": SHORT_QUERY_TOKENS,
            "fp32_cpu_ms_per_query": round(_cpu_ms(fp32.embed_query, asked), 3),
            "int8_cpu_ms_per_query": round(_cpu_ms(int8.embed_query, asked), 3),
            "min_cosine_questions": round(float(question_cosine.min()), 4),
            "fragments_min_cosine": by_length,
            **{f"{arm}/{k}": round(v, 4) for arm, r in recall.items() for k, v in r.items()},
            "all@10_difference": round(recall["int8"]["all@10"] - recall["fp32"]["all@10"], 4),
        }
    )
    print(benchmark.extra_info)
    assert len(scores["fp32"]) > 0
    assert 0.0 <= recall["int8"]["all@10"] <= 1.0
