"""What every section shares: the raw file read into a ``Run``, the table formatting, and the
``Checks`` that judge a figure against its target and keep it for the report's summary."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.targets import TARGETS

# benchmarks/results/: the default --out and where gpu.json is read.
RESULTS = Path(__file__).resolve().parents[1] / "results"

# The order arms take in every table and plot: esfis first, then LanceDB, the in-memory arms, the floor.
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
    wall_seconds: float | None = None  # the pytest session's, from start to the raw file
    seconds: dict = field(default_factory=dict)  # test → its wall time, setup and teardown included
    preparation_seconds: float | None = None  # ``python -m benchmarks.longmemeval`` before the tests

    @property
    def mode_text(self) -> str:
        return "mode not recorded" if self.mode == "not recorded" else f"{self.mode} mode"

    @property
    def short(self) -> str:
        return (self.commit or "unknown")[:7]


def load(path: Path) -> Run:
    """One raw pytest-benchmark file, a row per benchmark: its ``extra_info``, p50/p95 from its
    rounds, its module and its test's outcome."""
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
        wall_seconds=meta.get("wall_seconds"),
        seconds=meta.get("seconds", {}),
        preparation_seconds=meta.get("preparation_seconds"),
    )


def fmt(value: object, digits: int = 2) -> str:
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
    missed: dict[str, int] = field(default_factory=dict)  # the targets missed, and in how many cells

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
        if met is False:
            self.missed[key] = self.missed.get(key, 0) + 1
        self.items.append([target.what, cell, value, target.describe(reference), verdict])
        return f"{value} ({target.describe(reference)} {verdict})"

    def unjudged(self, what: str, cell: str, value: str, why: str) -> None:
        self.items.append([what, cell, value, f"not judged: {why}", "–"])


def outcome_line(rows: list[dict]) -> list[str]:
    """The line under each section: its tests' outcomes, failed ones named."""
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


def arm_rank(arm: str) -> int:
    """An arm's place in ``ARM_ORDER``; arms not listed go last."""
    return ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER)
