"""Turn one run's pytest-benchmark JSON into REPORT.md and PNG plots.

    python -m benchmarks.report RAW.json [--partial OTHER.json ...] [--out DIR]

A report is one run: every figure in its tables comes from RAW.json, and its header gives that
run's commit and whether the tree was dirty. A partial rerun (``--partial``) gets a section of
its own, headed with its commit, and never replaces a cell. Targets come from
``benchmarks/targets.py``; each figure that has one is shown beside it with ✅ or ❌.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.targets import MODULES, RECALL_DEFINITION, TARGETS

RESULTS = Path(__file__).resolve().parent / "results"
BENCH_DIR = Path(__file__).resolve().parent
ARM_ORDER = [
    "scope-first",
    "scope-first-index",
    "post-filter-x1",
    "post-filter-x4",
    "post-filter-x16",
    "prefilter",
    "in-memory-scope-mask",
    "in-memory-post-filter-x16",
    "floor",
]


@dataclass
class Run:
    path: Path
    commit: str | None
    dirty: bool | None
    porcelain: list[str] | None  # None: only pytest-benchmark's ``git describe --dirty`` was recorded
    commit_at_end: str | None
    mode: str
    kind: str  # "complete", "partial", or "not recorded" (a raw file from before runs were labelled)
    when: str
    machine: dict
    rows: list[dict]
    overrides: dict = field(default_factory=dict)

    @property
    def mode_text(self) -> str:
        return "mode not recorded" if self.mode == "not recorded" else f"{self.mode} mode"

    @property
    def short(self) -> str:
        return (self.commit or "unknown")[:7]


def load(path: Path) -> Run:
    raw = json.loads(path.read_text())
    meta = raw.get("esfis", {})
    outcomes = meta.get("outcomes", {})
    rows = []
    for bench in raw["benchmarks"]:
        info = dict(bench.get("extra_info", {}))
        data = bench["stats"].get("data") or []
        if data:
            info["bench_p50_ms"] = float(np.percentile(data, 50) * 1000)
            info["bench_p95_ms"] = float(np.percentile(data, 95) * 1000)
        else:
            info["bench_p50_ms"] = bench["stats"]["median"] * 1000
        info["name"] = bench["name"]
        info["module"] = bench["fullname"].split("::")[0].rsplit("/", 1)[-1]
        info["outcome"] = outcomes.get(bench["fullname"], "not recorded")
        rows.append(info)
    commit = raw.get("commit_info", {})
    return Run(
        path=path,
        commit=commit.get("id"),
        dirty=commit.get("dirty"),
        porcelain=commit.get("porcelain_at_start"),
        commit_at_end=commit.get("commit_at_end"),
        mode=meta.get("mode", "not recorded"),
        kind=meta.get("run", "not recorded"),
        when=raw.get("datetime", "?"),
        machine=raw.get("machine_info", {}),
        rows=rows,
        overrides=meta.get("overrides", {}),
    )


# -- formatting -------------------------------------------------------------------------------


def fmt(value, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(rows: list[list], head: list[str]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    out += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in rows]
    return out + [""]


@dataclass
class Checks:
    """Every figure checked against its target, in the order the sections give them."""

    mode: str
    items: list[list[str]] = field(default_factory=list)

    def check(
        self, key: str, cell: str, measured: float | None, reference: float | None = None, shown: str | None = None
    ) -> str:
        """``measured (target verdict)`` for a table cell; the check is kept for the summary."""
        target = TARGETS[key]
        met = target.met(measured, reference)
        verdict = "–" if met is None else "✅" if met else "❌"
        if target.full_only and self.mode == "quick" and met is not None:
            verdict += " (full-mode target)"
        value = shown if shown is not None else fmt(measured)
        self.items.append([target.what, cell, value, target.describe(reference), verdict])
        return f"{value} ({target.describe(reference)} {verdict})"

    def unjudged(self, what: str, cell: str, value: str, why: str) -> None:
        self.items.append([what, cell, value, f"not judged: {why}", "–"])


def outcome_line(rows: list[dict]) -> list[str]:
    if all(r["outcome"] == "not recorded" for r in rows):
        return ["Test outcomes: not recorded in this raw file.", ""]
    counts: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        counts[r["outcome"]].append(r["name"])
    line = "Tests: " + ", ".join(f"{len(v)} {k}" for k, v in sorted(counts.items()))
    failed = counts.get("failed", [])
    if failed:
        line += (
            " — **failed: "
            + ", ".join(f"`{n}`" for n in failed)
            + "** (their figures are shown; their assertions did not hold)"
        )
    return [line, ""]


# -- sections ---------------------------------------------------------------------------------


def scoped_out(r: dict) -> str:
    kind = r.get("out_of_scope_kind")
    if kind is None:
        return "not counted"
    value = fmt(r.get("out_of_scope_scored_per_query"), 0)
    return f"≥ {value}" if "at least" in kind else value


def section_scope(rows: list[dict], checks: Checks) -> list[str]:
    grid = [r for r in rows if "arm" in r and not r.get("single_space") and "(single space)" not in str(r.get("scope"))]
    single = [r for r in rows if r not in grid]
    cell = {(r["store_size"], r["scope"], r["arm"]): r for r in grid}
    out = [
        "Clustered 384-d vectors, 1,000 Zipf-sized spaces plus the planted scopes, 5% expired rows. "
        "*Served by*: what answered the cell, read from the store (esfis: its exact scan, or the "
        "partition's persisted IVF image, used from 50,000 rows in a partition, expired rows included). "
        "*Scored / query* is counted, not computed: esfis's per-partition counters, LanceDB's own plan "
        "metrics (`analyze_plan`, printed to 3–4 significant figures, on the first queries of the cell), "
        "or the rows a numpy product evaluated. *Out of scope* is exact where every row was scored "
        "(flat scans, numpy); for LanceDB's IVF_PQ, which does not say which rows its lists held, it is a "
        "lower bound (`≥`): codes compared less the rows of the caller's partitions.",
        "",
    ]
    body = []
    for (size, scope, arm), r in sorted(cell.items(), key=lambda kv: (kv[0][0], kv[0][1], _arm_rank(kv[0][2]))):
        name = f"{size:,} / {scope} / {arm}"
        p50 = fmt(r["bench_p50_ms"])
        recall = fmt(r.get("recall_at_10"))
        if arm == "scope-first-index" and (floor := cell.get((size, scope, "floor"))):
            p50 = checks.check("scope.index_vs_floor", name, r["bench_p50_ms"], floor["bench_p50_ms"])
        if arm == "scope-first" and (pre := cell.get((size, scope, "prefilter"))):
            p50 = checks.check("scope.vs_prefilter", name, r["bench_p50_ms"], pre["bench_p50_ms"])
        if arm.startswith("scope-first"):
            served = r.get("served_by")
            if served is not None:
                key = "scope.recall_ivf" if "IVF" in served else "scope.recall_exact"
                recall = checks.check(key, name, r.get("recall_at_10"))
            else:
                checks.unjudged("scope-first recall@10", name, recall, "what served the cell was not recorded")
            checks.check("scope.out_of_scope", name, r.get("out_of_scope_scored_per_query"))
            checks.check("scope.underfilled", name, r.get("underfilled_share"))
        if r["outcome"] == "failed":
            arm = f"{arm} **(test failed)**"
        body.append(
            [
                size,
                scope,
                r.get("partition_rows"),
                r.get("scope_rows"),
                arm,
                r.get("served_by", "not recorded"),
                p50,
                fmt(r.get("bench_p95_ms")),
                recall,
                r.get("underfilled_share"),
                fmt(r.get("scored_per_query"), 0),
                scoped_out(r),
            ]
        )
    out += table(
        body,
        [
            "store",
            "scope",
            "partition rows",
            "valid in scope",
            "arm",
            "served by",
            "p50 ms",
            "p95 ms",
            "recall@10",
            "answers < k",
            "scored / query",
            "out of scope / query",
        ],
    )
    configs = sorted(
        {
            (r["store_size"], r["arm"], r["config"])
            for r in grid
            if not r["arm"].startswith("scope-first") and "config" in r
        },
        key=lambda c: (c[0], _arm_rank(c[1])),
    )
    if configs:
        out += [
            "Configurations (the prefilter's index on `space` is chosen per store size, each candidate timed "
            "when the table is built):",
            "",
        ]
        out += [f"- {size:,}, {arm}: {config}" for size, arm, config in configs] + [""]
    if single:
        out += ["One large space alone (the probe space is the whole store):", ""]
        body = []
        for r in single:
            name = f"single space {r['store_size']:,}"
            body.append(
                [
                    r["store_size"],
                    r.get("served_by", "not recorded"),
                    r.get("config", "–"),
                    checks.check("single_space.p50_ms", name, r["bench_p50_ms"]),
                    fmt(r.get("bench_p95_ms")),
                    checks.check("single_space.recall", name, r.get("recall_at_10")),
                    fmt(r.get("scored_per_query"), 0),
                    r["outcome"],
                ]
            )
        out += table(
            body, ["rows", "served by", "configuration", "p50 ms", "p95 ms", "recall@10", "scored / query", "test"]
        )
    out += decomposition(cell)
    return out


def _arm_rank(arm: str) -> int:
    return ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER)


def _factor(a: float, b: float) -> float:
    return a / b if b > 0 else math.inf


def decomposition(cell: dict) -> list[str]:
    """Where the speed-up over LanceDB comes from, from this run's figures: LanceDB → the same
    scan over one in-memory numpy matrix (the engine), then that matrix → the caller's own
    partitions (partitions first)."""
    rows, sentences = [], []
    for size, scope in sorted({(s, sc) for s, sc, _ in cell}):
        got = {arm: cell[(size, scope, arm)]["bench_p50_ms"] for s, sc, arm in cell if (s, sc) == (size, scope)}
        if not {"prefilter", "in-memory-scope-mask", "scope-first-index"} <= got.keys():
            continue
        pre, mask, index = got["prefilter"], got["in-memory-scope-mask"], got["scope-first-index"]
        engine, parts, total = _factor(pre, mask), _factor(mask, index), _factor(pre, index)
        share = math.log(parts) / math.log(total) if total > 1 and math.isfinite(total) else None
        post, mem_post = got.get("post-filter-x16"), got.get("in-memory-post-filter-x16")
        rows.append(
            [
                size,
                scope,
                pre,
                mask,
                index,
                f"{total:.1f}×",
                f"{engine:.1f}×",
                f"{parts:.1f}×",
                f"{share * 100:.0f}%" if share is not None else "–",
                f"{post:.2f} → {mem_post:.2f}" if post is not None and mem_post is not None else "–",
            ]
        )
        sentences.append((size, scope, total, engine, parts, share))
    if not rows:
        return []
    out = [
        "### Where the speed-up comes from",
        "",
        "The index search against the LanceDB prefilter (exact, best index), split in two steps measured "
        "in this run: LanceDB → the same masked scan over one in-memory numpy matrix (*numpy in memory "
        "vs LanceDB's engine*), then that matrix → the caller's own partitions (*partitions first*). "
        "The share is the partitions-first step's part of the speed-up on a log scale.",
        "",
    ]
    out += table(
        rows,
        [
            "store",
            "scope",
            "prefilter p50",
            "in-memory scope mask p50",
            "scope-first index p50",
            "total",
            "engine step",
            "partitions-first step",
            "partitions-first share",
            "post-filter ×16 → in-memory post-filter ×16 (ms)",
        ],
    )
    fixed = fixed_scope([{"store_size": s, "scope": sc} for s, sc, _ in cell])
    size, scope, total, engine, parts, share = max(sentences, key=lambda s: (s[0], s[1] == fixed))
    words = (
        f"At {size:,} memories ({scope}), the index search is {_times(total)} than LanceDB's prefilter. "
        f"Holding the vectors in memory and scanning with numpy instead of LanceDB's query engine accounts for "
        f"a factor of {engine:.2g} (prefilter → in-memory scope mask); searching the caller's partitions first "
        f"instead of masking the whole store for a factor of {parts:.2g} (in-memory scope mask → index; "
        "a factor below 1 is a slow-down)"
    )
    words += f"; partitions first is {share * 100:.0f}% of the speed-up on a log scale." if share is not None else "."
    return out + [words, ""]


def _times(factor: float) -> str:
    return f"{factor:.1f}× faster" if factor >= 1 else f"{1 / factor:.1f}× slower"


def fixed_scope(grid: list[dict]) -> str | None:
    """The one-partition scope measured at every store size (latency against store size)."""
    sizes = {r["store_size"] for r in grid}
    present = defaultdict(set)
    for r in grid:
        present[r["scope"]].add(r["store_size"])
    fixed = sorted(scope for scope, at in present.items() if scope.startswith("1p") and at == sizes)
    return fixed[0] if fixed else None


def section_lme(rows: list[dict], checks: Checks) -> list[str]:
    out = [
        "Each question's haystack is its own space; the same text sits in many spaces. *Evidence recall* is "
        "another measure: the share of the question's evidence turns among the ten answers.",
        "",
    ]
    body = []
    for r in sorted(rows, key=lambda r: _arm_rank(r["arm"].replace("+embed", ""))):
        recall, other = fmt(r.get("recall_at_10")), fmt(r.get("results_from_other_spaces"))
        if r["arm"].startswith("scope-first"):
            recall = checks.check("lme.recall", r["arm"], r.get("recall_at_10"))
            other = checks.check("lme.other_spaces", r["arm"], r.get("results_from_other_spaces"))
        body.append(
            [
                r["arm"],
                r.get("served_by", "not recorded"),
                r.get("questions"),
                r.get("memories"),
                r["bench_p50_ms"],
                r.get("bench_p95_ms"),
                recall,
                r.get("evidence_recall_at_10"),
                other,
                r.get("underfilled_share"),
                r["outcome"],
            ]
        )
    out += table(
        body,
        [
            "arm",
            "served by",
            "questions",
            "memories",
            "p50 ms",
            "p95 ms",
            "recall@10",
            "evidence recall",
            "results from other spaces",
            "answers < k",
            "test",
        ],
    )
    configs = sorted({(r["arm"], r["config"]) for r in rows if "config" in r and not r["arm"].startswith("scope")})
    return out + [f"- {arm}: {config}" for arm, config in configs] + ([""] if configs else [])


def section_ivf_text(rows: list[dict], checks: Checks) -> list[str]:
    body = [
        [
            r.get("rows"),
            r.get("queries"),
            r.get("served_by", "not recorded"),
            r.get("ivf_lists"),
            r.get("nprobe"),
            checks.check(
                "ivf_text.recall", f"{r.get('rows', 0):,} rows", r.get("recall_at_10", r.get("recall_at_10_tie_aware"))
            ),
            r["bench_p50_ms"],
            r.get("bench_p95_ms"),
            r.get("write_and_build_s"),
            r["outcome"],
        ]
        for r in rows
    ]
    return table(
        body,
        [
            "rows",
            "queries",
            "served by",
            "IVF lists",
            "nprobe",
            "recall@10",
            "p50 ms",
            "p95 ms",
            "write + build s",
            "test",
        ],
    )


def section_large(rows: list[dict], checks: Checks) -> list[str]:
    out = []
    for r in rows:
        cell = f"{r.get('rows', 0):,} rows"
        server = r.get("server", {})
        body = [
            ["served by", r.get("served_by", "not recorded")],
            [
                "write with the index build",
                f"{fmt(r.get('write_with_index_s'))} s ({fmt(r.get('write_rate_rows_per_s'))} rows/s), "
                f"{fmt(r.get('index_builds'))} build(s)",
            ],
            [
                "first HTTP recall after the server is ready",
                checks.check("large.first_recall_s", cell + ", server", r.get("first_http_recall_s")),
            ],
            ["steady HTTP recall p50 ms", checks.check("large.p50_ms", cell, r["bench_p50_ms"])],
            ["steady HTTP recall p95 ms", checks.check("large.p95_ms", cell, r.get("bench_p95_ms"))],
            ["server RSS GB", checks.check("large.server_rss_gb", cell, _gb(server.get("rss_mib")))],
            ["server PSS MiB", fmt(server.get("pss_mib"))],
            ["answers from other spaces", checks.check("large.other_spaces", cell, r.get("answers_from_other_spaces"))],
        ]
        for i, reader in enumerate(r.get("readers", []), 1):
            body.append(
                [
                    f"further process {i}: first recall s (open {fmt(reader.get('open_s'))} s before it)",
                    checks.check("large.first_recall_s", f"{cell}, process {i}", reader.get("first_recall_s")),
                ]
            )
            body.append(
                [
                    f"further process {i}: PSS MB (RSS {fmt(reader.get('rss_mib'))} MiB)",
                    checks.check("large.reader_pss_mb", f"{cell}, process {i}", _mb(reader.get("pss_mib"))),
                ]
            )
        body.append(["vectors alone MiB", fmt(r.get("vectors_mib"))])
        body.append(["test", r["outcome"]])
        out += [f"{cell}:", ""] + table(body, ["figure", "measured (target)"])
    return out


def _gb(mib: float | None) -> float | None:
    return None if mib is None else mib * 2**20 / 1e9


def _mb(mib: float | None) -> float | None:
    return None if mib is None else mib * 2**20 / 1e6


def section_http(rows: list[dict], checks: Checks, embedding_p50: float | None) -> list[str]:
    body = []
    for r in rows:
        cell = f"{fmt(r.get('store_memories'))} memories / {r.get('scope')}"
        over = None if embedding_p50 is None else r["bench_p50_ms"] - embedding_p50
        body.append(
            [
                r.get("store_memories"),
                r.get("scope"),
                r.get("served_by", "not recorded"),
                checks.check("http.p50_ms", cell, r["bench_p50_ms"]),
                checks.check("http.p95_ms", cell, r.get("bench_p95_ms")),
                checks.check("http.p50_over_embedding_ms", cell, over) if over is not None else "no embedding figure",
                checks.check("http.other_spaces", cell, r.get("answers_from_other_spaces")),
                r["outcome"],
            ]
        )
    return table(
        body,
        [
            "store",
            "scope",
            "served by",
            "p50 ms",
            "p95 ms",
            "p50 less embedding p50 (ms)",
            "answers from other spaces",
            "test",
        ],
    )


def section_overhead(rows: list[dict], checks: Checks) -> list[str]:
    body = [
        [
            r.get("spaces"),
            r.get("memories"),
            r.get("rounds"),
            checks.check("overhead.p50_ms", "recall path", r["bench_p50_ms"]),
            checks.check("overhead.p95_ms", "recall path", r.get("bench_p95_ms")),
            r["outcome"],
        ]
        for r in rows
    ]
    return ["The core's share of the HTTP target (p50 ≤ query embedding + 2.5 ms, p95 ≤ 12 ms).", ""] + table(
        body, ["spaces", "memories", "rounds", "p50 ms", "p95 ms", "test"]
    )


def section_runs(rows: list[dict], checks: Checks) -> list[str]:
    base = next((r["bench_p50_ms"] for r in rows if r.get("arm") == "before"), None)
    body = [
        [
            r.get("arm", r["name"]),
            r.get("memories"),
            r.get("rounds"),
            r["bench_p50_ms"],
            r.get("bench_p95_ms"),
            f"{r['bench_p50_ms'] - base:+.3f}" if base is not None else "–",
            r["outcome"],
        ]
        for r in rows
    ]
    return ["No target is stated; the cost is shown against the recall path without runs.", ""] + table(
        body, ["arm", "memories", "rounds", "p50 ms", "p95 ms", "p50 against before (ms)", "test"]
    )


def section_embedding(rows: list[dict], checks: Checks) -> list[str]:
    body = []
    for r in rows:
        onnx = r.get("backend") == "onnx"
        body.append(
            [
                r.get("backend"),
                r.get("queries"),
                checks.check("embed.p50_ms", "onnx", r["bench_p50_ms"]) if onnx else fmt(r["bench_p50_ms"]),
                r.get("bench_p95_ms"),
                checks.check(
                    "embed.cosine",
                    "onnx vs torch",
                    r.get("min_cosine_onnx_vs_torch"),
                    shown=f"{r.get('min_cosine_onnx_vs_torch', 0):.6f}",
                )
                if onnx
                else f"{r.get('min_cosine_onnx_vs_torch', 0):.6f}",
                r["outcome"],
            ]
        )
    return table(body, ["backend", "queries", "p50 ms", "p95 ms", "min cosine, onnx vs torch", "test"])


def section_cli(rows: list[dict], checks: Checks) -> list[str]:
    body = []
    for r in rows:
        command = r.get("command", r["name"])
        key = "cli.recall_s" if command == "recall" else "cli.other_s"
        body.append(
            [command, r.get("rounds"), checks.check(key, command, r.get("p50_s")), r.get("max_s"), r["outcome"]]
        )
    return table(body, ["command", "rounds", "median s", "max s", "test"])


def section_mcp(rows: list[dict], checks: Checks) -> list[str]:
    body = []
    for r in rows:
        launch = "launch_to_tools_list_s" in r
        body.append(
            [
                r["name"],
                checks.check("mcp.median_s", "launch → tools/list", r.get("median_s"))
                if launch
                else f"{fmt(r.get('median_s'))} (no target)",
                r["outcome"],
            ]
        )
    return table(body, ["benchmark", "median s", "test"])


def section_import(rows: list[dict], checks: Checks) -> list[str]:
    body = [
        [
            r.get("rows"),
            r.get("batch_size"),
            checks.check(
                "import.rows_per_s", f"{fmt(r.get('rows'))} rows, batch {r.get('batch_size')}", r.get("rows_per_s")
            ),
            r.get("index_build_s", "not recorded"),
            r.get("rows_per_s_before_build", "not recorded"),
            r.get("cpu_us_per_row"),
            r["outcome"],
        ]
        for r in sorted(rows, key=lambda r: (r.get("rows", 0), r.get("batch_size", 0)))
    ]
    return [
        "Short keyed text rows into a new store with an embedder that costs nothing: parse, checks, "
        "duplicate queries, LanceDB and catalog writes, what bounds an import on a GPU. The rate includes "
        "the large partition's index build at the import's end; its time, and the rate without it, beside.",
        "",
    ] + table(body, ["rows", "batch", "rows/s", "index build s", "rows/s before the build", "CPU µs per row", "test"])


# Before issue 23 (commit fb90ebd, benchmarks/results/partial/http-load-full-fb90ebd.json): one server
# process, clients as threads of the benchmark's own process, SQLite catalog; p95 per step only.
LOAD_BEFORE = {
    "commit": "fb90ebd",
    "main": {"throughput_rps": 120.9, "p50_ms": 123.63, "p95_ms": 220.82, "p99_ms": 294.24},
    "p95_ms": {1: 23.1, 2: 36.2, 4: 51.1, 8: 116.8, 16: 220.8, 32: 380.3},
}


def section_load(rows: list[dict], checks: Checks) -> list[str]:
    out = []
    for r in rows:
        catalog = r.get("catalog", "sqlite")
        cell = f"{r.get('clients')} clients, {catalog}"
        curve = {c["clients"]: c for c in r.get("curve") or []}
        biggest = r.get("max_clients")
        body = [
            ["catalog, workers, batch window", f"{catalog}, {r.get('workers', 1)}, {fmt(r.get('batch_window_ms'))} ms"],
            ["store", f"{fmt(r.get('store_memories'))} memories over {fmt(r.get('spaces'))} spaces"],
            ["clients, seconds, requests", f"{r.get('clients')}, {r.get('seconds')}, {fmt(r.get('requests'))}"],
            [
                "throughput (requests/s)",
                checks.check("load.rps", cell, r.get("throughput_rps")) if curve else fmt(r.get("throughput_rps")),
            ],
            ["p50 / p99 ms", f"{fmt(r.get('p50_ms'))} / {fmt(r.get('p99_ms'))}"],
            ["p95 ms", checks.check("load.p95_ms", cell, r.get("p95_ms"))],
            ["recall p95 / write p95 ms", f"{fmt(r.get('recall_p95_ms'))} / {fmt(r.get('write_p95_ms'))}"],
            ["errors", checks.check("load.errors", cell, r.get("errors"))],
            ["server peak RSS MiB (all processes)", fmt(r.get("server_peak_rss_mb"))],
            ["most clients served at p95 ≤ 50 ms", fmt(r.get("most_clients_p95_le_50ms"))],
            ["test", r["outcome"]],
        ]
        if curve:
            body[9:9] = [
                [
                    "1 client p50 ms",
                    checks.check("load.one_p50_ms", f"1 client, {catalog}", r.get("one_client_p50_ms")),
                ],
                [
                    f"{biggest} clients p99 ms",
                    checks.check("load.max_p99_ms", f"{biggest} clients, {catalog}", r.get("max_clients_p99_ms")),
                ],
                [
                    f"{biggest} clients errors",
                    checks.check("load.max_errors", f"{biggest} clients, {catalog}", r.get("max_clients_errors")),
                ],
            ]
        else:  # a raw file from before the curve: its ramp of p95s
            body.insert(
                9,
                ["p95 ms by clients (ramp)", ", ".join(f"{c} → {p}" for c, p in (r.get("ramp_p95_ms") or {}).items())],
            )
        out += table(body, ["figure", "measured (target)"])
        if curve:
            out += [
                f"Against clients ({catalog}); *before*: commit {LOAD_BEFORE['commit']}, one process, clients as "
                "threads of the benchmark's process, p95 only.",
                "",
            ]
            out += table(
                [
                    [
                        c,
                        fmt(v["throughput_rps"]),
                        fmt(v["p50_ms"]),
                        fmt(v["p95_ms"]),
                        fmt(v["p99_ms"]),
                        v["errors"],
                        fmt(v.get("server_cpu_ms_per_request")),
                        fmt(v.get("client_cpu_ms_per_request")),
                        fmt(LOAD_BEFORE["p95_ms"].get(c)),
                    ]
                    for c, v in sorted(curve.items())
                ],
                [
                    "clients",
                    "requests/s",
                    "p50 ms",
                    "p95 ms",
                    "p99 ms",
                    "errors",
                    "server CPU ms / request",
                    "clients' CPU ms / request",
                    "p95 ms before",
                ],
            )
    return out


def plot_load(rows: list[dict], out_dir: Path, save) -> None:
    """Throughput and latency against clients, one line per catalog, the figures before beside."""
    import matplotlib.pyplot as plt

    runs = [r for r in rows if r["module"] == "test_http_load.py" and r.get("curve")]
    if not runs:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for r in runs:
        curve = sorted(r["curve"], key=lambda c: c["clients"])
        xs = [c["clients"] for c in curve]
        label = r.get("catalog", "sqlite")
        left.plot(xs, [c["throughput_rps"] for c in curve], marker="o", label=label)
        right.plot(xs, [c["p50_ms"] for c in curve], marker="o", label=f"{label} p50")
        right.plot(xs, [c["p95_ms"] for c in curve], marker="s", label=f"{label} p95")
    before = sorted(LOAD_BEFORE["p95_ms"].items())
    right.plot(
        [c for c, _ in before],
        [p for _, p in before],
        ls="--",
        color="grey",
        label=f"p95 before ({LOAD_BEFORE['commit']})",
    )
    left.axhline(LOAD_BEFORE["main"]["throughput_rps"], ls="--", color="grey", label="16 clients before")
    right.axhline(50, color="k", lw=0.8, ls=":", label="p95 target")
    for ax in (left, right):
        ax.set_xscale("log", base=2), ax.set_xlabel("clients (processes, one connection each)")
    left.set_ylabel("requests/s"), right.set_ylabel("ms"), right.set_yscale("log")
    left.set_title("Throughput against clients"), left.legend(fontsize=7), left.grid(True, alpha=0.3)
    save(fig, right, "load_vs_clients.png", "Latency against clients")


def section_batching(rows: list[dict], checks: Checks) -> list[str]:
    out = []
    lone = [r for r in rows if "lone_overhead_p50_ms" in r]
    if lone:
        out += table(
            [
                [
                    r.get("queries"),
                    fmt(r.get("direct_p50_ms")),
                    fmt(r.get("batched_p50_ms")),
                    checks.check("batch.lone_overhead_ms", "lone query", r.get("lone_overhead_p50_ms")),
                    fmt(r.get("direct_p95_ms")),
                    fmt(r.get("batched_p95_ms")),
                    r["outcome"],
                ]
                for r in lone
            ],
            ["queries", "direct p50 ms", "batcher p50 ms", "difference ms", "direct p95 ms", "batcher p95 ms", "test"],
        )
    many = [r for r in rows if "threads" in r]
    if many:
        out += table(
            [
                [
                    r["threads"],
                    fmt(r.get("direct_qps")),
                    fmt(r.get("batched_qps")),
                    fmt(r.get("direct_p50_ms")),
                    fmt(r.get("batched_p50_ms")),
                    fmt(r.get("direct_p95_ms")),
                    fmt(r.get("batched_p95_ms")),
                    fmt(r.get("mean_batch")),
                    r["outcome"],
                ]
                for r in sorted(many, key=lambda r: r["threads"])
            ],
            [
                "threads",
                "direct queries/s",
                "batched queries/s",
                "direct p50 ms",
                "batched p50 ms",
                "direct p95 ms",
                "batched p95 ms",
                "mean batch",
                "test",
            ],
        )
    return out


def section_evidence(rows: list[dict], checks: Checks) -> list[str]:
    """Evidence recall of each method, per level; the per-type tables are in EVIDENCE.md."""
    body = []
    for r in sorted(rows, key=lambda r: r.get("granularity", "")):
        methods = sorted({key.split("/")[0] for key in r if "/" in key})
        for m in methods:
            body.append(
                [
                    r.get("granularity"),
                    m + (" (default)" if m == r.get("default") else ""),
                    r.get("questions"),
                    r.get(f"{m}/any@5"),
                    r.get(f"{m}/all@5"),
                    r.get(f"{m}/all@10"),
                    r.get(f"{m}/ndcg@10"),
                    r["outcome"],
                ]
            )
    return ["Each question's haystack is its own space; every signal is computed inside it.", ""] + table(
        body, ["level", "method", "questions", "any@5", "all@5", "all@10", "NDCG@10", "test"]
    )


def section_lexical(rows: list[dict], checks: Checks) -> list[str]:
    body = [
        [
            r.get("partition_rows"),
            r.get("cosine_p50_ms"),
            r.get("hybrid_p50_ms"),
            r.get("added_p50_ms"),
            r.get("ratio_p50"),
            r.get("feedback_p50_ms", "not measured"),
            r.get("feedback_added_p50_ms", "not measured"),
            r.get("lexical_build_ms"),
            r["outcome"],
        ]
        for r in sorted(rows, key=lambda r: r.get("partition_rows", 0))
    ]
    return [
        "`VectorStore.search` without and with the query text, and with feedback after it, in turn in one run.",
        "",
    ] + table(
        body,
        [
            "partition rows",
            "cosine p50 ms",
            "hybrid p50 ms",
            "added ms",
            "ratio",
            "hybrid + feedback p50 ms",
            "feedback added ms",
            "lexical build ms",
            "test",
        ],
    )


def section_several(rows: list[dict], checks: Checks) -> list[str]:
    body = []
    for r in rows:
        cell = f"{fmt(r.get('store_memories'))} memories / {r.get('scope')}"
        for arm, prefix in (("embedded (SQLite, local folder)", "embedded"), ("PostgreSQL + S3 (moto)", "remote")):
            checks.unjudged(
                f"HTTP recall p50, {arm}", cell, fmt(r.get(f"{prefix}_p50_ms")), "measured beside the default"
            )
        body.append(
            [
                r.get("store_memories"),
                r.get("scope"),
                fmt(r.get("embedded_p50_ms")),
                fmt(r.get("embedded_p95_ms")),
                fmt(r.get("remote_p50_ms")),
                fmt(r.get("remote_p95_ms")),
                f"{fmt(r.get('cold_local_ms'))} / {fmt(r.get('warm_local_ms'))}",
                f"{fmt(r.get('cold_s3_ms'))} / {fmt(r.get('warm_s3_ms'))}",
                checks.check("several.other_spaces", cell, r.get("answers_from_other_spaces")),
                r["outcome"],
            ]
        )
    return ["Requests alternate between the two servers; S3 is moto's server on this machine.", ""] + table(
        body,
        [
            "store",
            "scope",
            "embedded p50 ms",
            "embedded p95 ms",
            "PostgreSQL + S3 p50 ms",
            "p95 ms",
            "partition cold / warm, local (ms)",
            "partition cold / warm, S3 (ms)",
            "answers from other spaces",
            "test",
        ],
    )


def section_mcp_http(rows: list[dict], checks: Checks) -> list[str]:
    body = []
    for r in rows:
        cell = f"{fmt(r.get('store_memories'))} memories, {r.get('scope')}"
        checks.unjudged(
            "MCP recall over HTTP less plain HTTP recall, p50",
            cell,
            fmt(r.get("mcp_minus_plain_p50_ms")),
            "issue 25 asks at most 2 ms more",
        )
        body.append(
            [
                cell,
                fmt(r.get("plain_http_p50_ms")),
                fmt(r.get("plain_http_p95_ms")),
                fmt(r.get("mcp_http_p50_ms")),
                fmt(r.get("mcp_http_p95_ms")),
                fmt(r.get("mcp_minus_plain_p50_ms")),
                r.get("answers_from_other_spaces"),
                r["outcome"],
            ]
        )
    return ["One server; the plain API and a `recall` tool call at /mcp, question by question.", ""] + table(
        body,
        [
            "store",
            "plain p50 ms",
            "plain p95 ms",
            "MCP p50 ms",
            "MCP p95 ms",
            "MCP − plain p50 ms",
            "answers from other spaces",
            "test",
        ],
    )


def section_model_costs(rows: list[dict], checks: Checks) -> list[str]:
    body = []
    for r in rows:
        what = "reindex" if "rows_per_s" in r else "HTTP recall"
        value = (
            f"{fmt(r.get('rows_per_s'))} rows/s"
            if what == "reindex"
            else (f"p50 {fmt(r.get('p50_ms'))} ms, p95 {fmt(r.get('p95_ms'))} ms")
        )
        checks.unjudged(
            f"{what} with {r.get('model')}",
            r.get("runtime") or r.get("scope") or "",
            value,
            "issue 27 asks for the figure, with no target",
        )
        body.append([r["name"], r.get("model"), what, value, r["outcome"]])
    return table(body, ["benchmark", "model", "what", "measured", "test"])


def section_backup(rows: list[dict], checks: Checks) -> list[str]:
    body = []
    for r in sorted(rows, key=lambda r: r.get("memories", 0)):
        cell = f"{fmt(r.get('memories'))} memories"
        for what in ("backup", "export"):
            checks.unjudged(f"{what} rate", cell, fmt(r.get(f"{what}_per_s")), "no target is stated")
        body.append(
            [
                r.get("memories"),
                r.get("spaces"),
                f"{fmt(r.get('backup_per_s'))} ({fmt(r.get('backup_s'))} s, {fmt(r.get('backup_mb'))} MB)",
                f"{fmt(r.get('restore_per_s'))} ({fmt(r.get('restore_s'))} s)",
                f"{fmt(r.get('export_per_s'))} ({fmt(r.get('export_mb'))} MB)",
                f"{fmt(r.get('export_vectors_per_s'))} ({fmt(r.get('export_vectors_mb'))} MB)",
                r.get("peak_rss_mb"),
                r["outcome"],
            ]
        )
    return ["A store at rest, 384-d vectors; the export goes to a sink that counts bytes.", ""] + table(
        body,
        [
            "memories",
            "spaces",
            "backup memories/s",
            "restore memories/s",
            "export memories/s",
            "export with vectors, memories/s",
            "peak RSS MiB",
            "test",
        ],
    )


SECTIONS: dict[str, Callable[..., list[str]]] = {
    "test_evidence_recall.py": section_evidence,
    "test_lexical_latency.py": section_lexical,
    "test_scope_vs_filter.py": section_scope,
    "test_longmemeval.py": section_lme,
    "test_real_text_ivf.py": section_ivf_text,
    "test_large_partition.py": section_large,
    "test_recall_overhead.py": section_overhead,
    "test_run_bookkeeping.py": section_runs,
    "test_embedding.py": section_embedding,
    "test_cli_wall.py": section_cli,
    "test_mcp_startup.py": section_mcp,
    "test_import_throughput.py": section_import,
    "test_http_load.py": section_load,
    "test_embedding_batching.py": section_batching,
    "test_several_machines.py": section_several,
    "test_backup_rates.py": section_backup,
    "test_mcp_http_latency.py": section_mcp_http,
    "test_model_costs.py": section_model_costs,
}


def modules(run: Run, checks: Checks, level: str = "##", missing: str = "Not in this run.") -> list[str]:
    by_module: dict[str, list[dict]] = defaultdict(list)
    for r in run.rows:
        by_module[r["module"]].append(r)
    onnx = next((r["bench_p50_ms"] for r in by_module.get("test_embedding.py", []) if r.get("backend") == "onnx"), None)
    out = []
    for module, title in MODULES.items():
        rows = by_module.get(module)
        if not rows and missing is None:
            continue
        out += [f"{level} {title} (`benchmarks/{module}`)", ""]
        if not rows:
            out += [missing, ""]
            continue
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


# -- plots ------------------------------------------------------------------------------------


def plots(rows: list[dict], out_dir: Path, load_rows: list[dict] | None = None) -> list[str]:
    """``load_rows``: the load curves to plot when this run has none (a partial rerun's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = [
        r
        for r in rows
        if r["module"] == "test_scope_vs_filter.py"
        and not r.get("single_space")
        and "(single space)" not in str(r.get("scope"))
    ]
    made = []

    def save(fig, ax, name: str, title: str) -> None:
        ax.set_title(title), ax.legend(fontsize=7), ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout(), fig.savefig(out_dir / name, dpi=120), plt.close(fig)
        made.append(name)

    sizes = sorted({r["store_size"] for r in grid})
    fixed = fixed_scope(grid)
    if fixed and len(sizes) > 1:
        by_arm = defaultdict(list)
        for r in grid:
            if r["scope"] == fixed:
                by_arm[r["arm"]].append((r["store_size"], r["bench_p50_ms"]))
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for arm, points in sorted(by_arm.items(), key=lambda kv: _arm_rank(kv[0])):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=arm)
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("memories in the store"), ax.set_ylabel("p50 search latency (ms)")
        save(fig, ax, "latency_vs_store_size.png", f"Latency against store size, {fixed} scope")
    post = defaultdict(list)
    for r in grid:
        if r["arm"].startswith("post-filter"):
            post[(r["store_size"], r["scope"])].append((int(r["arm"].rsplit("x", 1)[1]), r["recall_at_10"]))
    if post:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for (size, scope), points in sorted(post.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"{size:,} / {scope}")
        ax.axhline(1.0, color="k", lw=0.8, ls="--", label="exact")
        ax.set_xscale("log", base=2), ax.set_xlabel("LanceDB post-filter over-fetch (k×)"), ax.set_ylabel("recall@10")
        save(fig, ax, "recall_vs_overfetch.png", "Post-filter recall against over-fetch")
    plot_load(rows if any(r.get("curve") for r in rows) else load_rows or [], out_dir, save)
    biggest = max(sizes, default=0)
    scope_arm = defaultdict(list)
    for r in grid:
        if r["store_size"] == biggest and r["scope"].startswith("1p"):
            scope_arm[r["arm"]].append((r.get("partition_rows", r["scope_rows"]), r["bench_p50_ms"]))
    if scope_arm and len({p[0] for pts in scope_arm.values() for p in pts}) > 1:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for arm, points in sorted(scope_arm.items(), key=lambda kv: _arm_rank(kv[0])):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=arm)
        ax.axvline(50_000, color="grey", lw=0.8, ls=":", label="IVF image from here (esfis)")
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("rows in the caller's partition"), ax.set_ylabel("p50 search latency (ms)")
        save(fig, ax, "latency_vs_scope_size.png", f"Latency against scope size ({biggest:,}-memory store)")
    return made


# -- the report -------------------------------------------------------------------------------


def header(run: Run) -> list[str]:
    cpu = run.machine.get("cpu", {})
    title = "# esfis benchmark report"
    if run.kind == "partial":
        title += f" — partial rerun, commit {run.short}, not a full run"
    out = [title, ""]
    legacy = (
        " (as pytest-benchmark recorded it: `git describe --dirty`, untracked files not seen)"
        if run.porcelain is None
        else ""
    )
    if run.dirty is None:
        out += ["> ⚠️ **The tree's state was not recorded**: this run cannot say whether it measured a commit.", ""]
    elif run.dirty:
        out += [
            f"> ⚠️ **Measured from a dirty tree**{legacy}: commit `{run.commit}` with uncommitted changes"
            + (" (`git status --porcelain` at the start of the run):" if run.porcelain else "."),
            ">",
        ]
        out += [f"> `{line}`" for line in run.porcelain or [] if not line[3:].startswith("benchmarks/results/")] + [""]
    else:
        out += [f"**Commit `{run.commit}`**, clean tree{legacy}.", ""]
    if run.commit_at_end and run.commit and run.commit_at_end != run.commit:
        out += [f"> ⚠️ HEAD moved during the run: `{run.commit}` at the start, `{run.commit_at_end}` at the end.", ""]
    if run.kind == "complete":
        how = "one complete run (`scripts/bench" + (" full" if run.mode == "full" else "") + "`)"
    elif run.kind == "partial":
        how = (
            "a partial run (a selection of benchmarks"
            + (f", overrides {run.overrides}" if run.overrides else "")
            + "): no cell here stands for a full run"
        )
    else:
        how = "a run whose raw file predates run labels (whether it was complete is not recorded)"
    out += [
        f"Run: {run.mode_text}, {how}, {run.when}; raw data `{run.path.name}`, the only source of every figure below.",
        "",
    ]
    if run.mode == "quick":
        out += [
            "> Quick mode: small stores and few queries. Targets stated for the full mode's sizes are marked "
            "*(full-mode target)*; their verdicts here say little.",
            "",
        ]
    out += [
        f"Machine: {cpu.get('brand_raw', platform.processor())}, {cpu.get('count', '?')} cores, "
        f"Python {run.machine.get('python_version', platform.python_version())}, {run.machine.get('system', '')} "
        f"{run.machine.get('release', '')}.",
        "",
        "Latency: p50/p95 of the timed pass (pytest-benchmark rounds, one query or request each), in ms.",
        "",
        f"Recall, everywhere in this report: {RECALL_DEFINITION}.",
        "",
    ]
    return out


def summary(checks: Checks) -> list[str]:
    met = sum(1 for c in checks.items if c[4].startswith("✅"))
    missed = [c for c in checks.items if c[4].startswith("❌")]
    out = [
        "## Targets",
        "",
        f"{met} of {len(checks.items)} checks met, {len(missed)} missed"
        + (
            f", {len(checks.items) - met - len(missed)} without a figure"
            if len(checks.items) - met - len(missed)
            else ""
        )
        + ". Targets are defined in `benchmarks/targets.py`.",
        "",
    ]
    return out + table(checks.items, ["figure", "cell", "measured", "target", "met"])


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


def partial_section(run: Run) -> list[str]:
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="the run's pytest-benchmark JSON")
    parser.add_argument("--partial", type=Path, action="append", default=[], help="a partial rerun, reported apart")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where REPORT.md and the plots go")
    args = parser.parse_args(argv)
    print(build(args.raw, args.partial, args.out))


if __name__ == "__main__":
    main()
