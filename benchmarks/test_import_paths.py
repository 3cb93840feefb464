"""A thin spread's import by the other doors and stores (issue 35): ``POST /v1/import`` on a real
``esfis serve`` against the same rows imported in process; a PostgreSQL catalog with the
partitions on local disk and on S3 (moto's server on this machine); and rows without vectors,
embedded on the CPU by the default model, against that model's own rate on the same texts.

Outside the last, rows carry their vectors, so no model runs. Each arm imports into a home of its
own, never deleted during the run (on an ext4 without a journal a deletion slows the next file
creations nearby: docs/benchmarks.md), and the HTTP arms alternate with the in-process ones so
the machine's drift falls on both.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np

from benchmarks.conftest import FULL, RATES
from benchmarks.test_import_throughput import PoolEmbedder, spread_lines
from indexing.embedding.embedder import load_embedder
from server.bulk.importer import DEFAULT_BATCH, import_stream
from server.facade import open_service
from server.settings import Settings
from tests import objectstore
from tests.catalogs import Cluster
from tests.http.conftest import start_server, stop_server

HTTP_SPREAD = (100_000, 20_000) if FULL else (5_000, 1_000)  # rows, spaces
ATTEMPTS = 2
S3_SPREADS = [(10_000, 100), (10_000, 2_000)] if FULL else [(1_000, 50)]
# The spread benchmark's rows per space (500, 25 and 5: 1,000, 20,000 and 100,000 spaces of
# 500,000 rows) at the size a CPU embeds in seconds.
MODEL_SPREADS = [(5_000, 10), (5_000, 200), (5_000, 1_000)] if FULL else [(500, 1), (500, 100)]


def vector_lines(rows: int, spaces: int) -> bytes:
    """JSON Lines of the spread benchmark's shape, each row with its vector (384 floats)."""
    pool = [json.dumps(v) for v in np.round(PoolEmbedder().pool[:1000], 5).tolist()]
    return "".join(
        f'{{"text": "tenant {i % spaces} note {i}", "space": "tenant-{i % spaces:06d}", "key": "k{i}", '
        f'"vector": {pool[i % 1000]}}}\n'
        for i in range(rows)
    ).encode()


def in_process(home: Path, data: Path, rows: int) -> float:
    """Seconds for the operator's ``import_jsonl`` (what ``esfis import`` runs) to take the file."""
    service = open_service(Settings(home=home, model=None), embedder=PoolEmbedder())
    try:
        with open(data, "rb") as stream:
            started = time.perf_counter()
            report = service.operator.import_jsonl(stream, create_spaces=True)
            seconds = time.perf_counter() - started
    finally:
        service.close()
    assert (report.imported, report.failed) == (rows, 0)
    return seconds


def over_http(home: Path, work: Path, data: Path, rows: int) -> float:
    """Seconds from the request to the answer of ``POST /v1/import?create_spaces=true``, the
    file streamed in 1 MiB chunks, to a server of one worker on its defaults."""
    server = start_server(home, work, **RATES)
    try:
        token = server.token("--operator").split()[-1]

        def body() -> Iterator[bytes]:
            with open(data, "rb") as f:
                while chunk := f.read(1 << 20):
                    yield chunk

        started = time.perf_counter()
        answer = httpx.post(
            f"{server.url}/v1/import",
            params={"create_spaces": "true"},
            content=body(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"},
            timeout=3600,
        )
        seconds = time.perf_counter() - started
    finally:
        stop_server(server)
    assert answer.status_code == 200 and answer.json()["imported"] == rows, answer.text[:500]
    return seconds


def test_http_import_keeps_the_in_process_rate(benchmark, tmp_path: Path):
    """The same rows, alternately in process and over HTTP: HTTP within 20 % (issue 35)."""
    rows, spaces = HTTP_SPREAD
    data = tmp_path / "rows.jsonl"
    data.write_bytes(vector_lines(rows, spaces))
    local, http = [], []
    for attempt in range(ATTEMPTS):
        local.append(rows / in_process(tmp_path / f"local-{attempt}", data, rows))
        http.append(rows / over_http(tmp_path / f"http-{attempt}", tmp_path, data, rows))
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)  # the figures are the arms'
    benchmark.extra_info.update(
        {
            "rows": rows,
            "spaces": spaces,
            "in_process_rows_per_s": [round(r) for r in local],
            "http_rows_per_s": [round(r) for r in http],
            "http_share": round(sum(http) / sum(local), 3),
        }
    )


def test_thin_spread_on_postgresql_local_and_s3(benchmark, tmp_path: Path, monkeypatch):
    """A PostgreSQL catalog, the partitions on local disk or on S3: rows/s and partitions/s
    (published, not judged: S3's figure is moto's round trips on this machine)."""
    cluster = Cluster().start()
    s3 = objectstore.server()
    results = []
    try:
        for name, value in s3.env.items():
            monkeypatch.setenv(name, value)
        for rows, spaces in S3_SPREADS:
            for where in ("local", "s3"):
                vectors = f"s3://{s3.bucket()}/spread-{rows}-{spaces}" if where == "s3" else None
                home = tmp_path / f"{where}-{rows}-{spaces}"
                settings = Settings(home=home, model=None, catalog=cluster.new_catalog(), vectors=vectors)
                service = open_service(settings, embedder=PoolEmbedder())
                try:
                    started = time.perf_counter()
                    report = import_stream(service._parts, spread_lines(rows, spaces), create_spaces=True)
                    seconds = time.perf_counter() - started
                finally:
                    service.close()
                assert (report.imported, report.failed, len(report.created_spaces)) == (rows, 0, spaces)
                results.append(
                    {
                        "partitions": where,
                        "rows": rows,
                        "spaces": spaces,
                        "rows_per_s": round(rows / seconds),
                        "partitions_per_s": round(spaces / seconds, 1),
                    }
                )
    finally:
        cluster.stop()
        objectstore.stop()
        for name in s3.env:
            os.environ.pop(name, None)
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    benchmark.extra_info.update({"spreads": results})


def test_import_with_the_model_keeps_the_embedders_rate(benchmark, tmp_path: Path):
    """Rows without vectors, embedded on the CPU by the default model: for each spread, the
    model's own rate on the same texts (``embed_documents`` in the import's batches), then the
    import's. Within 10 % (issue 35)."""
    embedder = load_embedder(None)
    embedder.embed_documents(["warm up the model's sessions"] * 64)
    results = []
    for rows, spaces in MODEL_SPREADS:
        lines = spread_lines(rows, spaces)
        texts = [json.loads(line)["text"] for line in lines]
        started = time.perf_counter()
        for first in range(0, rows, DEFAULT_BATCH):
            embedder.embed_documents(texts[first : first + DEFAULT_BATCH])
        own = rows / (time.perf_counter() - started)
        service = open_service(Settings(home=tmp_path / f"model-{spaces}", model=None), embedder=embedder)
        try:
            started = time.perf_counter()
            report = import_stream(service._parts, lines, create_spaces=True)
            imported = rows / (time.perf_counter() - started)
        finally:
            service.close()
        assert (report.imported, report.failed) == (rows, 0)
        results.append(
            {
                "rows": rows,
                "spaces": spaces,
                "embedder_rows_per_s": round(own),
                "import_rows_per_s": round(imported),
                "share": round(imported / own, 3),
            }
        )
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    benchmark.extra_info.update({"model": embedder.name, "with_model": results})
