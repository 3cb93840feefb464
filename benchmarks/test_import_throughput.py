"""Bulk import's own cost: everything but the model (parse, checks, duplicate queries, the
LanceDB and catalog writes), with an embedder that costs nothing.

On a GPU the model encodes 86k–266k texts/s (report, GPU section), so this path is what bounds
a GPU import (target ≥ 50k memories/s). Rows are short texts with keys, as an export from a
notes app would give; the embedder hands back vectors from a fixed pool. Quick mode asserts
what an import must get right (every row imported, a re-run adds nothing); full mode gives the
report's figures at 200k and 1M rows.
"""

from __future__ import annotations

import json
import resource
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks.conftest import FULL, rss_mb
from indexing.identity import NO_PROMPTS
from server.bulk.importer import import_stream
from server.facade import open_service
from server.settings import Settings

SIZES = [200_000, 1_000_000] if FULL else [20_000]
# Both batch sizes at the smaller size; the largest at 1M only (the two were within 3 % of each
# other at 1M in 1f94617's full run, and each 1M import is over two minutes of the run).
WRITE_CASES = [(rows, batch) for rows in SIZES for batch in (2048, 4096) if rows < 1_000_000 or batch == 4096]
WORDS = [
    "acme",
    "auth",
    "login",
    "deploy",
    "billing",
    "invoice",
    "cache",
    "queue",
    "retry",
    "token",
    "client",
    "server",
    "build",
    "test",
]


class PoolEmbedder:
    """Vectors from a fixed pool: an embedder whose cost is nil, so the import's own shows."""

    name = "pool"
    dimension = 384
    prompts = NO_PROMPTS

    def __init__(self) -> None:
        pool = np.random.default_rng(0).standard_normal((8192, self.dimension)).astype(np.float32)
        self.pool = pool / np.linalg.norm(pool, axis=1, keepdims=True)

    def load(self) -> None:
        pass

    def embed_documents(self, texts) -> np.ndarray:
        return self.pool[np.arange(len(texts)) % len(self.pool)]

    def embed_query(self, text: str) -> np.ndarray:
        return self.pool[0]


def lines(rows: int) -> list[str]:
    picks = np.random.default_rng(1).integers(0, len(WORDS), size=(1000, 10))
    phrases = [" ".join(WORDS[k] for k in p) for p in picks]
    return [json.dumps({"text": f"note {i}: {phrases[i % 1000]}", "key": f"k{i}"}) for i in range(rows)]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def kernel_seconds() -> float:
    """The process's CPU time in the kernel: file creation shows here (on an ext4 without a
    journal, each new inode is checked against the recently deleted ones, so a store created
    soon after another was removed pays for it)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


@pytest.mark.parametrize(
    ("batch_size", "rows"), [(b, r) for r, b in WRITE_CASES], ids=[f"{b}-{r}" for r, b in WRITE_CASES]
)
def test_import_write_path(benchmark, tmp_path: Path, rows: int, batch_size: int):
    import lancedb  # noqa: F401  (its import, ~2 s here, is no part of the rate)

    data = lines(rows)
    service = open_service(Settings(home=tmp_path / "home", model=None), embedder=PoolEmbedder())
    settle, building = service._parts.store.settle, []

    def timed_settle(key: str, **known) -> None:  # the real build, timed: the import's end builds large images
        began = time.perf_counter()
        settle(key, **known)
        building.append(time.perf_counter() - began)

    service._parts.store.settle = timed_settle  # type: ignore[method-assign]
    try:
        cpu, started = cpu_seconds(), time.perf_counter()
        report = benchmark.pedantic(
            lambda: import_stream(service._parts, data, batch_size=batch_size), rounds=1, iterations=1
        )
        seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        again = import_stream(service._parts, data[: min(rows, 20_000)], batch_size=batch_size)
    finally:
        service.close()
    benchmark.extra_info.update(
        {
            "rows": rows,
            "batch_size": batch_size,
            "rows_per_s": round(rows / seconds),
            "index_build_s": round(sum(building), 2),
            "rows_per_s_before_build": round(rows / (seconds - sum(building))),
            "cpu_us_per_row": round(cpu / rows * 1e6, 1),
            "target_rows_per_s": 50_000,
        }
    )
    assert (report.imported, report.skipped, report.failed) == (rows, 0, 0)
    assert (again.imported, again.skipped) == (0, min(rows, 20_000))


# The spread: as many rows, over more and more spaces (a product's tenants, a handful of memories
# each). Full mode: 500k rows over 1,000, 20,000 and 100,000 spaces; quick mode a small spread.
SPREADS = [(500_000, 1_000), (500_000, 20_000), (500_000, 100_000)] if FULL else [(4_000, 400)]


def spread_lines(rows: int, spaces: int) -> list[str]:
    return [
        json.dumps({"text": f"tenant {i % spaces} note {i}", "space": f"tenant-{i % spaces:06d}", "key": f"k{i}"})
        for i in range(rows)
    ]


def new_file_us(folder: Path, files: int = 2_000) -> float:
    """Kernel microseconds to create an empty file in ``folder`` (made here, kept: a deletion
    would itself slow the creations after it). What a thin import pays per partition twice (its
    lock file and its small file) varies with the machine's disk: on an ext4 without a journal
    each new inode is checked against the recently deleted ones, so a folder near a recent
    deletion creates files many times slower. Reported beside the spread's rows/s."""
    import os

    folder.mkdir(parents=True)
    before = kernel_seconds()
    for i in range(files):
        os.close(os.open(folder / f"probe-{i}", os.O_WRONLY | os.O_CREAT, 0o600))
    return round((kernel_seconds() - before) / files * 1e6, 1)


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class RssSampler(threading.Thread):
    """The largest resident size seen while it runs, sampled every ``every`` seconds (the peak
    above is the whole session's: an earlier, larger import would hide any growth of this one)."""

    def __init__(self, every: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.every, self.largest, self.done = every, rss_mb(), threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.largest = max(self.largest, rss_mb())

    def stop(self) -> float:
        self.done.set()
        self.join()
        return max(self.largest, rss_mb())


@pytest.mark.parametrize(("rows", "spaces"), SPREADS, ids=[f"{r}-over-{s}" for r, s in SPREADS])
def test_import_however_thin_the_spread(benchmark, tmp_path: Path, rows: int, spaces: int):
    """Rows spread over new spaces, created by the import (``create_spaces``), each space its own
    partition: rows/s and partitions/s, the process's peak RSS, and the first recall after."""
    import lancedb  # noqa: F401  (its import is no part of the rate)

    data = spread_lines(rows, spaces)
    new_file = new_file_us(tmp_path / "probe")  # beside the home: the same disk, likely the same inode group
    service = open_service(Settings(home=tmp_path / "home", model=None), embedder=PoolEmbedder())
    try:
        rss_before, sampler = rss_mb(), RssSampler()
        sampler.start()
        try:
            cpu, kernel, started = cpu_seconds(), kernel_seconds(), time.perf_counter()
            report = benchmark.pedantic(
                lambda: import_stream(service._parts, data, create_spaces=True), rounds=1, iterations=1
            )
            seconds = time.perf_counter() - started
        finally:
            rss_during = sampler.stop()
        cpu, kernel = cpu_seconds() - cpu, kernel_seconds() - kernel
        caller = service.caller("bench", space=f"tenant-{spaces // 2:06d}")
        began = time.perf_counter()
        found = service.recall(caller, "tenant note", query_vector=PoolEmbedder().pool[1])
        first_recall_ms = (time.perf_counter() - began) * 1000
    finally:
        service.close()
    benchmark.extra_info.update(
        {
            "rows": rows,
            "spaces": spaces,
            "rows_per_s": round(rows / seconds),
            "partitions_per_s": round(spaces / seconds),
            "cpu_ms_per_partition": round(cpu / spaces * 1000, 2),
            "kernel_ms_per_partition": round(kernel / spaces * 1000, 2),
            "peak_rss_mb": peak_rss_mb(),
            "rss_growth_sampled_mb": round(rss_during - rss_before, 1),  # the largest size during it, less before
            "first_recall_ms": round(first_recall_ms, 1),
            "new_file_us": new_file,
            "target_rows_per_s": 20_000,
        }
    )
    assert (report.imported, report.failed, len(report.created_spaces)) == (rows, 0, spaces)
    assert found.memories and all(m.space == f"tenant-{spaces // 2:06d}" for m in found.memories)
