"""LongMemEval_S as a multi-tenant workload: each question its own space.

121,864 user turns over 498 spaces (``lme/<question_id>``); many distractor sessions are shared
between haystacks, so the same text sits in many spaces. Texts are embedded once (98,780
distinct) with the real model and cached outside the repository, in chunks, so an interrupted
run resumes.

    python -m benchmarks.longmemeval          # embed and cache the full set (long, on a CPU)
    python -m benchmarks.longmemeval sample   # rewrite the sample the quick mode reads
    python -m benchmarks.longmemeval neighbour  # embed the neighbour keys (benchmarks/evidence.py)

Quick mode reads the sample shipped in ``benchmarks/data/`` (the first questions of the S split
with their haystacks; MIT licence, see its README), so the default test run needs nothing beside
the clone. Full mode reads the whole set from ``$ESFIS_BENCH_DATA`` or ``../shared/data`` beside
the checkout, and says where to put it when it is missing.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.conftest import FULL

SAMPLE = Path(__file__).resolve().parent / "data" / "longmemeval_s_sample.json.gz"
SAMPLE_QUESTIONS = 20
# The granularities measured: both in quick mode; in full mode the turn level (one memory per user
# turn, what esfis stores), and the session level too only when ESFIS_BENCH_SESSIONS=1 (its 23,743
# long texts are about 13 minutes of embedding on two cores, a third of a fresh machine's run).
LEVELS = ("turn", "session") if not FULL or os.environ.get("ESFIS_BENCH_SESSIONS") == "1" else ("turn",)
FULL_NAME = Path("longmemeval") / "longmemeval_s_user_turns.json.gz"


def full_data() -> Path:
    """The full S split: ``$ESFIS_BENCH_DATA/longmemeval/…``, else ``../shared/data`` beside the
    checkout; a clear error naming both when neither holds it."""
    candidates = [Path(os.environ["ESFIS_BENCH_DATA"])] if os.environ.get("ESFIS_BENCH_DATA") else []
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "data")
    for folder in candidates:
        if (folder / FULL_NAME).is_file():
            return folder / FULL_NAME
    raise FileNotFoundError(
        f"the full LongMemEval_S data is not here: put {FULL_NAME} under $ESFIS_BENCH_DATA or ../shared/data "
        "beside the checkout (LongMemEval, MIT licence: https://github.com/xiaowu0162/LongMemEval)"
    )


CHUNK = 2048


def cache_dir() -> Path:
    base = os.environ.get("ESFIS_BENCH_CACHE") or os.path.expanduser("~/.cache/esfis/bench")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    space: str
    evidence: frozenset[int]  # memory rows holding the answer (in this question's space)
    type: str = ""  # LongMemEval's question_type (multi-session, temporal-reasoning, …)


@dataclass(frozen=True)
class Workload:
    texts: list[str]  # distinct texts
    memory_text: np.ndarray  # memory row → text index
    memory_space: np.ndarray  # memory row → space index
    spaces: list[str]
    questions: list[Question]
    granularity: str = "turn"  # one memory per user turn, or per session (its user turns joined)
    previous: np.ndarray | None = None  # turn level: memory row → the row before it in its session, or -1


def load_workload(full: bool | None = None, granularity: str = "turn") -> Workload:
    """The workload: the whole S split in full mode, else the shipped sample.

    ``granularity="session"`` makes one memory of each session (its user turns joined by a
    newline); a session is evidence when any of its turns is."""
    if granularity not in ("turn", "session"):
        raise ValueError(f"granularity must be turn or session, not {granularity!r}")
    full = FULL if full is None else full
    raw = json.load(gzip.open(full_data() if full else SAMPLE))
    sessions = raw["sessions"]
    text_index: dict[str, int] = {}
    texts: list[str] = []
    mem_text: list[int] = []
    mem_space: list[int] = []
    previous: list[int] = []
    spaces: list[str] = []
    questions: list[Question] = []
    for q in raw["questions"]:
        space_idx = len(spaces)
        space = f"lme/{q['question_id'].lower().replace('_', '-')}"
        spaces.append(space)
        evidence = set()
        for sid in q["haystack"]:
            session = sessions[sid]
            marked = set(session.get("evidence") or [])
            turns = [(no, t) for no, t in enumerate(session["turns"]) if t.strip()]
            if granularity == "session":
                turns = [(0, "\n".join(t for _, t in turns))] if turns else []
                marked = {0} if marked else set()
            before = -1
            for turn_no, text in turns:
                if text not in text_index:
                    text_index[text] = len(texts)
                    texts.append(text)
                if turn_no in marked:
                    evidence.add(len(mem_text))
                previous.append(before)
                before = len(mem_text)
                mem_text.append(text_index[text])
                mem_space.append(space_idx)
        questions.append(Question(q["question_id"], q["question"], space, frozenset(evidence), q["question_type"]))
    return Workload(
        texts,
        np.array(mem_text),
        np.array(mem_space),
        spaces,
        questions,
        granularity,
        np.array(previous) if granularity == "turn" else None,
    )


def text_vectors(workload: Workload, embedder=None) -> np.ndarray:
    """The vectors of every distinct text, from the cache, embedding what is missing."""
    prefix = "lme" if workload.granularity == "turn" else f"lme-{workload.granularity}"
    return embed_cached(workload.texts, prefix, embedder)


def evidence_vectors(workload: Workload, questions: list[int], embedder) -> tuple[np.ndarray, np.ndarray]:
    """(every distinct text's vector, each question's vector): in full mode all of them, from the
    cache; in quick mode only the texts of ``questions``' haystacks, embedded now (the rest zero)."""
    if FULL:
        return np.asarray(text_vectors(workload), dtype=np.float32), question_vectors(workload)
    needed = np.unique(workload.memory_text[np.isin(workload.memory_space, questions)])
    vectors = np.zeros((len(workload.texts), embedder.dimension), dtype=np.float32)
    vectors[needed] = embedder.embed_documents([workload.texts[i] for i in needed])
    q_vecs = np.zeros((len(workload.questions), embedder.dimension), dtype=np.float32)
    q_vecs[questions] = np.stack([embedder.embed_query(workload.questions[i].text) for i in questions])
    return vectors, q_vecs


def embed_cached(texts: list[str], prefix: str, embedder=None) -> np.ndarray:
    """Vectors of ``texts`` cached under ``prefix`` in ``cache_dir()``, in chunks so an
    interrupted run resumes."""
    target = cache_dir() / f"{prefix}-texts-{len(texts)}.npy"
    if target.exists():
        return np.load(target, mmap_mode="r")
    if embedder is None:
        from indexing.embedding.embedder import load_embedder

        embedder = load_embedder(None)
    chunks = cache_dir() / f"{prefix}-chunks-{len(texts)}"
    chunks.mkdir(exist_ok=True)
    started = time.time()
    for start in range(0, len(texts), CHUNK):
        part = chunks / f"{start:07d}.npy"
        if part.exists():
            continue
        vectors = embedder.embed_documents(texts[start : start + CHUNK])
        np.save(part.with_suffix(".tmp.npy"), vectors)
        os.replace(part.with_suffix(".tmp.npy"), part)
        done = start + CHUNK
        print(
            f"{prefix}: {min(done, len(texts))}/{len(texts)} texts, {done / (time.time() - started):.0f}/s",
            file=sys.stderr,
            flush=True,
        )
    vectors = np.concatenate([np.load(chunks / f"{s:07d}.npy") for s in range(0, len(texts), CHUNK)])
    np.save(target, vectors)
    return vectors


def neighbour_texts(workload: Workload) -> tuple[list[str], np.ndarray]:
    """Turn level, the haystacks of questions with evidence only (the only ones measured): the
    distinct keys widened with the turn before in the same session (that turn, a newline, the
    turn), and each memory row's index among them; -1 for a session's first turn, whose key is
    its text alone, and for the rows of the haystacks not measured."""
    if workload.previous is None:
        raise ValueError("neighbour keys are of the turn level")
    measured = np.array([bool(q.evidence) for q in workload.questions])[workload.memory_space]
    index: dict[str, int] = {}
    key = np.full(len(workload.memory_text), -1)
    for row in np.flatnonzero(measured & (workload.previous >= 0)):
        before = workload.texts[workload.memory_text[workload.previous[row]]]
        text = f"{before}\n{workload.texts[workload.memory_text[row]]}"
        key[row] = index.setdefault(text, len(index))
    return list(index), key


def neighbour_vectors(workload: Workload, embedder=None) -> np.ndarray:
    """Each memory row's neighbour key vector (rows, dimension): a widened key's own embedding,
    cached like the texts', or the turn's vector where the key is the turn alone."""
    texts, key = neighbour_texts(workload)
    widened = embed_cached(texts, "lme-neighbour", embedder)
    alone = text_vectors(workload, embedder)
    out = np.asarray(alone, dtype=np.float32)[workload.memory_text]
    out[key >= 0] = widened[key[key >= 0]]
    return out


def question_vectors(workload: Workload, embedder=None) -> np.ndarray:
    """The questions as the product embeds a query (the int8 graph by default), cached under the
    graph's name: a cache made on the other graph is never taken for this one."""
    if embedder is None:
        from indexing.embedding.embedder import load_embedder

        embedder = load_embedder(None)
    from indexing.embedding.query_graph import QUANTIZED_VERSION

    graph = f"int8-{QUANTIZED_VERSION}" if getattr(embedder, "query_runtime", "") == "onnx int8" else "fp32"
    target = cache_dir() / f"lme-questions-{graph}-{len(workload.questions)}.npy"
    if target.exists():
        return np.load(target)
    vectors = np.stack([embedder.embed_query(q.text) for q in workload.questions])
    np.save(target, vectors)
    return vectors


def write_sample(questions: int = SAMPLE_QUESTIONS) -> Path:
    """The first ``questions`` of the full set with every session their haystacks name."""
    raw = json.load(gzip.open(full_data()))
    chosen = raw["questions"][:questions]
    sessions = sorted({sid for q in chosen for sid in q["haystack"]})
    sample = {"sessions": {sid: raw["sessions"][sid] for sid in sessions}, "questions": chosen}
    SAMPLE.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(SAMPLE, "wb", compresslevel=9, mtime=0) as out:
        out.write(json.dumps(sample, sort_keys=True).encode())
    return SAMPLE


if __name__ == "__main__":
    if sys.argv[1:] == ["sample"]:
        print(write_sample(), file=sys.stderr)
        sys.exit(0)
    if sys.argv[1:] == ["neighbour"]:  # the write-time neighbour keys of the evidence benchmark
        neighbour_vectors(load_workload(full=True))
        sys.exit(0)
    w = load_workload(full=True)
    print(
        f"{len(w.memory_text)} memories, {len(w.texts)} distinct texts, {len(w.spaces)} spaces, "
        f"{sum(1 for q in w.questions if q.evidence)} questions with evidence",
        file=sys.stderr,
    )
    started = time.time()
    question_vectors(w)
    text_vectors(w)
    if "session" in LEVELS:
        text_vectors(load_workload(full=True, granularity="session"))
    print(f"LongMemEval vectors ready ({', '.join(LEVELS)}): {time.time() - started:.0f} s", file=sys.stderr)
