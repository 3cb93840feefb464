"""``/metrics`` (Prometheus text format) and ``/healthz``, for the whole server, whichever worker
answers.

``/metrics`` is the operator's: it takes an operator token (``Authorization: Bearer``, as a
Prometheus ``bearer_token`` sends it) and answers what every worker counted
(``server.metrics``: the multiprocess files of this server), plus the calls waiting for a
person, read from the catalog at the scrape. It holds no memory text, no query, no id, no token
and no space name.

``/healthz`` answers at once, for anyone, and tells no secret: ``status`` and ``model``, the
least ready of the workers' models (``loading`` until every worker's is ``ready``; ``failed`` if
one failed), and ``workers``, how many answered for themselves. Each worker keeps its state in a
small file beside the metrics' (``health-PID.json``); a worker that died is left out.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import Response

from server.errors import Forbidden
from server.metrics import DIR

if TYPE_CHECKING:
    from server.facade import Esfis

ORDER = {"failed": 0, "loading": 1, "ready": 2}


def note_health(state: str) -> None:
    """This worker's model state, where ``/healthz`` of any worker reads it."""
    folder = os.environ.get(DIR)
    if not folder:
        return
    path = Path(folder) / f"health-{os.getpid()}.json"
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"model": state}))
    os.replace(temporary, path)


def server_health(own: str) -> tuple[str, int]:
    """The least ready model of the server's live workers, and how many there are."""
    folder = os.environ.get(DIR)
    if not folder:
        return own, 1
    states = []
    for path in Path(folder).glob("health-*.json"):
        pid = path.stem.removeprefix("health-")
        if not pid.isdigit() or not _alive(int(pid)):
            continue
        try:
            states.append(json.loads(path.read_text())["model"])
        except (OSError, ValueError, KeyError):
            continue
    if not states:
        return own, 1
    return min(states, key=lambda s: ORDER.get(s, 0)), len(states)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def render(service: Esfis) -> bytes:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    registry = CollectorRegistry()
    if os.environ.get(DIR):
        from prometheus_client.multiprocess import MultiProcessCollector

        MultiProcessCollector(registry)

    class Waiting:
        def collect(self):
            gauge = GaugeMetricFamily("esfis_approvals_waiting", "calls held for a person, waiting now")
            gauge.add_metric([], service.operator.approvals_waiting())
            yield gauge

    registry.register(Waiting())
    return generate_latest(registry)


def mount_metrics(app: FastAPI) -> None:
    @app.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        service: Esfis = request.app.state.service
        values = request.headers.getlist("authorization")
        token = await anyio.to_thread.run_sync(service.authenticate, values[0] if len(values) == 1 else None)
        if not token.operator:
            raise Forbidden("/metrics is the operator's: scrape it with an operator token")
        body = await anyio.to_thread.run_sync(render, service)
        return Response(
            body, media_type="text/plain; version=0.0.4; charset=utf-8", headers={"Cache-Control": "no-store"}
        )
