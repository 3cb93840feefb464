"""The sections on real text: LongMemEval_S (``test_longmemeval.py``), evidence recall
(``test_evidence_recall.py``), the lexical signal's cost (``test_lexical_latency.py``) and the
IVF image on real text (``test_real_text_ivf.py``)."""

from __future__ import annotations

from benchmarks.report.common import Checks, arm_rank, fmt, table


def section_lme(rows: list[dict], checks: Checks) -> list[str]:
    out = [
        "Each question's haystack is its own space; the same text sits in many spaces. *Evidence recall* is "
        "another measure: the share of the question's evidence turns among the ten answers.",
        "",
    ]
    body = []
    for r in sorted(rows, key=lambda r: arm_rank(r["arm"].replace("+embed", ""))):
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
