"""Quality side by side: LongMemEval_S (one space per question, one memory per user turn)
recalled through esfis and through the plain vector search of the same model in Chroma (a
collection per space) and sqlite-vec (a ``vec0`` partition key), with an exact numpy cosine
beside them as the harness's own check.

Every system holds the same vectors (all-MiniLM-L6-v2, the texts embedded once) and is asked
each question's vector inside the question's space; esfis is asked what its recall serves (the
partition's cosine fused with its BM25, then the feedback pass: ``benchmarks.evidence.served_default``,
which ``test_evidence_recall.py`` holds equal to ``Esfis.recall``). Figures per system over the
questions with evidence: recall_any@5, recall_all@10 (every evidence turn in the top 10) and
NDCG@10, and rows from another space (must be 0 everywhere).

Full mode: all 498 questions, the cached vectors (``python -m benchmarks.longmemeval``). Quick
mode: the shipped sample's first questions, embedded now.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from benchmarks.arms import scratch
from benchmarks.conftest import FULL
from benchmarks.evidence import EvidenceStore, metrics, served_default, top
from benchmarks.longmemeval import evidence_vectors, load_workload
from benchmarks.peers import Peer
from benchmarks.peers.chroma import Chroma
from benchmarks.peers.sqlite_vec import SqliteVec
from benchmarks.synthetic import Store
from indexing.embedding.embedder import load_embedder

QUICK_QUESTIONS = 3
SYSTEMS = ("esfis recall", "exact cosine (numpy)", "Chroma, a collection per space", "sqlite-vec, partition key")
_world: dict = {}


def world() -> dict:
    if not _world:
        workload = load_workload()
        questions = list(range(len(workload.questions) if FULL else QUICK_QUESTIONS))
        vectors, q_vecs = evidence_vectors(workload, questions, load_embedder(None))
        asked = [qi for qi in questions if workload.questions[qi].evidence]
        kept = np.isin(workload.memory_space, questions)
        rows = np.flatnonzero(kept)  # the memory rows of the questions' spaces: what every system holds
        store = Store(
            vectors=np.ascontiguousarray(vectors[workload.memory_text[rows]], dtype=np.float32),
            space_of=workload.memory_space[rows].astype(np.int32),
            expired=np.zeros(len(rows), dtype=bool),
            spaces=list(workload.spaces),
            scopes={},
        )
        _world.update(workload=workload, questions=questions, asked=asked, q_vecs=q_vecs, store=store, rows=rows)
    return _world


def ranked_by(system: str, w: dict, held: object, qi: int) -> list[int]:
    """The memory rows ``system`` ranks first for question ``qi``, best first."""
    workload, store, rows, qvec = w["workload"], w["store"], w["rows"], w["q_vecs"][qi]
    if system == "esfis recall":
        ev: EvidenceStore = held  # type: ignore[assignment]
        hits = served_default(ev.store, ev.key(qi), qvec, workload.questions[qi].text)
        return [int(h.id[1:]) for h in hits]  # EvidenceStore's ids are "m<memory row>"
    if system == "exact cosine (numpy)":
        mine = np.flatnonzero(store.space_of == qi)
        return [int(rows[mine[i]]) for i in top(store.vectors[mine] @ qvec)]
    peer: Peer = held  # type: ignore[assignment]
    return [int(rows[r]) for r in peer.search(peer.arms[0], [workload.spaces[qi]], qvec, 10)]


def load(system: str, w: dict) -> object:
    workload, store = w["workload"], w["store"]
    if system == "esfis recall":
        by_text = np.zeros((len(workload.texts), store.vectors.shape[1]), dtype=np.float32)
        by_text[workload.memory_text[w["rows"]]] = store.vectors
        return EvidenceStore(workload, by_text, w["questions"], root=scratch("esfis-peers-quality-"))
    if system == "exact cosine (numpy)":
        return None
    peer: Peer = (
        Chroma(scratch("esfis-peers-quality-chroma-"), where=False)
        if system.startswith("Chroma")
        else SqliteVec(scratch("esfis-peers-quality-sqlite-vec-"))
    )
    peer.load(store)
    return peer


def close(held: object) -> None:
    if isinstance(held, EvidenceStore | Peer):
        held.close()


@pytest.mark.parametrize("system", SYSTEMS)
def test_evidence_recall_side_by_side(benchmark, system):
    w = world()
    workload = w["workload"]
    started = time.perf_counter()
    held = load(system, w)
    load_s = time.perf_counter() - started
    try:
        values, other = [], 0
        for qi in w["asked"]:
            ranked = ranked_by(system, w, held, qi)
            other += sum(1 for r in ranked if workload.memory_space[r] != qi)
            values.append(metrics(ranked, set(workload.questions[qi].evidence)))
        means = np.mean(values, axis=0)
        benchmark.extra_info.update(
            {
                "system": system,
                "questions": len(values),
                "memories": int(w["store"].size),
                "spaces": len(w["questions"]),
                "load_seconds": round(load_s, 2),
                "any@5": float(means[0]),
                "all@10": float(means[2]),
                "ndcg@10": float(means[3]),
                "other_space_rows": other,
            }
        )
        order = iter(w["asked"] * 3)
        benchmark.pedantic(lambda: ranked_by(system, w, held, next(order)), rounds=min(len(w["asked"]), 50))
    finally:
        close(held)
    assert other == 0
    assert len(values) == len(w["asked"]) > 0
    _world.setdefault("all@10", {})[system] = float(means[2])
    if system == "sqlite-vec, partition key":  # exact, as numpy's cosine: the harness asks both alike
        assert abs(_world["all@10"][system] - _world["all@10"]["exact cosine (numpy)"]) <= 0.01
