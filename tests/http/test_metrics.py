"""``/metrics`` and ``/healthz`` of a real ``esfis serve --workers 2``: scraped after a load, the
counts of both workers add up and match the access log; the recall stages, the import's rows,
the refusals by code and the calls waiting for a person are there; and no memory text, token or
space name is."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server.http.workers import metrics_folder_of
from tests.http.conftest import Server, start_server, stop_server

ROOT = Path(__file__).resolve().parents[2]

SECRET_TEXT = "Acme's signing key lives in the hardware module on rack 7"


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("metrics")
    server = start_server(root / "esfis-home", root / "work", workers=2)
    try:
        for name in ("acme-metrics-space", "globex-metrics-space"):
            server.cli("space", "add", str(server.folder(name)))
        server.tokens["operator"] = server.token("--operator")
        yield server
    finally:
        stop_server(server)


def _value(body: str, name: str, **labels: str) -> float:
    for line in body.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split(" ")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_scrape_after_a_load_adds_up_both_workers_and_holds_no_secret(two):
    token = two.agent_token()
    recalls, writes = 0, 0
    for i in range(12):  # new connections: the shared socket hands them to both workers
        with httpx.Client(base_url=two.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            if i % 3 == 0:
                text = SECRET_TEXT if i == 0 else f"note {i} of the metrics load"
                assert (
                    client.post("/v1/memories", json={"text": text, "space": "acme-metrics-space"}).status_code == 201
                )
                writes += 1
            else:
                assert (
                    client.post("/v1/recall", json={"query": "signing key", "space": "acme-metrics-space"}).status_code
                    == 200
                )
                recalls += 1
    crossing = httpx.post(
        f"{two.url}/v1/memories",
        json={"text": "the signing key is on rack 7", "space": "globex-metrics-space"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert crossing.status_code == 403 and "data_barrier" in crossing.text
    held = httpx.post(
        f"{two.url}/v1/memories",
        json={"text": "signing key: rack 7", "personal": True},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert held.status_code == 202
    rows = "\n".join(json.dumps({"text": f"imported row {n}", "space": "acme-metrics-space"}) for n in range(5))
    imported = httpx.post(
        f"{two.url}/v1/import",
        content=rows.encode(),
        headers={"Authorization": f"Bearer {two.tokens['operator']}", "Content-Type": "application/x-ndjson"},
        timeout=60,
    )
    assert imported.status_code == 200, imported.text

    assert httpx.get(f"{two.url}/metrics").status_code == 401
    assert httpx.get(f"{two.url}/metrics", headers={"Authorization": f"Bearer {token}"}).status_code == 403
    scraped = httpx.get(f"{two.url}/metrics", headers={"Authorization": f"Bearer {two.tokens['operator']}"})
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    body = scraped.text

    log = two.log.read_text()
    logged_recalls = len(re.findall(r"POST /v1/recall 200 ", log))
    assert logged_recalls == recalls
    assert _value(body, "esfis_http_requests_total", method="POST", route="/v1/recall", status="200") == recalls
    assert _value(body, "esfis_http_requests_total", method="POST", route="/v1/memories", status="201") == writes
    assert _value(body, "esfis_http_requests_total", method="POST", route="/v1/memories", status="403") == 1
    assert _value(body, "esfis_http_request_duration_seconds_count", method="POST", route="/v1/recall") == recalls
    for stage in (
        "reach",
        "embedding",
        "permissions",
        "filter",
        "relevance",
        "validity",
        "fold",
        "deliver",
        "encoding",
    ):
        assert _value(body, "esfis_recall_stage_seconds_count", stage=stage) >= recalls
    assert _value(body, "esfis_import_rows_total", outcome="imported") == 5
    assert _value(body, "esfis_refusals_total", code="data_barrier") == 1
    assert _value(body, "esfis_approvals_waiting") == 1
    # Both workers counted (a file each), and the scrape summed them.
    port = two.url.rsplit(":", 1)[1]
    assert len(list(metrics_folder_of(two.home, int(port)).glob("counter_*.db"))) == 2
    for secret in (
        SECRET_TEXT,
        "signing key",
        token,
        two.tokens["operator"],
        "acme-metrics-space",
        "globex-metrics-space",
    ):
        assert secret not in body


def test_healthz_reports_the_whole_server(two):
    health = httpx.get(f"{two.url}/healthz").json()
    assert health == {"status": "ok", "model": "ready", "workers": 2, "disk": "ok", "catalog": "ok"}


_FIRST_COUNTS = """
import sys, threading
from server import metrics

start, errors = threading.Barrier(32), []

def count():
    start.wait()
    try:
        metrics.count_request("POST", "/v1/recall", 200, 0.01)
        metrics.time_stage("search", 0.001)
        metrics.count_refusal("disk_full")
    except Exception as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=count) for _ in range(32)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(errors), errors[:1])
sys.exit(1 if errors else 0)
"""


def test_the_first_counts_from_many_threads_at_once_make_the_metrics_once(tmp_path):
    """A worker that has just started takes its first requests on many threads: the metrics are
    made once, never twice (``DuplicateTimeseries`` answered 500s after a restart)."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(3):  # a fresh process each time: the race is in the first counts
        done = subprocess.run([sys.executable, "-c", _FIRST_COUNTS], env=env, capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stdout + done.stderr
