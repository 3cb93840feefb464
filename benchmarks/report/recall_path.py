"""The sections on one recall's latency, from the core to HTTP: one large partition
(``test_large_partition.py``), HTTP recall end to end (``test_http_recall.py``), the recall
path's own cost (``test_recall_overhead.py``), run bookkeeping (``test_run_bookkeeping.py``),
several machines (``test_several_machines.py``) and MCP over HTTP
(``test_mcp_http_latency.py``)."""

from __future__ import annotations

from benchmarks.report.common import Checks, fmt, table


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


def section_memories_page(rows: list[dict], checks: Checks) -> list[str]:
    """Settings › Memories at size (``test_memories_page.py``)."""
    out = []
    for r in rows:
        cell = f"{r.get('rows', 0):,} rows"
        body = []
        for key, what in (
            ("html_first", "HTML, first page"),
            ("html_deep", "HTML, pages far down"),
            ("api_first", "GET /v1/memories, first page"),
            ("api_deep", "GET /v1/memories, pages far down"),
        ):
            figures = r.get(key, {})
            body.append(
                [
                    f"{what}: p50 / p95 ms",
                    f"{fmt(figures.get('p50_ms'))} / "
                    + checks.check("memories.page_p95_ms", f"{cell}, {what}", figures.get("p95_ms")),
                ]
            )
        out += [f"{cell}, pages of {r.get('page', 50)}:", "", *table(body, ["figure", "measured"])]
    return out


def section_recall_filter(rows: list[dict], checks: Checks) -> list[str]:
    """Recall's filter over data (``test_recall_filter.py``): each filter's p50 with a query and
    without, and its ratio to the unfiltered recall's p50 of the same run (issue 69's targets)."""
    out = []
    for r in rows:
        base = r.get("none_p50_ms")
        cell = f"{r.get('memories', 0):,} memories"
        body = [["no filter", fmt(base), "–"]]
        for arm, what in FILTER_ARMS:
            body.append(
                [
                    what,
                    checks.check("filter.query_ratio", f"{cell}, {arm}", r.get(f"{arm}_p50_ms"), base),
                    checks.check("filter.no_query_ratio", f"{cell}, {arm}", r.get(f"{arm}_no_query_p50_ms"), base),
                ]
            )
        out += [
            f"{cell}, each with data, recall p50 ms (hashing embedder):",
            "",
            *table(body, ["recall", "with the query", "no query (the newest that match)"]),
        ]
    return out


FILTER_ARMS = (
    ("equality", "an equality (1 % match)"),
    ("ne", "$ne (99 % match)"),
    ("in", "$in of three (1 % match)"),
    ("range_half", "a numeric range matching half"),
    ("range_narrow", "a narrow numeric range (0.1 %)"),
    ("time_range", "a range of times, offsets mixed (20 matches)"),
    ("exists", "$exists (10 % match)"),
    ("dotted", "a dotted path (1 % match)"),
)
