"""The PNG plots at the report's end: latency against store size, recall against over-fetch,
load against clients (drawn by ``http_load``) and latency against scope size."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from benchmarks.report.common import arm_rank
from benchmarks.report.http_load import plot_load
from benchmarks.report.scope import fixed_scope


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
        for arm, points in sorted(by_arm.items(), key=lambda kv: arm_rank(kv[0])):
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
        for arm, points in sorted(scope_arm.items(), key=lambda kv: arm_rank(kv[0])):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=arm)
        ax.axvline(50_000, color="grey", lw=0.8, ls=":", label="IVF image from here (esfis)")
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("rows in the caller's partition"), ax.set_ylabel("p50 search latency (ms)")
        save(fig, ax, "latency_vs_scope_size.png", f"Latency against scope size ({biggest:,}-memory store)")
    return made
