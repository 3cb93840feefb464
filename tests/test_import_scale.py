"""Bulk import keeps its memory bounded: 200,000 rows with precomputed vectors, imported in a
process of their own, stay under the stated peak RSS, and the second half of the import grows
the process by no more than a little over the first half (a leak, or a batch that kept growing,
would double it). ``scripts/import-scale`` is the same measurement at 1M rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS = 200_000
PEAK_RSS_BOUND_MIB = 768  # the bound the importer's docstring and README state
LATE_GROWTH_MIB = 128


def test_a_200k_row_import_stays_under_the_memory_bound(tmp_path: Path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "import-scale"), "--rows", str(ROWS), "--mode", "vectors",
         "--every", "20000", "--home", str(tmp_path / "home")],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    figures = json.loads(run.stdout)
    assert (figures["imported"], figures["failed"]) == (ROWS, 0)
    assert figures["peak_rss_mib"] < PEAK_RSS_BOUND_MIB, figures
    samples = [rss for _, rss in figures["rss_samples_mib"]]
    first, second = samples[: len(samples) // 2], samples[len(samples) // 2 :]
    assert max(second) - max(first) < LATE_GROWTH_MIB, figures
