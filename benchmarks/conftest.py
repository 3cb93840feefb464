"""Benchmark settings. ``ESFIS_BENCH_MODE=quick`` (the default, small enough for CI, where only
the correctness assertions count) or ``full`` (the report's figures; run ``scripts/bench full``)."""

from __future__ import annotations

import os
import resource

import pytest

MODE = os.environ.get("ESFIS_BENCH_MODE", "quick")
FULL = MODE == "full"


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.fixture(scope="session")
def bench_mode() -> str:
    return MODE
