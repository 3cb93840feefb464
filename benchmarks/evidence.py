"""Evidence recall on LongMemEval_S, through esfis's own store: which method finds the turns (or
sessions) that hold the answer.

Each question's haystack is its own partition in a real LanceDB store (``VectorStore``), one memory
per user turn, or per session (its user turns joined). Every method ranks the rows of that partition
only, from the signals the product computes there: the cosine of the stored vectors and BM25 of the
partition's own lexical index (``indexing.relevance.lexical``), fused by
``indexing.relevance.fusion``. The default method is also asked of ``VectorStore.search`` itself,
and the two rankings must agree, so the default's figures are the product's.

Metrics per question with evidence, averaged per question type and overall: recall_any@5 (some
evidence in the top 5), recall_all@5 and recall_all@10 (all of it), NDCG@10 (binary gains).

Three experiments ride along. ``neighbour``: a turn's cosine plus a share of the cosine of the
turn before it in its session, at query time. ``neighbour keys``: the same context at write
time, in the stored vector only (its text and the lexical index stay the turn's own): the
embedding of the turn before and the turn, or the mean of their two vectors (``mean keys``, no
new embedding), a session's first turn keyed by itself alone. ``split``: each haystack split
into two partitions of unequal size (a fifth of the sessions, and the rest), searched separately
and merged by score, as a recall that reaches several partitions does: a fusion whose scores do
not compare across partitions loses evidence there.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.longmemeval import Question, Workload
from indexing.partitions.partition import LivePartition
from indexing.partitions.store import VectorStore
from indexing.relevance.feedback import FEEDBACK_ROWS, FEEDBACK_WEIGHT, with_feedback
from indexing.relevance.fusion import DEFAULT, Fusion, fuse_lexical
from indexing.relevance.lexical import LexicalIndex
from indexing.relevance.words import STEM
from indexing.rows import OPEN_END, RowBatch, merge_best
from server.facade.recall import RUNNERS_UP

METRICS = ("any@5", "all@5", "all@10", "ndcg@10")
NOW = 10**15  # microseconds: every row is valid
FUSIONS: dict[str, Fusion] = {
    "cosine": Fusion("cosine"),
    **{f"anchored w={w}": Fusion("anchored", w) for w in (0.3, 0.5, 1.0, 2.0)},
    **{f"z w={w}": Fusion("z", w) for w in (0.3, 0.5)},
    **{f"scaled w={w}": Fusion("scaled", w) for w in (0.3, 0.5, 0.7, 1.0)},
    "rrf k=60": Fusion("rrf", 1.0, 60),
}
FUSED_NAME = next(name for name, f in FUSIONS.items() if f == DEFAULT)
DEFAULT_NAME = f"{FUSED_NAME} + feedback"  # what esfis's recall does: the fusion, then feedback
POOL = 10 + RUNNERS_UP  # the candidates a recall of 10 takes from each partition
NEIGHBOUR_SHARES = (0.2, 0.4)
KEY_OWN_SHARES = (0.5, 0.7)  # a mean key: the turn's own share, the turn before's the rest
BM25_VARIANTS = ((0.9, 0.4), (1.2, 0.3), (1.5, 0.75))  # the product's: K1=1.2, B=0.75
SPLIT = ("cosine", "anchored w=2.0", "z w=0.5", "scaled w=0.5", "rrf k=60", "scaled w=0.5 + feedback")


def metrics(ranked: list[int], evidence: set[int]) -> np.ndarray:
    top5, top10 = set(ranked[:5]), set(ranked[:10])
    dcg = sum(1 / math.log2(i + 2) for i, r in enumerate(ranked[:10]) if r in evidence)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(evidence), 10)))
    return np.array([bool(evidence & top5), evidence <= top5, evidence <= top10, dcg / ideal], dtype=float)


def top(scores: np.ndarray, k: int = 10) -> list[int]:
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


@dataclass
class Table:
    """Per method, per question type: the metric rows of each question."""

    rows: dict[str, dict[str, list[np.ndarray]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))

    def add(self, method: str, qtype: str, values: np.ndarray) -> None:
        self.rows[method][qtype].append(values)
        self.rows[method]["all"].append(values)

    def summary(self) -> dict[str, dict[str, dict[str, float]]]:
        return {
            method: {
                qtype: {"questions": len(v), **dict(zip(METRICS, map(float, np.mean(v, axis=0))))}
                for qtype, v in sorted(types.items())
            }
            for method, types in self.rows.items()
        }


class EvidenceStore:
    """A real store holding one partition per question of a workload."""

    def __init__(self, workload: Workload, vectors: np.ndarray, questions: list[int], root: Path | None = None) -> None:
        self.workload = workload
        self.root = root or Path(tempfile.mkdtemp(prefix="esfis-evidence-"))
        self.store = VectorStore(self.root, model="bench", dimension=vectors.shape[1])
        self.rows: dict[int, np.ndarray] = {}
        for qi in questions:
            rows = np.flatnonzero(workload.memory_space == qi)
            self.rows[qi] = rows
            n = len(rows)
            self.store.add(
                self.key(qi),
                RowBatch(
                    ids=[f"m{r}" for r in rows],
                    texts=[workload.texts[t] for t in workload.memory_text[rows]],
                    vectors=np.ascontiguousarray(vectors[workload.memory_text[rows]], dtype=np.float32),
                    created_at=np.zeros(n, dtype=np.int64),
                    valid_from=np.zeros(n, dtype=np.int64),
                    valid_until=np.full(n, OPEN_END, dtype=np.int64),
                ),
            )

    def key(self, qi: int) -> str:
        return f"space:{self.workload.spaces[qi]}"

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def evaluate(
    ev: EvidenceStore, q_vecs: np.ndarray, questions: list[int], *, split: bool = True, keys: np.ndarray | None = None
) -> dict:
    """Every method on every question with evidence; the default also through ``search``.
    ``keys``: each memory row's neighbour key vector (turn level), for the write-time rows."""
    w, table, split_table = ev.workload, Table(), Table()
    mismatches = 0
    for qi in questions:
        q: Question = w.questions[qi]
        if not q.evidence:
            continue
        rows, qvec = ev.rows[qi], q_vecs[qi]
        evidence = set(np.flatnonzero(np.isin(rows, list(q.evidence))).tolist())
        snap = ev.store.live_partition(ev.key(qi))
        n = snap.rows
        valid = np.ones(n, dtype=bool)
        everything = np.arange(n)
        cos = snap.vectors[:n] @ qvec
        ranked: dict[str, np.ndarray] = {}
        for name, fusion in FUSIONS.items():
            ranked[name] = fuse_lexical(
                snap.lexicon(), snap.vectors, qvec, text=q.text, rows=everything, cos=cos, valid=valid, fusion=fusion
            ).scores
        ranked[DEFAULT_NAME] = feedback_scores(snap.vectors[:n], qvec, cos, ranked[FUSED_NAME])
        index = snap.lexicon()
        ranked["bm25 alone"] = index.score(index.query_terms(q.text), valid).scores
        other = LexicalIndex.build(snap.texts[:n], stem=not STEM)  # the other analyser, same rows
        lex = other.score(other.query_terms(q.text), valid)
        ranked[f"{FUSED_NAME}, {'no ' if STEM else ''}plural folding"] = DEFAULT(cos, lex.scores, ideal=lex.ideal)
        for k1, b in BM25_VARIANTS:
            lex = index.score(index.query_terms(q.text), valid, k1=k1, b=b)
            ranked[f"{FUSED_NAME}, BM25 k1={k1} b={b}"] = DEFAULT(cos, lex.scores, ideal=lex.ideal)
        if w.previous is not None:
            prev = w.previous[rows]
            local_prev = np.where(prev >= 0, np.searchsorted(rows, prev), -1)
            for share in NEIGHBOUR_SHARES:
                before = np.where(local_prev >= 0, cos[np.maximum(local_prev, 0)], 0.0)
                smoothed = (cos + share * before).astype(np.float32)
                ranked[f"neighbour {share} + {FUSED_NAME}"] = fuse_lexical(
                    snap.lexicon(),
                    snap.vectors,
                    qvec,
                    text=q.text,
                    rows=everything,
                    cos=smoothed,
                    valid=valid,
                    fusion=DEFAULT,
                ).scores
            own = snap.vectors[:n]
            before_vecs = np.where((local_prev >= 0)[:, None], own[np.maximum(local_prev, 0)], own)
            for share in KEY_OWN_SHARES:
                mean = share * own + (1 - share) * before_vecs
                mean /= np.linalg.norm(mean, axis=1, keepdims=True)
                ranked.update(keyed(f"mean keys {share}/{1 - share:.1f}", mean, snap, qvec, q.text))
            if keys is not None:
                ranked.update(keyed("neighbour keys", np.ascontiguousarray(keys[rows]), snap, qvec, q.text))
        for name, scores in ranked.items():
            table.add(name, q.type, metrics(top(scores), evidence))
        served = served_default(ev.store, ev.key(qi), qvec, q.text)
        # Compared by text: a text repeated in a haystack ties with itself, in either order.
        mismatches += [h.text for h in served] != [snap.texts[i] for i in top(ranked[DEFAULT_NAME])]
        if split:
            for name in SPLIT:
                split_table.add(
                    name, q.type, metrics(split_recall(snap, qvec, q.text, w, rows, FUSIONS.get(name)), evidence)
                )
    return {
        "methods": table.summary(),
        "split": split_table.summary(),
        "default": DEFAULT_NAME,
        "default_mismatches": mismatches,
    }


def feedback_scores(vectors: np.ndarray, qvec: np.ndarray, cos: np.ndarray, fused: np.ndarray) -> np.ndarray:
    """The harness's own pseudo-relevance feedback, written from its definition: the query moved
    towards the best ``FEEDBACK_ROWS`` fused rows, the best ``POOL`` rescored by their cosine to
    it plus their lexical bonus; the rest out of the running."""
    order = np.argsort(-fused, kind="stable")
    moved = qvec + FEEDBACK_WEIGHT * vectors[order[:FEEDBACK_ROWS]].mean(axis=0)
    moved /= np.linalg.norm(moved)
    pool = order[:POOL]
    scores = np.full(len(fused), -np.inf, dtype=np.float32)
    scores[pool] = vectors[pool] @ moved + (fused[pool] - cos[pool])
    return scores


def keyed(name: str, keys: np.ndarray, snap: LivePartition, qvec: np.ndarray, text: str) -> dict[str, np.ndarray]:
    """Cosine, the fusion and the default over other stored vectors of the same rows: the
    partition's own lexical index, since the keys change the vectors only; feedback moves the
    query towards the keys, as a store holding them would."""
    n = len(keys)
    cos = (keys @ qvec).astype(np.float32)
    fused = fuse_lexical(
        snap.lexicon(), keys, qvec, text=text, rows=np.arange(n), cos=cos, valid=np.ones(n, dtype=bool), fusion=DEFAULT
    ).scores
    return {
        f"{name}, cosine": cos,
        f"{name}, {FUSED_NAME}": fused,
        f"{name}, {DEFAULT_NAME}": feedback_scores(keys, qvec, cos, fused),
    }


def served_default(store: VectorStore, key: str, qvec: np.ndarray, text: str) -> list:
    """The ten hits esfis's recall makes of one partition: ``search`` then feedback."""
    result = with_feedback([store.search(key, qvec, POOL, now=NOW, text=text)], qvec)[0]
    return [result.hit(j) for j in range(min(10, len(result)))]


def split_recall(
    snap: LivePartition, qvec: np.ndarray, text: str, w: Workload, rows: np.ndarray, fusion: Fusion | None
) -> list[int]:
    """The haystack as two partitions (every fifth session, and the rest), merged by score."""
    if w.previous is not None:
        session = np.cumsum(w.previous[rows] < 0)
    else:
        session = np.arange(len(rows))
    pool: list[tuple[float, int]] = []
    results = []
    for part in (session % 5 == 0, session % 5 != 0):
        local = np.flatnonzero(part)
        if not len(local):
            continue
        sub = LivePartition(dimension=snap.dimension)
        sub.append(
            RowBatch(
                ids=[str(i) for i in local],
                texts=[snap.texts[i] or "" for i in local],
                vectors=snap.vectors[local],
                created_at=np.zeros(len(local), dtype=np.int64),
                valid_from=np.zeros(len(local), dtype=np.int64),
                valid_until=np.full(len(local), OPEN_END, dtype=np.int64),
            )
        )
        if fusion is None:  # the product's path: each partition searched, then feedback over both
            results.append(sub.search(qvec, POOL, now=NOW, text=text))
            continue
        cos = sub.vectors[: sub.rows] @ qvec
        fused = fuse_lexical(
            sub.lexicon(),
            sub.vectors,
            qvec,
            text=text,
            rows=np.arange(sub.rows),
            cos=cos,
            valid=np.ones(sub.rows, dtype=bool),
            fusion=fusion,
        )
        pool.extend((float(fused.scores[j]), int(local[j])) for j in top(fused.scores))
    if fusion is None:
        merged = merge_best(with_feedback(results, qvec), 10)
        return [int(hit.id) for _, hit in merged]
    pool.sort(key=lambda pair: -pair[0])
    return [row for _, row in pool[:10]]


def markdown(result: dict, title: str, pick: Callable[[str], bool] = lambda name: True) -> str:
    """One table: a row per method and question type."""
    lines = [
        f"**{title}**",
        "",
        "| method | question type | questions | any@5 | all@5 | all@10 | ndcg@10 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for method, types in result.items():
        if not pick(method):
            continue
        for qtype, m in types.items():
            label = f"**{qtype}**" if qtype == "all" else qtype
            lines.append(
                f"| {method} | {label} | {m['questions']} | " + " | ".join(f"{m[k]:.3f}" for k in METRICS) + " |"
            )
    return "\n".join(lines)


def overall(result: dict) -> str:
    """One line per method: the figures over every question."""
    lines = ["| method | any@5 | all@5 | all@10 | ndcg@10 |", "| --- | --- | --- | --- | --- |"]
    for method, types in result.items():
        m = types["all"]
        lines.append(f"| {method} | " + " | ".join(f"{m[k]:.3f}" for k in METRICS) + " |")
    return "\n".join(lines)


def evidence_section(results: Path) -> list[str]:
    """The report's section: the overall table of each level from ``evidence-recall.json``."""
    path = results / "evidence-recall.json"
    if not path.exists():
        return []
    import json

    saved = json.loads(path.read_text())
    out = ["## Evidence recall, LongMemEval_S (benchmarks/test_evidence_recall.py; per type: EVIDENCE.md)", ""]
    for level, r in sorted(saved.items(), reverse=True):
        questions = r["methods"]["cosine"]["all"]["questions"]
        out += [
            f"{level} level, {questions} questions with evidence, commit {r['commit']}"
            f"{' (dirty)' if r['dirty'] else ''}; the default is {r['default']}.",
            "",
            overall(r["methods"]),
            "",
        ]
    return out
