"""The report's own rules, checked without running a benchmark: one run per report, partial
reruns apart, every benchmark file covered, targets judged, one recall definition, and
LanceDB's plan figures read as printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks import report
from benchmarks.arms import _plan_figure, plan_scored
from benchmarks.missed import MISSED_BECAUSE
from benchmarks.report import MODULES
from benchmarks.synthetic import recall_at_k
from benchmarks.targets import TARGETS, Target

BENCH_DIR = Path(__file__).resolve().parent


def test_every_benchmark_file_has_a_report_section():
    uses_benchmark = re.compile(r"def test_\w+\([^)]*\bbenchmark\b")
    files = {p.name for p in BENCH_DIR.glob("test_*.py") if uses_benchmark.search(p.read_text())}
    assert files and files <= set(MODULES), files - set(MODULES)
    assert set(MODULES) <= set(report.SECTIONS) | {"test_http_recall.py"}


def raw_file(path: Path, *, commit: str, dirty: bool, p50_s: float, run: str = "complete") -> Path:
    bench = {
        "name": "test_recall_path_without_embedding",
        "fullname": "benchmarks/test_recall_overhead.py::test_recall_path_without_embedding",
        "extra_info": {"spaces": 2, "memories": 4, "rounds": 3},
        "stats": {"data": [p50_s] * 3, "median": p50_s},
    }
    path.write_text(
        json.dumps(
            {
                "machine_info": {},
                "datetime": "2026-01-01T00:00:00",
                "benchmarks": [bench],
                "commit_info": {
                    "id": commit,
                    "dirty": dirty,
                    "porcelain_at_start": [" M server/x.py"] if dirty else [],
                },
                "esfis": {"mode": "full", "run": run, "outcomes": {bench["fullname"]: "passed"}},
            }
        )
    )
    return path


def test_a_report_is_one_run_and_a_partial_rerun_replaces_no_cell(tmp_path):
    main = raw_file(tmp_path / "main.json", commit="a" * 40, dirty=False, p50_s=0.002)
    rerun = raw_file(tmp_path / "rerun.json", commit="b" * 40, dirty=True, p50_s=0.009, run="partial")
    text = report.build(main, [rerun], tmp_path / "out").read_text()
    head, _, partial = text.partition("## Partial rerun, commit bbbbbbb, not part of the full run")
    assert partial, "the rerun has its own, labelled section"
    assert f"**Commit `{'a' * 40}`**, clean tree" in head and "dirty" not in head.lower()
    assert "2.00 (≤ 2.5 ms ✅)" in head and "9.00" not in head  # the main run's cell, untouched
    assert "9.00 (≤ 2.5 ms ❌)" in partial
    for title in MODULES.values():
        assert title in head  # every benchmark file appears, measured or "Not in this run."


def test_a_dirty_run_says_so_first(tmp_path):
    raw = raw_file(tmp_path / "dirty.json", commit="c" * 40, dirty=True, p50_s=0.001)
    text = report.build(raw, [], tmp_path / "out").read_text()
    assert "Measured from a dirty tree" in text.split("## Targets")[0]
    assert "M server/x.py" in text


def test_every_missed_target_says_what_it_is_for_and_why_it_missed(tmp_path, monkeypatch):
    monkeypatch.setitem(MISSED_BECAUSE, "overhead.p50_ms", "measured: the catalog read")
    text = report.build(
        raw_file(tmp_path / "slow.json", commit="d" * 40, dirty=False, p50_s=0.009), [], tmp_path / "o"
    ).read_text()
    missed = text.split("### The targets missed, and why")[1].split("\n## ")[0]
    assert "**recall path without embedding, p50**" in missed and "missed in 1 cell." in missed
    assert TARGETS["overhead.p50_ms"].why in missed and "measured: the catalog read" in missed
    assert "not stated" not in missed
    met = report.build(raw_file(tmp_path / "fast.json", commit="e" * 40, dirty=False, p50_s=0.001), [], tmp_path / "p")
    assert "The targets missed" not in met.read_text()


def test_every_target_states_what_it_is_for():
    assert [key for key, target in TARGETS.items() if not target.why] == []


def test_targets_judge_absolute_and_relative_bounds():
    assert TARGETS["cli.other_s"].met(0.3) and not TARGETS["cli.other_s"].met(0.31)
    relative = TARGETS["scope.index_vs_floor"]
    assert relative.met(1.5, reference=1.0) and not relative.met(1.51, reference=1.0)
    assert relative.met(1.0) is None  # no floor in the run: no verdict
    assert Target("x", "==", 0).met(0) and not Target("x", "==", 0).met(1)


def test_the_ratio_targets_are_judged_on_the_paired_pass_when_the_run_has_one():
    from benchmarks.report.common import Checks
    from benchmarks.report.scope import section_scope

    def cell(arm: str, p50: float, **extra) -> dict:
        return {"store_size": 100, "scope": "1p", "arm": arm, "bench_p50_ms": p50, "outcome": "passed", **extra}

    # Apart, the index search misses its bound (2.0 against 1.5 × 1.0); timed in turns beside
    # the floor it meets it (1.2 against 1.5 × 1.0), and the prefilter's ratio the other way.
    paired = {"floor": 1.0, "scope-first-index": 1.2, "scope-first": 3.0, "prefilter": 10.0}
    rows = [
        cell("scope-first-index", 2.0),
        cell("scope-first", 1.0),
        cell("prefilter", 10.0),
        cell("floor", 1.0, paired_p50_ms=paired),
    ]
    checks = Checks("full")
    text = "\n".join(section_scope(rows, checks))
    assert checks.missed == {"scope.vs_prefilter": 1}
    assert "2.00; paired 1.20" in text and "*paired* pass" in text
    # A run without the paired pass is judged on each arm's own pass, as before it.
    del rows[-1]["paired_p50_ms"]
    checks = Checks("full")
    text = "\n".join(section_scope(rows, checks))
    assert checks.missed == {"scope.index_vs_floor": 1}
    assert "paired" not in text


def test_recall_is_tie_aware_counts_a_row_once_and_never_outside_the_scope():
    vectors = np.eye(4, dtype=np.float32)[[0, 0, 1, 2]]  # rows 0 and 1 are the same vector
    query = np.array([1, 0.5, 0.1, 0], dtype=np.float32)
    allowed = np.array([True, True, True, False])
    truth = np.array([0, 1])
    assert recall_at_k(vectors, query, [1, 0], truth, allowed) == 1.0
    assert recall_at_k(vectors, query, [0, 0], truth, allowed) == 0.5  # once
    assert recall_at_k(vectors, query, [1], np.array([0]), allowed) == 1.0  # an equal copy is as right
    assert recall_at_k(vectors, query, [3, 2], np.array([0, 2]), allowed) == 0.5  # row 3 is out of scope


@pytest.mark.parametrize("text, value, err", [("400", 400, 0), ("60.00 K", 60_000, 5), ("1.00 M", 1e6, 5_000)])
def test_lancedb_plan_figures_are_read_with_their_precision(text, value, err):
    assert _plan_figure(text) == (value, err)


def test_lancedb_plan_nodes_are_summed_per_kind():
    plan = (
        "SortExec: metrics=[output_rows=40]\n"
        "  KNNVectorDistance: elapsed=1ms, metric=cosine, metrics=[output_rows=400, elapsed_compute=30.56µs]\n"
        "    ANNSubIndex: name=vector_idx, k=400, metrics=[output_rows=400, index_comparisons=6.10 K, iops=26]\n"
    )
    assert plan_scored(plan) == {"KNNVectorDistance": (400, 0), "ANNSubIndex": (6100, 5)}


def test_a_report_says_how_long_its_run_took_and_where_the_time_went(tmp_path):
    raw = raw_file(tmp_path / "timed.json", commit="d" * 40, dirty=False, p50_s=0.001)
    data = json.loads(raw.read_text())
    data["esfis"]["wall_seconds"] = 4200.0
    data["esfis"]["seconds"] = {"benchmarks/test_a.py::x": 3000.0, "benchmarks/test_b.py::y": 600.0}
    raw.write_text(json.dumps(data))
    head = report.build(raw, [], tmp_path / "out").read_text().split("## Targets")[0]
    assert "Length of the run: 70.0 min for the benchmarks (❌ target ≤ 60 min" in head
    assert "`test_a.py` 50.0 min, `test_b.py` 10.0 min" in head
    data["esfis"]["preparation_seconds"] = 900.0
    data["esfis"]["wall_seconds"] = 2700.0
    raw.write_text(json.dumps(data))
    head = report.build(raw, [], tmp_path / "out").read_text().split("## Targets")[0]
    assert "Length of the run: 60.0 min (✅ target ≤ 60 min on 2 cores): 15.0 min of LongMemEval preparation" in head
    assert "(embedding its texts on this machine), then 45.0 min for the benchmarks" in head
