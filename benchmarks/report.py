"""Turn pytest-benchmark JSON into benchmarks/results/REPORT.md and PNG plots.

    python -m benchmarks.report RAW.json [MORE.json ...]
"""

from __future__ import annotations

import json
import platform
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from benchmarks.evidence import evidence_section

RESULTS = Path(__file__).resolve().parent / "results"


def load(paths: list[Path]) -> tuple[list[dict], dict]:
    """Benchmarks from every file; a benchmark measured again in a later file replaces the
    earlier figure."""
    by_name: dict[str, dict] = {}
    machine: dict = {}
    for path in paths:
        raw = json.loads(path.read_text())
        machine = raw.get("machine_info", machine)
        for bench in raw["benchmarks"]:
            info = dict(bench.get("extra_info", {}))
            data = bench["stats"].get("data") or []
            if data:
                info["bench_p50_ms"] = float(np.percentile(data, 50) * 1000)
                info["bench_p95_ms"] = float(np.percentile(data, 95) * 1000)
            else:
                info["bench_p50_ms"] = bench["stats"]["median"] * 1000
            info["name"] = bench["name"]
            info["group"] = bench.get("fullname", "")
            by_name[bench["fullname"]] = info
    return list(by_name.values()), machine


def fmt(value, digits=2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    head = "| " + " | ".join(title for title, _ in columns) + " |"
    rule = "| " + " | ".join("---" for _ in columns) + " |"
    body = ["| " + " | ".join(fmt(r.get(key)) for _, key in columns) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def plots(synthetic: list[dict]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    by_arm = defaultdict(list)
    for r in synthetic:
        if r["scope"].endswith("10k") and r["scope"].startswith("1p"):
            by_arm[r["arm"]].append((r["store_size"], r["bench_p50_ms"]))
    if by_arm:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for arm, points in sorted(by_arm.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=arm)
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("memories in the store"), ax.set_ylabel("p50 search latency (ms)")
        ax.set_title("Latency against store size, 10k-memory scope (1 partition)")
        ax.legend(fontsize=8), ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout(), fig.savefig(RESULTS / "latency_vs_store_size.png", dpi=120), plt.close(fig)
        made.append("latency_vs_store_size.png")
    post = defaultdict(list)
    for r in synthetic:
        if r["arm"].startswith("post-filter"):
            post[(r["store_size"], r["scope"])].append((int(r["arm"].rsplit("x", 1)[1]), r["recall_at_10"]))
    if post:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for (size, scope), points in sorted(post.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"{size:,} / {scope}")
        ax.axhline(1.0, color="k", lw=0.8, ls="--", label="scope-first")
        ax.set_xscale("log", base=2), ax.set_xlabel("post-filter over-fetch (k×)"), ax.set_ylabel("recall@10")
        ax.set_title("Post-filter recall against over-fetch"), ax.legend(fontsize=7), ax.grid(True, alpha=0.3)
        fig.tight_layout(), fig.savefig(RESULTS / "recall_vs_overfetch.png", dpi=120), plt.close(fig)
        made.append("recall_vs_overfetch.png")
    biggest = max((r["store_size"] for r in synthetic), default=0)
    scope_arm = defaultdict(list)
    for r in synthetic:
        if r["store_size"] == biggest and r["scope"].startswith("1p"):
            scope_arm[r["arm"]].append((r["scope_rows"], r["bench_p50_ms"]))
    if scope_arm:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for arm, points in sorted(scope_arm.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=arm)
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("memories in the caller's scope"), ax.set_ylabel("p50 search latency (ms)")
        ax.set_title(f"Latency against scope size ({biggest:,}-memory store)")
        ax.legend(fontsize=8), ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout(), fig.savefig(RESULTS / "latency_vs_scope_size.png", dpi=120), plt.close(fig)
        made.append("latency_vs_scope_size.png")
    return made


def main(paths: list[Path]) -> None:  # noqa: C901 - one page of report
    RESULTS.mkdir(exist_ok=True)
    rows, machine = load(paths)
    synthetic = [r for r in rows if "store_size" in r and "dataset" not in r]
    lme = [r for r in rows if r.get("dataset") == "longmemeval_s"]
    imports = sorted((r for r in rows if "rows_per_s" in r), key=lambda r: (r["rows"], r["batch_size"]))
    evidence = [r for r in rows if r.get("dataset") == "longmemeval_s_evidence"]  # see evidence_section
    other = [r for r in rows if r not in synthetic and r not in lme and r not in imports and r not in evidence]
    cpu = machine.get("cpu", {})
    out = [
        "# esfis benchmark report",
        "",
        f"Machine: {cpu.get('brand_raw', platform.processor())}, {cpu.get('count', '?')} cores, "
        f"Python {machine.get('python_version', platform.python_version())}, {machine.get('system', platform.system())} "
        f"{machine.get('release', '')}. Latencies are pytest-benchmark rounds (one query each); p50/p95 in ms.",
        "",
        "Runs merged, a later one replacing a benchmark measured again: " + ", ".join(f"`{p.name}`" for p in paths) + ".",
        "",
        "## Synthetic stores (clustered 384-d vectors, 1,000 Zipf-sized spaces, 5% expired rows)",
        "",
        table(sorted(synthetic, key=lambda r: (r["store_size"], r["scope"], r["arm"])), [
            ("store", "store_size"), ("scope", "scope"), ("scope rows", "scope_rows"), ("arm", "arm"),
            ("p50 ms", "bench_p50_ms"), ("p95 ms", "bench_p95_ms"), ("recall@10", "recall_at_10"),
            ("answers < k", "underfilled_share"), ("out-of-scope scored / query", "out_of_scope_scored_per_query"),
        ]),
        "",
    ]
    if lme:
        out += [
            "## LongMemEval_S (real text; one space per question)",
            "",
            table(lme, [
                ("arm", "arm"), ("questions", "questions"), ("memories", "memories"), ("p50 ms", "bench_p50_ms"),
                ("p95 ms", "bench_p95_ms"), ("recall@10", "recall_at_10"), ("evidence recall@10", "evidence_recall_at_10"),
                ("results from other spaces", "results_from_other_spaces"), ("answers < k", "underfilled_share"),
            ]),
            "",
        ]
    out += evidence_section(RESULTS)
    if imports:
        out += [
            "## Bulk import, everything but the model",
            "",
            "Short keyed text rows into a new store, with an embedder that costs nothing "
            "(`benchmarks/test_import_throughput.py`): parse, checks, duplicate queries, LanceDB and "
            "catalog writes. On a GPU this is what bounds an import (target ≥ 50k memories/s). "
            "Before the stages overlapped (commit 852b7cc), the same benchmark at batch 4096: "
            "10,415 rows/s at 200k rows (91 µs of CPU a row), 8,252 at 1M (110 µs).",
            "",
            table(imports, [("rows", "rows"), ("batch", "batch_size"), ("rows/s", "rows_per_s"),
                            ("CPU µs per row", "cpu_us_per_row"), ("target rows/s", "target_rows_per_s")]),
            "",
        ]
    if other:
        out += ["## Other measurements", "", table(other, [("benchmark", "name"), ("p50 ms", "bench_p50_ms"),
                                                          ("p95 ms", "bench_p95_ms")]), ""]
        for r in other:
            extra = {k: v for k, v in r.items() if k not in ("name", "group", "bench_p50_ms", "bench_p95_ms")}
            if extra:
                out.append(f"- `{r['name']}`: " + ", ".join(f"{k}={fmt(v)}" for k, v in extra.items()))
        out.append("")
    gpu = RESULTS / "gpu.json"
    if gpu.exists():
        g = json.loads(gpu.read_text())
        out += [
            f"## GPU ({g['device']}, torch {g['torch']}; benchmarks/gpu/measure.py, one short run)",
            "",
            "The model travels as fp16 weights (the fp32 file is over the device's transfer limit); "
            f"fp16 GPU vectors against fp32 CPU vectors: min cosine {g['fp16_gpu_vs_cpu_fp32_cosine_min']:.6f}. "
            "LanceDB is not on that machine: the import pipeline there runs every stage but the store "
            "write (parse, validate, digest and dedupe, tokenize in 3 threads, encode, Arrow batches to disk). "
            "The store write is measured on the CPU machine above (Bulk import).",
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
            out.append(f"| exact search, {key.replace('_', ' ')}, one query | p50 {value['p50_ms']} ms, p95 {value['p95_ms']} ms |")
            out.append(f"| exact search, {key.replace('_', ' ')}, batched | {value['batched_queries_per_s']:,} queries/s |")
        if "lme_embed_all_distinct_texts" in g:
            e = g["lme_embed_all_distinct_texts"]
            out.append(f"| LongMemEval, all {e['texts']:,} distinct texts embedded | {e['texts_per_s']:,} texts/s |")
        out.append("")
    for png in plots(synthetic):
        out += [f"![{png}]({png})", ""]
    (RESULTS / "REPORT.md").write_text("\n".join(out))
    print(RESULTS / "REPORT.md")


if __name__ == "__main__":
    main([Path(p) for p in sys.argv[1:]])
