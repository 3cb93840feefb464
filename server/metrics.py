"""What ``esfis serve`` counts for ``/metrics`` (``server.http.metrics``): Prometheus metrics,
kept by ``prometheus_client`` in its multiprocess mode, so the workers of one server add up.

Only a server counts: ``esfis serve`` names a folder for the workers' files
(``PROMETHEUS_MULTIPROC_DIR``: in memory, ``server.http.workers.metrics_folder_of``) before any worker starts, and the
library is imported at the first count, in a process that has it. Anywhere else (the CLI,
``esfis mcp``, the tests' services) every call here does nothing.

What the labels hold, and what they never hold: route templates (``/v1/memories/{id}``, never a
path), methods, statuses, error codes, recall stages, upkeep tasks. No memory text, query, id,
token, address or space name is ever a label, so a scrape shows how the server is used, not by
whom nor on what.
"""

from __future__ import annotations

import os
import threading
from typing import Any

DIR = "PROMETHEUS_MULTIPROC_DIR"
# A recall's stages, as server/facade/recall.py runs them and docs/recall.md names them ("encoding":
# the HTTP answer's JSON).
STAGES = ("reach", "embedding", "permissions", "filter", "relevance", "validity", "fold", "deliver", "encoding")

_made: dict[str, Any] | None = None
_off = False
_making = threading.Lock()


def _metrics() -> dict[str, Any] | None:
    if _made is not None or _off:
        return _made
    with _making:  # made once: two threads making them at once registered each twice (a 500)
        return _make()


def _make() -> dict[str, Any] | None:
    global _made, _off
    if _made is not None or _off:
        return _made
    if not os.environ.get(DIR):
        _off = True
        return None
    from prometheus_client import Counter, Gauge, Histogram  # multiprocess: the library reads DIR on import

    _made = {
        "requests": Counter("esfis_http_requests", "HTTP requests answered", ["method", "route", "status"]),
        "latency": Histogram(
            "esfis_http_request_duration_seconds",
            "time to answer an HTTP request",
            ["method", "route"],
            buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        ),
        "stages": Histogram(
            "esfis_recall_stage_seconds",
            "time in each stage of a recall",
            ["stage"],
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
        ),
        "imported": Counter("esfis_import_rows", "rows an import wrote, skipped or refused", ["outcome"]),
        "refusals": Counter("esfis_refusals", "calls answered with an esfis error, by its code", ["code"]),
        "upkeep": Counter("esfis_upkeep_runs", "rounds of the server's upkeep", ["task"]),
        # Every worker writes the same readings of one volume: the scrape shows the latest.
        "disk_free": Gauge(
            "esfis_disk_free_bytes", "bytes free on the volume under ESFIS_HOME", multiprocess_mode="mostrecent"
        ),
        "disk_full": Gauge(
            "esfis_disk_full",
            "1 while writes are refused for want of room (below the reserve), else 0",
            multiprocess_mode="mostrecent",
        ),
    }
    return _made


def count_request(method: str, route: str, status: int, seconds: float) -> None:
    made = _metrics()
    if made is not None:
        made["requests"].labels(method, route, str(status)).inc()
        made["latency"].labels(method, route).observe(seconds)


def time_stage(stage: str, seconds: float) -> None:
    made = _metrics()
    if made is not None:
        made["stages"].labels(stage).observe(seconds)


def count_import(imported: int, skipped: int, failed: int) -> None:
    made = _metrics()
    if made is not None:
        for outcome, rows in (("imported", imported), ("skipped", skipped), ("failed", failed)):
            if rows:
                made["imported"].labels(outcome).inc(rows)


def count_refusal(code: str) -> None:
    made = _metrics()
    if made is not None:
        made["refusals"].labels(code).inc()


def show_disk(free: int, full: bool) -> None:
    """The volume's room, as a write last found it (``server.faults``)."""
    made = _metrics()
    if made is not None:
        made["disk_free"].set(free)
        made["disk_full"].set(1 if full else 0)


def count_upkeep(task: str) -> None:
    made = _metrics()
    if made is not None:
        made["upkeep"].labels(task).inc()
