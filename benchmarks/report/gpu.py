"""The section "GPU", from ``results/gpu.json``: a separate run on another machine, reported
after the partial reruns."""

from __future__ import annotations

import json

from benchmarks.report.common import RESULTS


def gpu_section() -> list[str]:
    gpu = RESULTS / "gpu.json"
    if not gpu.exists():
        return []
    g = json.loads(gpu.read_text())
    out = [
        f"## GPU ({g['device']}, torch {g['torch']}): a separate run, not part of this one",
        "",
        "`benchmarks/gpu/measure.py`, one short run on another machine; "
        f"commit: {g.get('commit', 'not recorded in gpu.json')}. The model travels as fp16 weights; fp16 GPU "
        f"vectors against fp32 CPU vectors: min cosine {g['fp16_gpu_vs_cpu_fp32_cosine_min']:.6f}. LanceDB is not "
        "on that machine: its import pipeline runs every stage but the store write.",
        "",
        "| measurement | figure |",
        "| --- | --- |",
    ]
    for key, value in g["raw_encode_texts_per_s"].items():
        out.append(f"| raw encode, {key.replace('_', ' ')} | {value:,} texts/s |")
    for key, value in g.items():
        if key.startswith("import_pipeline"):
            label = key.replace("import_pipeline", "pipeline beside esfis (not its importer),").replace("_", " ")
            out.append(f"| {label} | {value['memories_per_s']:,} memories/s ({value['lines']:,} lines) |")
    for key, value in g["search"].items():
        out.append(
            f"| exact search, {key.replace('_', ' ')}, one query | p50 {value['p50_ms']} ms, p95 {value['p95_ms']} ms |"
        )
        out.append(f"| exact search, {key.replace('_', ' ')}, batched | {value['batched_queries_per_s']:,} queries/s |")
    if "lme_embed_all_distinct_texts" in g:
        e = g["lme_embed_all_distinct_texts"]
        out.append(f"| LongMemEval, all {e['texts']:,} distinct texts embedded | {e['texts_per_s']:,} texts/s |")
    return out + [""]
