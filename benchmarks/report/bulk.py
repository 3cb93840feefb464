"""The sections on whole-store moves: bulk import (``test_import_throughput.py``) and backup,
restore and export rates (``test_backup_rates.py``)."""

from __future__ import annotations

from benchmarks.report.common import Checks, fmt, table


def section_import(rows: list[dict], checks: Checks) -> list[str]:
    spread = [r for r in rows if r.get("spaces") is not None]
    rows = [r for r in rows if r.get("spaces") is None]
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
    return (
        [
            "Short keyed text rows into a new store with an embedder that costs nothing: parse, checks, "
            "duplicate queries, LanceDB and catalog writes, what bounds an import on a GPU. The rate includes "
            "the large partition's index build at the import's end; its time, and the rate without it, beside.",
            "",
        ]
        + table(body, ["rows", "batch", "rows/s", "index build s", "rows/s before the build", "CPU µs per row", "test"])
        + (_spread(spread, checks) if spread else [])
    )


def _spread(rows: list[dict], checks: Checks) -> list[str]:
    body = [
        [
            r.get("rows"),
            r.get("spaces"),
            checks.check(
                "import.spread_rows_per_s",
                f"{fmt(r.get('rows'))} rows over {fmt(r.get('spaces'))} spaces",
                r.get("rows_per_s"),
            ),
            r.get("partitions_per_s"),
            r.get("cpu_ms_per_partition"),
            r.get("kernel_ms_per_partition"),
            r.get("new_file_us"),
            r.get("peak_rss_mb"),
            r.get("first_recall_ms"),
            r["outcome"],
        ]
        for r in sorted(rows, key=lambda r: r.get("spaces", 0))
    ]
    return [
        "",
        "However thin the spread: the same rows over more and more new spaces, each created by the import "
        "(create_spaces) and each its own partition. CPU and kernel time are the importing process's, per "
        "partition; *new file µs* is the kernel time to create one empty file beside the import's home, "
        "measured just before it (a thin partition creates two: its lock file and its small file; on an ext4 "
        "without a journal it grows with the inodes deleted there in the last minutes).",
        "",
    ] + table(
        body,
        [
            "rows",
            "spaces",
            "rows/s",
            "partitions/s",
            "CPU ms/partition",
            "kernel ms/partition",
            "new file µs",
            "peak RSS MiB",
            "first recall ms",
            "test",
        ],
    )


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
