"""Every target the benchmark report checks, in one place, and the benchmark files it covers.

A target names what it bounds and where it was stated; the report prints each measured figure
beside its target with ✅ or ❌. A bound may be relative to another figure of the same run (the
index search against the floor of the same grid cell), given to ``Target.met`` as ``reference``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

RECALL_DEFINITION = (
    "tie-aware recall@10: the share of the ten answers wanted (fewer when the scope holds fewer "
    "valid rows) whose exact score reaches the exact tenth-best score among the caller's valid rows; "
    "a row counts once, a row outside the scope never (stored texts repeat, so an equal copy is as "
    "right as the row the exact scan happened to rank tenth). esfis's whole recall (the scope-first arm) is "
    "judged against its own exact answer: the same relevance computed by an exact scan, feedback included "
    "(each partition's best 20 valid rows, the query moved towards the best two, those rescored), the scores "
    "taken against the moved query; its index search alone (scope-first-index) against the plain cosine"
)

_OPS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq}
_SIGNS = {"<=": "≤", ">=": "≥", "==": "="}


@dataclass(frozen=True)
class Target:
    what: str
    op: str  # "<=", ">=" or "=="
    value: float
    unit: str = ""
    relative_to: str | None = None  # the figure the bound multiplies, when it is relative
    source: str = ""
    full_only: bool = False  # stated for the full mode's sizes; quick mode shows it, its verdict says so
    why: str = ""  # what the bound is for: the target's own justification
    missed_because: str = ""  # where a full run misses it: what was measured about why

    def limit(self, reference: float | None = None) -> float | None:
        if self.relative_to is None:
            return self.value
        return None if reference is None else self.value * reference

    def met(self, measured: float | None, reference: float | None = None) -> bool | None:
        limit = self.limit(reference)
        if measured is None or limit is None:
            return None
        if self.op == "==" and isinstance(limit, float):
            return abs(measured - limit) <= 1e-9
        return bool(_OPS[self.op](measured, limit))

    def describe(self, reference: float | None = None) -> str:
        sign = _SIGNS[self.op]
        if self.relative_to is None:
            return f"{sign} {_num(self.value)}{' ' + self.unit if self.unit else ''}"
        limit = self.limit(reference)
        shown = f" = {_num(limit)}{' ' + self.unit if self.unit else ''}" if limit is not None else ""
        return f"{sign} {_num(self.value)}× {self.relative_to}{shown}"


def _num(value: float) -> str:
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:,.1f}"


TARGETS: dict[str, Target] = {
    # benchmarks/test_scope_vs_filter.py (targets from the README's table, issue 13)
    "scope.index_vs_floor": Target(
        "scope-first index search p50, each grid cell",
        "<=",
        1.5,
        "ms",
        relative_to="the floor's p50 in the same cell",
        source="README, issue 13",
    ),
    "scope.recall_exact": Target(
        "scope-first recall@10, partitions served by an exact scan", ">=", 1.0, source="issue 13"
    ),
    "scope.recall_ivf": Target(
        "scope-first recall@10, a partition served by its IVF image", ">=", 0.95, source="issue 13"
    ),
    "scope.vs_prefilter": Target(
        "scope-first whole recall p50 against single-table prefilter",
        "<=",
        0.2,
        "ms",
        relative_to="the prefilter's p50 in the same cell",
        source="README (≥ 5× faster)",
    ),
    "scope.out_of_scope": Target(
        "scope-first vectors scored outside the caller's partitions, per query",
        "==",
        0,
        source="benchmarks/test_scope_vs_filter.py",
    ),
    "scope.underfilled": Target(
        "scope-first answers with fewer than k rows", "==", 0, source="benchmarks/test_scope_vs_filter.py"
    ),
    "single_space.recall": Target(
        "one large space, recall@10", ">=", 0.95, source="benchmarks/test_scope_vs_filter.py"
    ),
    "single_space.p50_ms": Target(
        "one large space, recall p50", "<=", 10, "ms", source="benchmarks/test_scope_vs_filter.py", full_only=True
    ),
    # benchmarks/test_large_partition.py (issue 16)
    "large.first_recall_s": Target(
        "large partition, first recall in any process", "<=", 1, "s", source="benchmarks/test_large_partition.py"
    ),
    "large.p50_ms": Target(
        "large partition, steady HTTP recall p50", "<=", 15, "ms", source="benchmarks/test_large_partition.py"
    ),
    "large.p95_ms": Target(
        "large partition, steady HTTP recall p95", "<=", 30, "ms", source="benchmarks/test_large_partition.py"
    ),
    "large.server_rss_gb": Target(
        "large partition, server RSS", "<=", 2.5, "GB", source="benchmarks/test_large_partition.py", full_only=True
    ),
    "large.reader_pss_mb": Target(
        "large partition, PSS each further process adds", "<=", 300, "MB", source="benchmarks/test_large_partition.py"
    ),
    "large.other_spaces": Target(
        "large partition, answers from other spaces", "==", 0, source="benchmarks/test_large_partition.py"
    ),
    # benchmarks/test_real_text_ivf.py
    "ivf_text.recall": Target(
        "IVF image on real text, recall@10", ">=", 0.95, source="benchmarks/test_real_text_ivf.py"
    ),
    # benchmarks/test_recall_overhead.py: the core's share of the HTTP target (embedding + 2.5 ms, p95 ≤ 12 ms)
    "overhead.p50_ms": Target(
        "recall path without embedding, p50",
        "<=",
        2.5,
        "ms",
        source="benchmarks/test_recall_overhead.py",
        full_only=True,
    ),
    "overhead.p95_ms": Target(
        "recall path without embedding, p95",
        "<=",
        12,
        "ms",
        source="benchmarks/test_recall_overhead.py",
        full_only=True,
    ),
    # benchmarks/test_http_recall.py (issue 5) and its issue-13 form against the run's own embedding figure
    "http.p50_ms": Target(
        "HTTP recall p50, embedding included", "<=", 15, "ms", source="benchmarks/test_http_recall.py", full_only=True
    ),
    "http.p95_ms": Target(
        "HTTP recall p95, embedding included", "<=", 30, "ms", source="benchmarks/test_http_recall.py", full_only=True
    ),
    "http.p50_over_embedding_ms": Target(
        "HTTP recall p50 less the ONNX query embedding p50",
        "<=",
        2.5,
        "ms",
        source="benchmarks/test_recall_overhead.py (issue 13)",
        full_only=True,
    ),
    "http.other_spaces": Target(
        "HTTP recall, answers from other spaces", "==", 0, source="benchmarks/test_http_recall.py"
    ),
    # benchmarks/test_cli_wall.py (issue 13), median of the rounds
    "cli.recall_s": Target("CLI recall wall time, median", "<=", 1, "s", source="benchmarks/test_cli_wall.py"),
    "cli.other_s": Target(
        "CLI command without embedding, wall time, median", "<=", 0.3, "s", source="benchmarks/test_cli_wall.py"
    ),
    # benchmarks/test_embedding.py (issue 5)
    "embed.p50_ms": Target("ONNX query embedding p50", "<=", 5, "ms", source="benchmarks/test_embedding.py"),
    "embed.cosine": Target(
        "ONNX against torch vectors, min cosine", ">=", 0.999, source="benchmarks/test_embedding.py"
    ),
    # benchmarks/test_query_precision.py (issue 34: the int8 query graph is kept only if both hold)
    "query.min_cosine": Target(
        "int8 against fp32 query vectors, every LongMemEval question, min cosine",
        ">=",
        0.99,
        source="benchmarks/test_query_precision.py",
        full_only=True,
    ),
    "query.all10_drop": Target(
        "LongMemEval evidence all@10, fp32 less int8",
        "<=",
        0.005,
        source="benchmarks/test_query_precision.py",
        full_only=True,
    ),
    # benchmarks/test_import_throughput.py
    "import.rows_per_s": Target(
        "bulk import without the model",
        ">=",
        50_000,
        "rows/s",
        source="benchmarks/test_import_throughput.py",
        full_only=True,
    ),
    "import.spread_rows_per_s": Target(
        "bulk import without the model, whatever the spread (1,000 to 100,000 spaces)",
        ">=",
        20_000,
        "rows/s",
        source="benchmarks/test_import_throughput.py",
        full_only=True,
    ),
    # benchmarks/test_mcp_startup.py
    "mcp.median_s": Target("MCP launch → tools/list, median", "<=", 1, "s", source="benchmarks/test_mcp_startup.py"),
    # benchmarks/test_http_load.py
    "load.p95_ms": Target(
        "HTTP load, 16 clients, p95 of all requests",
        "<=",
        50,
        "ms",
        source="benchmarks/test_http_load.py",
        full_only=True,
    ),
    "load.errors": Target("HTTP load, errors", "==", 0, source="benchmarks/test_http_load.py"),
    "batch.lone_overhead_ms": Target(
        "a lone query through the batcher, p50 less the direct p50", "<=", 0.3, "ms", source="issue 23", full_only=True
    ),
    # issue 23: many agents at once, on two cores, the clients separate processes on the same machine
    "load.rps": Target("HTTP load, 16 clients, throughput", ">=", 300, "requests/s", source="issue 23", full_only=True),
    "load.max_errors": Target("HTTP load, 64 clients, errors", "==", 0, source="issue 23", full_only=True),
    "load.max_p99_ms": Target("HTTP load, 64 clients, p99", "<=", 500, "ms", source="issue 23", full_only=True),
    # "no worse than today": the 1-client p50 of a real esfis serve at 100k memories (FIELD-NOTES, before issue 23)
    "load.recall_cpu_ms": Target(
        "HTTP load, server CPU per recall (16 clients, recalls only)",
        "<=",
        6,
        "ms",
        source="issue 34",
        full_only=True,
    ),
    "load.remember_cpu_ms": Target(
        "HTTP load, server CPU per remember (16 clients, writes only)",
        "<=",
        8,
        "ms",
        source="issue 34",
        full_only=True,
    ),
    "load.one_p50_ms": Target("HTTP load, 1 client, p50", "<=", 6.6, "ms", source="issue 23", full_only=True),
    # benchmarks/test_longmemeval.py
    "lme.other_spaces": Target(
        "LongMemEval, scope-first results from another space", "==", 0, source="benchmarks/test_longmemeval.py"
    ),
    "lme.recall": Target("LongMemEval, scope-first recall@10", ">=", 1.0, source="benchmarks/test_longmemeval.py"),
    # benchmarks/test_several_machines.py (issue 15): measured beside the default; only isolation is bounded
    "several.other_spaces": Target(
        "PostgreSQL + S3 and embedded HTTP recall, answers from other spaces",
        "==",
        0,
        source="benchmarks/test_several_machines.py",
    ),
}

# Every benchmark file and the report section that shows it, in the report's order.
MODULES: dict[str, str] = {
    "test_scope_vs_filter.py": "Scope-first against filters, synthetic stores",
    "test_longmemeval.py": "LongMemEval_S, real text, one space per question",
    "test_evidence_recall.py": "Evidence recall on LongMemEval_S: cosine against hybrid (BM25) recall",
    "test_lexical_latency.py": "The lexical signal's cost per recall",
    "test_real_text_ivf.py": "IVF image on real text",
    "test_large_partition.py": "One large partition: cold start, shared memory, steady HTTP recall",
    "test_http_recall.py": "HTTP recall end to end",
    "test_recall_overhead.py": "The recall path's own cost, embedding left out",
    "test_run_bookkeeping.py": "Run bookkeeping's cost to a recall",
    "test_embedding.py": "Query embedding on the CPU",
    "test_query_precision.py": "The int8 query graph against fp32: CPU, cosine, evidence recall",
    "test_embedding_batching.py": "Batched query embedding: a lone query and concurrent ones",
    "test_cli_wall.py": "CLI wall time",
    "test_mcp_startup.py": "MCP start-up",
    "test_import_throughput.py": "Bulk import, everything but the model",
    "test_http_load.py": "HTTP load, concurrent clients",
    "test_several_machines.py": "Several machines: PostgreSQL catalog and S3 partitions beside the embedded default",
    "test_backup_rates.py": "Backup, restore and export rates",
    "test_mcp_http_latency.py": "MCP over HTTP: a recall tool call beside the plain API",
    "test_model_costs.py": "What each model costs: reindex per 100k memories, HTTP recall at 100k",
}
