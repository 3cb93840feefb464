"""Turn one run's pytest-benchmark JSON into REPORT.md and PNG plots.

    python -m benchmarks.report RAW.json [--partial OTHER.json ...] [--out DIR]

A report is one run: every figure in its tables comes from RAW.json, and its header gives that
run's commit and whether the tree was dirty. A partial rerun (``--partial``) gets a section of
its own, headed with its commit, and never replaces a cell. Targets come from
``benchmarks/targets.py``; each figure that has one is shown beside it with ✅ or ❌.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from benchmarks.report.bulk import section_backup, section_import, section_import_paths
from benchmarks.report.common import RESULTS, Checks, Run, load, outcome_line, table
from benchmarks.report.dedupe import section_dedupe
from benchmarks.report.embedding import (
    section_batching,
    section_embedding,
    section_model_costs,
    section_query_precision,
)
from benchmarks.report.faults import section_faults
from benchmarks.report.gpu import gpu_section
from benchmarks.report.header import header, summary
from benchmarks.report.http_load import section_hostile, section_load
from benchmarks.report.peers import section_peers, section_peers_quality
from benchmarks.report.plots import plots
from benchmarks.report.real_text import section_evidence, section_ivf_text, section_lexical, section_lme
from benchmarks.report.recall_path import (
    section_http,
    section_large,
    section_mcp_http,
    section_memories_page,
    section_overhead,
    section_recall_filter,
    section_runs,
    section_several,
)
from benchmarks.report.scope import section_scope
from benchmarks.report.startup import section_cli, section_mcp, section_serve

# Every benchmark file and the report section that shows it, in the report's order.
MODULES: dict[str, str] = {
    "test_peers.py": "esfis against what users would pick instead: Chroma, pgvector, Milvus Lite, sqlite-vec, LanceDB",
    "test_peers_quality.py": "Evidence recall side by side: esfis, Chroma and sqlite-vec on LongMemEval_S",
    "test_scope_vs_filter.py": "Scope-first against filters, synthetic stores",
    "test_longmemeval.py": "LongMemEval_S, real text, one space per question",
    "test_evidence_recall.py": "Evidence recall on LongMemEval_S: cosine against hybrid (BM25) recall",
    "test_dedupe.py": "One fact once: LongMemEval_S remembered twice, and the check's cost",
    "test_lexical_latency.py": "The lexical signal's cost per recall",
    "test_real_text_ivf.py": "IVF image on real text",
    "test_large_partition.py": "One large partition: cold start, shared memory, steady HTTP recall",
    "test_memories_page.py": "Settings › Memories: a page of 50 in one large space",
    "test_recall_filter.py": "Recall's filter over data: what it costs",
    "test_http_recall.py": "HTTP recall end to end",
    "test_recall_overhead.py": "The recall path's own cost, embedding left out",
    "test_run_bookkeeping.py": "Run bookkeeping's cost to a recall",
    "test_embedding.py": "Query embedding on the CPU",
    "test_query_precision.py": "The int8 query graph against fp32: CPU, cosine, evidence recall",
    "test_embedding_batching.py": "Batched query embedding: a lone query and concurrent ones",
    "test_cli_wall.py": "CLI wall time",
    "test_mcp_startup.py": "MCP start-up",
    "test_serve_startup.py": "Server start-up",
    "test_import_throughput.py": "Bulk import, everything but the model",
    "test_import_paths.py": "A thin spread's import over HTTP, and on PostgreSQL with local and S3 partitions",
    "test_http_load.py": "HTTP load, concurrent clients",
    "test_several_machines.py": "Several machines: PostgreSQL catalog and S3 partitions beside the embedded default",
    "test_backup_rates.py": "Backup, restore and export rates",
    "test_mcp_http_latency.py": "MCP over HTTP: a recall tool call beside the plain API",
    "test_hostile_neighbour.py": "A good token's recalls beside a hostile token at its limits",
    "test_fault_drill.py": "Fault drill: a full disk, a catalog restart, a stopped object store, a killed worker",
    "test_model_costs.py": "What each model costs: reindex per 100k memories, HTTP recall at 100k",
}

# Each benchmark file's section; test_http_recall.py's also takes the embedding's p50 (``modules``).
SECTIONS: dict[str, Callable[..., list[str]]] = {
    "test_peers.py": section_peers,
    "test_peers_quality.py": section_peers_quality,
    "test_evidence_recall.py": section_evidence,
    "test_dedupe.py": section_dedupe,
    "test_lexical_latency.py": section_lexical,
    "test_scope_vs_filter.py": section_scope,
    "test_longmemeval.py": section_lme,
    "test_real_text_ivf.py": section_ivf_text,
    "test_large_partition.py": section_large,
    "test_memories_page.py": section_memories_page,
    "test_recall_filter.py": section_recall_filter,
    "test_recall_overhead.py": section_overhead,
    "test_run_bookkeeping.py": section_runs,
    "test_embedding.py": section_embedding,
    "test_cli_wall.py": section_cli,
    "test_mcp_startup.py": section_mcp,
    "test_serve_startup.py": section_serve,
    "test_import_throughput.py": section_import,
    "test_import_paths.py": section_import_paths,
    "test_http_load.py": section_load,
    "test_query_precision.py": section_query_precision,
    "test_embedding_batching.py": section_batching,
    "test_several_machines.py": section_several,
    "test_backup_rates.py": section_backup,
    "test_mcp_http_latency.py": section_mcp_http,
    "test_hostile_neighbour.py": section_hostile,
    "test_fault_drill.py": section_faults,
    "test_model_costs.py": section_model_costs,
}


def modules(run: Run, checks: Checks, level: str = "##", missing: str | None = "Not in this run.") -> list[str]:
    """A section per benchmark file, in ``MODULES``' order; ``missing=None`` leaves out files not in the run."""
    by_module: dict[str, list[dict]] = defaultdict(list)
    for r in run.rows:
        by_module[r["module"]].append(r)
    # The server's queries run on the int8 graph (the default); a run from before it had only fp32.
    embedded = {r.get("backend"): r["bench_p50_ms"] for r in by_module.get("test_embedding.py", [])}
    onnx = embedded.get("onnx-int8", embedded.get("onnx"))
    out = []
    for module, title in MODULES.items():
        rows = by_module.get(module)
        heading = [f"{level} {title} (`benchmarks/{module}`)", ""]
        if not rows:
            if missing is not None:
                out += heading + [missing, ""]
            continue
        out += heading
        if module == "test_http_recall.py":
            out += section_http(rows, checks, onnx)
        else:
            out += SECTIONS[module](rows, checks)
        out += outcome_line(rows)
    unknown = sorted(set(by_module) - set(MODULES))
    for module in unknown:
        out += [f"{level} `benchmarks/{module}` (no section of its own)", ""]
        out += table(
            [[r["name"], r["bench_p50_ms"], r.get("bench_p95_ms"), r["outcome"]] for r in by_module[module]],
            ["benchmark", "p50 ms", "p95 ms", "test"],
        )
    return out


def partial_section(run: Run) -> list[str]:
    """A partial rerun apart: its own header and checks, its sections one level down."""
    checks = Checks(run.mode)
    state = "**dirty tree**" if run.dirty else "clean tree" if run.dirty is not None else "tree state not recorded"
    body = modules(run, checks, level="###", missing=None)
    out = [
        f"## Partial rerun, commit {run.short}, not part of the full run",
        "",
        f"`{run.path.name}`: {run.mode_text}, {state}, {run.when}. Its figures replace none of the cells above.",
        "",
    ]
    if "-shared" in run.path.name:
        out += [
            "> Measured on cores shared with other work (what it was: `partial/README.md`): latencies and "
            "throughput are those of a busy machine, not of esfis alone.",
            "",
        ]
    if checks.items:
        out += table(checks.items, ["figure", "cell", "measured", "target", "met"])
    return out + body


def build(raw: Path, partials: list[Path], out_dir: Path) -> Path:
    run = load(raw)
    out_dir.mkdir(parents=True, exist_ok=True)
    checks = Checks(run.mode)
    body = modules(run, checks)
    lines = header(run) + summary(checks) + body
    partial_runs = [load(path) for path in partials]
    for partial in partial_runs:
        lines += partial_section(partial)
    lines += gpu_section()
    load_rows = [r for p in partial_runs for r in p.rows if r["module"] == "test_http_load.py"]
    for png in plots(run.rows, out_dir, load_rows):
        lines += [f"![{png}]({png})", ""]
    report = out_dir / "REPORT.md"
    report.write_text("\n".join(lines))
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="the run's pytest-benchmark JSON")
    parser.add_argument("--partial", type=Path, action="append", default=[], help="a partial rerun, reported apart")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where REPORT.md and the plots go")
    args = parser.parse_args(argv)
    print(build(args.raw, args.partial, args.out))
