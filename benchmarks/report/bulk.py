"""The sections on whole-store moves: bulk import (``test_import_throughput.py``), a thin spread
over HTTP and on PostgreSQL + S3 (``test_import_paths.py``), and backup, restore and export
rates (``test_backup_rates.py``)."""

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
            r.get("rss_growth_sampled_mb"),
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
        "without a journal it grows with the inodes deleted there in the last minutes). *Peak RSS* is the "
        "benchmark process's whole peak (an earlier, larger import sets it); *RSS growth* is the largest "
        "resident size sampled during the import less the size before it (– in runs before it was sampled).",
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
            "RSS growth MiB",
            "first recall ms",
            "test",
        ],
    )


def section_import_paths(rows: list[dict], checks: Checks) -> list[str]:
    out: list[str] = []
    for r in rows:
        if r.get("http_share") is not None:
            cell = f"{fmt(r.get('rows'))} rows over {fmt(r.get('spaces'))} spaces"
            local, http = r.get("in_process_rows_per_s") or [], r.get("http_rows_per_s") or []
            out += [
                "The same rows (each with its vector, so no model runs), alternately through the operator's "
                "import in process (what `esfis import` runs, its process start left out) and `POST /v1/import` "
                "on `esfis serve` (one worker), timed from the request to the answer; each attempt into a new home.",
                "",
            ] + table(
                [
                    [
                        cell,
                        ", ".join(fmt(v) for v in local),
                        ", ".join(fmt(v) for v in http),
                        checks.check("import.http_share", cell, r.get("http_share")),
                        r["outcome"],
                    ]
                ],
                ["rows", "in process rows/s", "HTTP rows/s", "HTTP's share of the in-process rate", "test"],
            )
        for spread in r.get("spreads") or []:
            cell = f"{fmt(spread['rows'])} rows over {fmt(spread['spaces'])} spaces, partitions {spread['partitions']}"
            checks.unjudged(
                "thin spread, PostgreSQL catalog", cell, fmt(spread["rows_per_s"]), "published (issue 35), no target"
            )
        if r.get("with_model"):
            body = []
            for m in r["with_model"]:
                cell = f"{fmt(m['rows'])} rows over {fmt(m['spaces'])} spaces"
                body.append(
                    [
                        m["rows"],
                        m["spaces"],
                        m["embedder_rows_per_s"],
                        m["import_rows_per_s"],
                        checks.check("import.model_share", cell, m["share"]),
                        r["outcome"],
                    ]
                )
            out += [
                f"Rows without vectors, embedded on the CPU by the default model ({r.get('model')}): the "
                "model's own rate on the same texts (in the import's batches), then the import's, one spread "
                "after the other, each into a new home.",
                "",
            ] + table(
                body, ["rows", "spaces", "model rows/s", "import rows/s", "import's share of the model's rate", "test"]
            )
        if r.get("spreads"):
            out += [
                "A PostgreSQL catalog (a cluster on this machine), the partitions on local disk or on S3 "
                "(moto's server on this machine; every S3 partition is a table, no small files there).",
                "",
            ] + table(
                [
                    [s["partitions"], s["rows"], s["spaces"], s["rows_per_s"], s["partitions_per_s"], r["outcome"]]
                    for s in r["spreads"]
                ],
                ["partitions", "rows", "spaces", "rows/s", "partitions/s", "test"],
            )
    return out


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
