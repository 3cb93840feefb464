"""Backup, restore and export rates (``server.bulk.backup``, ``server.bulk.export``) on a store of short
texts over 100 spaces (10 in quick mode), built by the import with an embedder that costs
nothing (384-d vectors from a fixed pool, as the model's would be).

Measured on the store at rest: ``backup`` (catalog copy, every partition read, filtered and
written, digests, fsync), ``restore`` of that backup into a new home (digests checked), and
``export`` as JSON Lines with and without vectors, into a sink that only counts bytes (the
file system's own rate is not the export's). Quick mode asserts the counts; full mode gives the
report's figures at 100k and 1M memories. No target is stated for these rates.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from benchmarks.conftest import FULL, peak_rss_mb
from benchmarks.test_import_throughput import PoolEmbedder
from server.bulk.importer import import_stream
from server.facade import export_home, open_service, restore_home
from server.settings import Settings

SIZES = [100_000, 1_000_000] if FULL else [5_000]


class Counting:
    """A binary sink that keeps only the number of bytes written."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, data: bytes) -> int:
        self.bytes += len(data)
        return len(data)

    def flush(self) -> None:
        pass


def _store(home: Path, rows: int, spaces: int):
    service = open_service(Settings(home=home, model=None), embedder=PoolEmbedder())
    for s in range(spaces):
        service.operator.create_space(f"client{s:03d}")
    lines = (
        json.dumps(
            {
                "text": f"note {i} of client {i % spaces}: the build uses cache {i % 97}",
                "space": f"client{i % spaces:03d}",
            }
        )
        for i in range(rows)
    )
    report = import_stream(service._parts, lines, batch_size=8192)
    assert report.imported == rows
    return service


@pytest.mark.parametrize("rows", SIZES)
def test_backup_restore_and_export_rates(benchmark, tmp_path: Path, rows: int):
    spaces = 100 if FULL else 10
    service = _store(tmp_path / "home", rows, spaces)
    try:
        started = time.perf_counter()
        report = benchmark.pedantic(lambda: service.operator.backup(tmp_path / "backup"), rounds=1, iterations=1)
        backup_s = time.perf_counter() - started
    finally:
        service.close()
    size = sum(p.stat().st_size for p in (tmp_path / "backup").rglob("*") if p.is_file())
    started = time.perf_counter()
    restored = restore_home(
        tmp_path / "backup", Settings(home=tmp_path / "restored", model=None), key_file=tmp_path / "home" / "backup.key"
    )
    restore_s = time.perf_counter() - started
    exports = {}
    for vectors in (False, True):
        sink = Counting()
        started = time.perf_counter()
        done = export_home(sink, Settings(home=tmp_path / "home", model=None), vectors=vectors)
        exports[vectors] = (time.perf_counter() - started, sink.bytes, done.memories)
    assert report.memories == restored.memories == rows
    assert exports[False][2] == exports[True][2] == rows
    benchmark.extra_info.update(
        {
            "memories": rows,
            "spaces": spaces,
            "backup_s": round(backup_s, 2),
            "backup_per_s": round(rows / backup_s),
            "backup_mb": round(size / 2**20, 1),
            "restore_s": round(restore_s, 2),
            "restore_per_s": round(rows / restore_s),
            "export_s": round(exports[False][0], 2),
            "export_per_s": round(rows / exports[False][0]),
            "export_mb": round(exports[False][1] / 2**20, 1),
            "export_vectors_s": round(exports[True][0], 2),
            "export_vectors_per_s": round(rows / exports[True][0]),
            "export_vectors_mb": round(exports[True][1] / 2**20, 1),
            "peak_rss_mb": round(peak_rss_mb()),
        }
    )
    print("backup rates:", json.dumps(benchmark.extra_info))  # kept in the run's log as well
