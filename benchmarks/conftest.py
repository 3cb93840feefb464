"""Benchmark settings. ``ESFIS_BENCH_MODE=quick`` (the default, small enough for CI, where only
the correctness assertions count) or ``full`` (the report's figures; run ``scripts/bench full``).

The raw JSON of a run (``--benchmark-json``) records what was measured: the commit and the
tree's state at the start of the run and at its end (``git rev-parse HEAD``, ``git status
--porcelain``), the mode, whether the run was a complete one (``scripts/bench`` sets
``ESFIS_BENCH_COMPLETE``; any selection or override makes it partial), and each test's outcome.
"""

from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path

import pytest

from server.settings import torch_defaults

# The product sets these before it loads torch (``load_embedder(before_torch=…)``); the
# benchmarks that build a torch embedder themselves get the same.
torch_defaults()

MODE = os.environ.get("ESFIS_BENCH_MODE", "quick")
FULL = MODE == "full"
REPO = Path(__file__).resolve().parent.parent
RESULTS_PREFIX = "benchmarks/results/"  # the run's own outputs: listed, never counted as dirty
# The servers the benchmarks start keep their rate limits on, so the limiter's catalog counting is
# in every figure, but set so high that a benchmark's clients on one loopback address never meet them.
RATES = {f"ESFIS_RATE_{name}": "100000000/minute" for name in ("TOKEN", "ADDRESS", "RUNS")}
OVERRIDES = (
    "ESFIS_BENCH_ARMS",
    "ESFIS_BENCH_SIZES",
    "ESFIS_BENCH_MODEL_ARMS",
    "ESFIS_BENCH_REINDEX_ROWS",
    "ESFIS_BENCH_FILTER_MEMORIES",
)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.fixture(scope="session")
def bench_mode() -> str:
    return MODE


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def tree_state() -> dict:
    """The commit and ``git status --porcelain``; dirty when anything outside the results changed."""
    head, status = _git("rev-parse", "HEAD"), _git("status", "--porcelain")
    lines = status.splitlines() if status is not None else []
    changed = [line for line in lines if not line[3:].strip('"').startswith(RESULTS_PREFIX)]
    return {
        "commit": head.strip() if head else None,
        "dirty": bool(changed) if status is not None else None,
        "porcelain": lines,
    }


_run: dict = {"outcomes": {}, "seconds": {}}


def pytest_sessionstart(session: pytest.Session) -> None:
    _run["start"] = tree_state()
    _run["began"] = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A failure in any phase sticks; a benchmark measured before a failing assertion still reports it.
    outcomes = _run["outcomes"]
    # Wall time of each test, its setup (the stores it builds) and teardown included: what a
    # full run costs, test by test, for the report's account of the run's length.
    seconds = _run["seconds"]
    seconds[report.nodeid] = round(seconds.get(report.nodeid, 0.0) + report.duration, 2)
    if report.failed:
        outcomes[report.nodeid] = "failed"
    elif report.when == "call" and outcomes.get(report.nodeid) != "failed":
        outcomes[report.nodeid] = report.outcome
    elif report.skipped and report.nodeid not in outcomes:
        outcomes[report.nodeid] = "skipped"


def pytest_benchmark_update_commit_info(config: pytest.Config, commit_info: dict) -> None:
    start, end = _run.get("start") or tree_state(), tree_state()
    commit_info["pytest_benchmark_dirty"] = commit_info.get("dirty")
    commit_info["id"] = start["commit"] or commit_info.get("id")
    commit_info["dirty"] = bool(start["dirty"] or end["dirty"])
    commit_info["porcelain_at_start"] = start["porcelain"]
    commit_info["porcelain_at_end"] = end["porcelain"]
    commit_info["commit_at_end"] = end["commit"]


def pytest_benchmark_update_json(config: pytest.Config, benchmarks: list, output_json: dict) -> None:
    overrides = {name: os.environ[name] for name in OVERRIDES if os.environ.get(name)}
    selected = bool(config.option.keyword or config.option.markexpr)
    complete = os.environ.get("ESFIS_BENCH_COMPLETE") == "1" and not overrides and not selected
    output_json["esfis"] = {
        "mode": MODE,
        "run": "complete" if complete else "partial",
        "overrides": overrides,
        "args": list(config.invocation_params.args),
        "outcomes": dict(_run["outcomes"]),
        "seconds": dict(_run["seconds"]),
        "wall_seconds": round(time.monotonic() - _run["began"], 1) if "began" in _run else None,
        # scripts/bench full times the LongMemEval preparation it runs before pytest.
        "preparation_seconds": float(os.environ["ESFIS_BENCH_PREPARATION_SECONDS"])
        if os.environ.get("ESFIS_BENCH_PREPARATION_SECONDS")
        else None,
    }
