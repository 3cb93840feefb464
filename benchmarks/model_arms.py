"""Embedding models side by side on LongMemEval_S: quality at turn and session level, and the
cost of a query, for each model arm, in one run.

Arms: ``minilm`` (the default, all-MiniLM-L6-v2, Apache 2.0), ``embeddinggemma`` (EmbeddingGemma-300m,
Gemma Terms of Use, fp32 ONNX, assembled by ``benchmarks.embeddinggemma``) and
``embeddinggemma-int8`` (the same graph with its weights quantized to int8 by ONNX Runtime's
dynamic quantization; a benchmark arm only, not a product setting: its vectors are not the fp32
model's). Each arm embeds with the model's own prompts, through the product's ``OnnxEmbedder``.
Texts are embedded once per arm and cached (``benchmarks.longmemeval.embed_cached``).

    python -m benchmarks.model_arms --data sample --levels turn --arms minilm,embeddinggemma \\
        --out benchmarks/results/partial/evidence-models-COMMIT.json

Full mode of ``benchmarks/test_evidence_recall.py`` runs the default arm on the whole S split, and
the others ``ESFIS_BENCH_MODELS`` names (``chosen_arms``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.embeddinggemma import CACHE, ensure_model
from benchmarks.evidence import METRICS, EvidenceStore, evaluate
from benchmarks.longmemeval import Workload, cache_dir, embed_cached, load_workload, text_vectors
from indexing.embedding.embedder import Embedder, default_cache, load_embedder
from indexing.embedding.onnx_embedder import OnnxEmbedder
from indexing.embedding.onnx_export import ensure_export
from indexing.embedding.onnx_graph import GraphSpec


@dataclass(frozen=True)
class ModelArm:
    key: str
    model: str
    licence: str
    runtime: str
    make: Callable[[], Embedder]


def _minilm() -> Embedder:
    return load_embedder(None)


def _gemma() -> Embedder:
    return OnnxEmbedder(ensure_model(), cache=default_cache())


def _gemma_int8() -> Embedder:
    path = ensure_model()
    return OnnxEmbedder(path, cache=default_cache(), graph=quantized(path))


ARMS = {
    "minilm": ModelArm("minilm", "all-MiniLM-L6-v2", "Apache 2.0", "ONNX fp32", _minilm),
    "embeddinggemma": ModelArm("embeddinggemma", "EmbeddingGemma-300m", "Gemma Terms of Use", "ONNX fp32", _gemma),
    "embeddinggemma-int8": ModelArm(
        "embeddinggemma-int8",
        "EmbeddingGemma-300m",
        "Gemma Terms of Use",
        "ONNX int8 (dynamic quantization)",
        _gemma_int8,
    ),
}

DEFAULT_ARM = "minilm"
MODELS_VARIABLE = "ESFIS_BENCH_MODELS"


def chosen_arms() -> list[str]:
    """The default model's arm, and the others ``ESFIS_BENCH_MODELS`` names (comma-separated):
    another model's arms take more than a day on two cores in full mode, so a run measures them
    only when asked. The default model is always measured."""
    named = [a.strip() for a in os.environ.get(MODELS_VARIABLE, "").split(",") if a.strip()]
    unknown = [a for a in named if a not in ARMS]
    if unknown:
        raise ValueError(f"{MODELS_VARIABLE} names no arm {', '.join(unknown)}: the arms are {', '.join(ARMS)}")
    return [DEFAULT_ARM, *[a for a in named if a != DEFAULT_ARM]]


def quantized(model_path: Path) -> tuple[GraphSpec, Path]:
    """The model's checked fp32 export with its weights quantized to int8, made once into the
    benchmark cache."""
    spec, folder = ensure_export(model_path, default_cache())
    target = CACHE / "onnx" / spec.model_file.replace(".onnx", ".int8.onnx")
    if not target.is_file():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
        quantize_dynamic(str(folder / spec.model_file), str(tmp), weight_type=QuantType.QInt8)
        os.replace(tmp, target)
    tokenizer = target.parent / spec.tokenizer_file
    if not tokenizer.is_file():
        tokenizer.symlink_to(folder / spec.tokenizer_file)
    return spec.with_model_file(target.name), target.parent


def vectors(
    arm: ModelArm, workload: Workload, embedder: Embedder, questions: list[int], *, full: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Every text the questions' haystacks hold, and the questions, embedded by the arm (cached).
    On the full set, the default model's texts are those ``python -m benchmarks.longmemeval``
    embedded with the same embedder at the start of the run (``scripts/bench full``): taken from
    that cache, not embedded a second time (that was 24 minutes of a full run)."""
    needed = np.unique(workload.memory_text[np.isin(workload.memory_space, questions)])
    level = workload.granularity
    texts = [workload.texts[i] for i in needed]
    if full and arm.key == DEFAULT_ARM:
        got = np.asarray(text_vectors(workload, embedder)[needed], dtype=np.float32)
    else:
        got = embed_cached(texts, f"{arm.key}-lme-{level}-{_digest(texts)}", embedder)
    out = np.zeros((len(workload.texts), embedder.dimension), dtype=np.float32)
    out[needed] = got
    asked = [workload.questions[i].text for i in questions]
    q_file = cache_dir() / f"{arm.key}-lme-questions-{_digest(asked)}.npy"
    if q_file.exists():
        q_vecs = np.load(q_file)
    else:
        q_vecs = np.stack([embedder.embed_query(t) for t in asked])
        np.save(q_file, q_vecs)
    full = np.zeros((len(workload.questions), embedder.dimension), dtype=np.float32)
    full[questions] = q_vecs
    return out, full


def _digest(texts: list[str]) -> str:
    import hashlib

    return hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:12]


def query_latency(embedder: Embedder, questions: list[str]) -> dict[str, float]:
    embedder.embed_query(questions[0])  # the session warm
    times = []
    for q in questions:
        started = time.perf_counter()
        embedder.embed_query(q)
        times.append(time.perf_counter() - started)
    return {
        "queries": len(questions),
        "p50_ms": float(np.percentile(times, 50) * 1000),
        "p95_ms": float(np.percentile(times, 95) * 1000),
    }


def interleaved_latency(arms: list[str], questions: list[str], rounds: int = 5) -> dict[str, dict[str, float]]:
    """Query latency of each arm, the arms taking turns query by query, so a machine whose load
    changes during the run weighs on every arm alike."""
    embedders = {key: ARMS[key].make() for key in arms}
    for embedder in embedders.values():
        embedder.load()
        embedder.embed_query(questions[0])
    times: dict[str, list[float]] = {key: [] for key in arms}
    for question in questions * rounds:
        for key, embedder in embedders.items():
            started = time.perf_counter()
            embedder.embed_query(question)
            times[key].append(time.perf_counter() - started)
    return {
        key: {
            "queries": len(t),
            "p50_ms": float(np.percentile(t, 50) * 1000),
            "p95_ms": float(np.percentile(t, 95) * 1000),
        }
        for key, t in times.items()
    }


def run(arms: list[str], levels: list[str], full: bool, limit: int | None = None, log=print) -> dict:
    out: dict = {"data": "LongMemEval_S full" if full else "LongMemEval_S shipped sample", "arms": {}}
    for key in arms:
        arm = ARMS[key]
        embedder = arm.make()
        embedder.load()
        entry: dict = {
            "model": arm.model,
            "licence": arm.licence,
            "runtime": arm.runtime,
            "dimension": embedder.dimension,
            "prompts": embedder.prompts.as_dict(),
            "levels": {},
        }
        for level in levels:
            workload = load_workload(full=full, granularity=level)
            questions = [i for i, q in enumerate(workload.questions) if q.evidence][:limit]
            started = time.time()
            texts, q_vecs = vectors(arm, workload, embedder, questions, full=full)
            embedded_s = time.time() - started
            ev = EvidenceStore(workload, texts, questions)
            try:
                result = evaluate(ev, q_vecs, questions)
            finally:
                ev.close()
            entry["levels"][level] = {
                "questions": len(questions),
                "embed_seconds_or_cached": embedded_s,
                "methods": {
                    m: result["methods"][m]["all"] for m in ("cosine", "scaled w=0.5", "scaled w=0.5 + feedback")
                },
                "by_type": {m: result["methods"][m] for m in ("cosine", "scaled w=0.5 + feedback")},
            }
            log(f"{key} {level}: " + json.dumps(entry["levels"][level]["methods"]))
        entry["query_latency"] = query_latency(embedder, [q.text for q in load_workload(full=full).questions[:100]])
        log(f"{key} latency: {entry['query_latency']}")
        out["arms"][key] = entry
    return out


def markdown(result: dict) -> str:
    lines = [
        f"Data: {result['data']}.",
        "",
        "| model | runtime | level | questions | method | " + " | ".join(METRICS) + " |",
        "| --- | --- | --- | --- | --- | " + " | ".join("---" for _ in METRICS) + " |",
    ]
    for arm in result["arms"].values():
        for level, r in arm["levels"].items():
            for method, m in r["methods"].items():
                lines.append(
                    f"| {arm['model']} | {arm['runtime']} | {level} | {r['questions']} | {method} | "
                    + " | ".join(f"{m[k]:.3f}" for k in METRICS)
                    + " |"
                )
    lines += ["", "| model | runtime | query p50 | p95 |", "| --- | --- | --- | --- |"]
    for arm in result["arms"].values():
        lat = arm["query_latency"]
        lines.append(f"| {arm['model']} | {arm['runtime']} | {lat['p50_ms']:.1f} ms | {lat['p95_ms']:.1f} ms |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=["sample", "full"], default="sample")
    parser.add_argument("--levels", default="turn,session")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--limit", type=int, default=None, help="the first N questions with evidence only")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--latency-only", action="store_true", help="only the query latency, the arms taking turns query by query"
    )
    parser.add_argument("--note", default="", help="how the machine was (shared cores, …), recorded with the figures")
    args = parser.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(
        subprocess.run(
            ["git", "status", "--porcelain", "--", "indexing", "benchmarks", ":!benchmarks/results"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if args.latency_only:
        questions = [q.text for q in load_workload(full=args.data == "full").questions[:100]]
        latency = interleaved_latency(args.arms.split(","), questions)
        result = {
            "commit": commit,
            "dirty": dirty,
            "note": args.note,
            "cpus": os.cpu_count(),
            "interleaved_query_latency": {
                k: {"model": ARMS[k].model, "runtime": ARMS[k].runtime, **v} for k, v in latency.items()
            },
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True))
        print(json.dumps(result, indent=1))
        return 0
    result = run(args.arms.split(","), args.levels.split(","), args.data == "full", args.limit, log)
    result |= {"commit": commit, "dirty": dirty, "note": args.note, "cpus": os.cpu_count()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True))
    args.out.with_suffix(".md").write_text(
        f"# Models on LongMemEval_S, commit {commit}{' (dirty)' if dirty else ''}\n\n"
        f"{args.note}\n\n{markdown(result)}\n"
    )
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
