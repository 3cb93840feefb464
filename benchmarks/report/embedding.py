"""The sections on the model: query embedding on the CPU (``test_embedding.py``), the int8
query graph against fp32 (``test_query_precision.py``), batched
query embedding (``test_embedding_batching.py``) and what each model costs
(``test_model_costs.py``)."""

from __future__ import annotations

from benchmarks.report.common import Checks, fmt, table


def section_embedding(rows: list[dict], checks: Checks) -> list[str]:
    body = []
    for r in rows:
        onnx = r.get("backend") == "onnx"
        queried = r.get("backend") == "onnx-int8"  # the graph a query runs on by default
        body.append(
            [
                r.get("backend"),
                r.get("queries"),
                checks.check("embed.p50_ms", "onnx-int8", r["bench_p50_ms"]) if queried else fmt(r["bench_p50_ms"]),
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


def section_query_precision(rows: list[dict], checks: Checks) -> list[str]:
    out = []
    for r in rows:
        drop = None
        if r.get("fp32/all@10") is not None and r.get("int8/all@10") is not None:
            drop = round(r["fp32/all@10"] - r["int8/all@10"], 4)
        out += table(
            [
                [
                    r.get("questions"),
                    r.get("questions_with_evidence"),
                    fmt(r.get("fp32_cpu_ms_per_query")),
                    fmt(r.get("int8_cpu_ms_per_query")),
                    checks.check(
                        "query.min_cosine",
                        "int8 query vectors",
                        r.get("min_cosine_questions"),
                        shown=fmt(r.get("min_cosine_questions"), 4),
                    ),
                    checks.check("query.all10_drop", "int8 evidence all@10", drop, shown=fmt(drop, 4)),
                    r["outcome"],
                ]
            ],
            [
                "questions",
                "with evidence",
                "fp32 CPU ms/query",
                "int8 CPU ms/query",
                "min cosine",
                "all@10 drop",
                "test",
            ],
        )
        out += table(
            [
                [arm, *(fmt(r.get(f"{arm}/{m}"), 4) for m in ("any@5", "all@5", "all@10", "ndcg@10"))]
                for arm in ("fp32", "int8")
            ],
            ["query graph", "any@5", "all@5", "all@10", "nDCG@10"],
        )
        fragments = r.get("fragments_min_cosine") or {}
        if fragments:
            out += table(
                [[span, f["texts"], fmt(f["min_cosine"], 4)] for span, f in fragments.items()],
                [f"word fragments (below {r.get('short_query_tokens')} tokens: fp32)", "texts", "min cosine"],
            )
    return out


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
