"""The section "HTTP load, concurrent clients" (``test_http_load.py``) and its plot,
``load_vs_clients.png``, each beside the figures from before issue 23."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from benchmarks.report.common import Checks, fmt, table

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
            [
                "server CPU ms per recall / per remember, each alone",
                " / ".join(
                    checks.check(f"load.{kind}_cpu_ms", f"{kind}, {catalog}", r.get(f"server_cpu_ms_per_{kind}"))
                    if r.get(f"server_cpu_ms_per_{kind}") is not None
                    else "–"
                    for kind in ("recall", "remember")
                ),
            ],
            [
                "server CPU per recall against one query embedding's CPU alone",
                checks.check(
                    "load.recall_cpu_vs_embedding",
                    f"recall, {catalog}",
                    r["server_cpu_ms_per_recall"],
                    r["embedding_cpu_ms"],
                )
                if r.get("embedding_cpu_ms") and r.get("server_cpu_ms_per_recall")
                else "–",
            ],
            ["most clients served at p95 ≤ 50 ms", fmt(r.get("most_clients_p95_le_50ms"))],
            ["test", r["outcome"]],
        ]
        if curve:
            body[10:10] = [
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
                10,
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
        stages = r.get("recall_stages")
        if stages:
            out += [
                f"Where the recalls' time went in the server under {r.get('clients')} clients, recalls only "
                f"({catalog}): wall milliseconds per recall by stage (waits for the cores and the interpreter "
                "lock included), from the server's own /metrics.",
                "",
            ]
            out += table(
                [[stage, fmt(f["ms"]), f"{f['share']:.0%}"] for stage, f in stages.items()],
                ["stage", "ms per recall", "share"],
            )
    return out


def plot_load(rows: list[dict], out_dir: Path, save: Callable[..., None]) -> None:
    """Throughput and latency against clients, one line per catalog, the figures before beside;
    ``save`` is ``plots``' own (title, legend, grid, file)."""
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


def section_hostile(rows: list[dict], checks: Checks) -> list[str]:
    """``test_hostile_neighbour.py``: a good token's paced recalls, quiet and beside a hostile
    token at its limits, and the operator's requests from a third address."""
    body = []
    for r in rows:
        cell = f"{fmt(r.get('store_memories'))} memories, {r.get('workers')} workers"
        body += [
            ["quiet p50 / p95 ms", f"{fmt(r.get('quiet_p50_ms'))} / {fmt(r.get('quiet_p95_ms'))}"],
            [
                "beside-hostile p50 ms",
                checks.check("hostile.p50_ms", cell, r.get("beside_p50_ms"), r.get("quiet_p50_ms")),
            ],
            [
                "beside-hostile p95 ms",
                checks.check("hostile.p95_ms", cell, r.get("beside_p95_ms"), r.get("quiet_p95_ms")),
            ],
            [
                "beside: p95 ms of the recalls sent while the hostile token spent its allowance / once it was refused",
                f"{fmt(r.get('beside_while_spending_p95_ms'))} ({fmt(r.get('beside_while_spending'))} recalls, "
                f"{fmt(r.get('hostile_spending_s'))} s) / {fmt(r.get('beside_at_limits_p95_ms'))} "
                f"({fmt(r.get('beside_at_limits'))} recalls)",
            ],
            [
                "hostile requests (429 of them)",
                f"{fmt(r.get('hostile_requests'))} ({fmt(r.get('hostile_429'))})",
            ],
            [
                "operator requests, 429s",
                f"{fmt(r.get('operator_requests'))}, "
                + checks.check("hostile.operator_429", cell, r.get("operator_429")),
            ],
            ["test", r["outcome"]],
        ]
    intro = (
        "One server of two workers, rate limits as shipped; a good agent's recalls one every "
        f"{fmt(rows[0].get('pace_s'))} s, quiet (before and after) and beside a token that opens streams, mints "
        "runs, has a call held and sends malformed bodies as fast as its limits allow, from an address of its own."
    )
    return [intro, ""] + table(body, ["figure", "measured (target)"])
