"""``esfis serve``'s processes: one, or ``--workers N`` processes sharing one listening socket.

A request's Python work (routing, the catalog, the recall's bookkeeping) runs under one
interpreter lock per process, so one process keeps one core busy however many the machine has.
Several workers, each a process with its own service (catalog connection, store, model, write
journal), serve on every core; the store already takes several processes on one home (each
partition's lock and version token, the catalog's write lock, a write journal per process,
sign-out and tokens in the catalog: tests/http/test_workers.py holds the barrier, forget and
sign-out across two workers). The default is one worker per core this process may use: MCP over
HTTP keeps nothing of a client between requests (``server.http.mcp``), so any worker answers
any request.

The parent opens the service once, before any worker starts, to announce the settings page (and
a fresh home's first operator token, once); then uvicorn's supervisor starts the workers, each
through ``worker_app``, and restarts one that dies. Each worker batches the query embeddings of
its concurrent requests (``indexing.embedding.batching``, window ``ESFIS_BATCH_WINDOW_MS``).
"""

from __future__ import annotations

import copy
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from server.errors import InvalidInput
from server.facade import Esfis, open_service
from server.http import early_refusal
from server.http.app import create_app
from server.http.log_queue import write_logs_off_the_loop
from server.http.mcp import Redacting
from server.http.oauth.address import SERVE_HOST, SERVE_PORT
from server.metrics import DIR as METRICS_DIR
from server.settings import Settings

WORKER_APP = "server.http.workers:worker_app"


def default_workers() -> int:
    """The cores this process may run on (its affinity, not the machine's count): ``esfis
    serve``'s default."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no sched_getaffinity (macOS)
        return max(1, os.cpu_count() or 1)


def serving_service() -> Esfis:
    """A worker's service, opened at its start-up (logging configured by then)."""
    write_logs_off_the_loop()
    return open_service(Settings.from_env(), batching=True)


def worker_app() -> FastAPI:
    """The application of one worker process (uvicorn's factory)."""
    return create_app(serving_service, public_url=Settings.from_env().public_url)


def log_config() -> dict[str, Any]:
    import uvicorn

    # uvicorn's access log writes paths and query strings (context references, ids, ?space=):
    # off, and server.http.access_log writes route templates instead, through the same handler.
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["loggers"]["esfis"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    # The MCP SDK names session ids in some lines: through the same handler, redacted.
    config.setdefault("filters", {})["redact"] = {"()": Redacting}
    config["handlers"]["default"]["filters"] = ["redact"]
    config["loggers"]["mcp"] = {"handlers": ["default"], "level": "WARNING", "propagate": False}
    return config


def _then(factory: Callable[[], Esfis], opened: Callable[[Esfis], None] | None) -> Callable[[], Esfis]:
    """``factory``, calling ``opened`` once the service is open."""

    def opening() -> Esfis:
        service = factory()
        if opened is not None:
            opened(service)
        return service

    return opening


MEMORY_FS = Path("/dev/shm")


def metrics_folder_of(home: Path, port: int) -> Path:
    """Where this server keeps its metrics and health files (``server.metrics``): in memory
    (``/dev/shm``) where the machine has it, else under ``home/serve/``. Not on the data disk:
    prometheus_client maps its files and grows them sparse, and a worker that writes a page of
    one on a full disk dies of SIGBUS, just when a new count (a 507) needs a page."""
    if MEMORY_FS.is_dir() and os.access(MEMORY_FS, os.W_OK):
        named = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]
        return MEMORY_FS / f"esfis-{os.getuid()}-{named}" / str(port)
    return home / "serve" / str(port)


def _metrics_folder(home: Path, port: int) -> Path:
    """This server's metrics and health files (``metrics_folder_of``), emptied at its start:
    counts begin at zero with the server, as Prometheus expects of a restart."""
    folder = metrics_folder_of(home, port)
    folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.mkdir(exist_ok=True, mode=0o700)
    for stale in folder.iterdir():
        if stale.is_file():
            stale.unlink()
    return folder


GRACE_S = 5  # SIGTERM: how long requests in flight may finish before the rest is cancelled


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    workers: int | None = None,
    opened: Callable[[Esfis], None] | None = None,
    public_url: str | None = None,
) -> None:
    """Serve until stopped; ``opened`` is told of the first service opened (``esfis serve``
    announces the settings page with it); ``public_url`` is ESFIS_PUBLIC_URL (the workers read
    it from the environment themselves)."""
    import uvicorn

    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise InvalidInput("--workers must be at least 1", field="workers")
    os.environ[SERVE_HOST] = host  # /mcp's Host check, in this process and the workers (Protection.from_env)
    os.environ[SERVE_PORT] = str(port)  # the OAuth issuer of a server on loopback (server.http.oauth.address)
    os.environ[METRICS_DIR] = str(_metrics_folder(Settings.from_env().home, port))  # before a worker counts
    # SIGTERM: stop taking requests, let those in flight finish for a few seconds, then cancel
    # what still waits (an MCP session's stream, a prompt nobody answers), so a stop is bounded.
    common: dict[str, Any] = dict(
        host=host,
        port=port,
        log_level="info",
        access_log=False,
        log_config=log_config(),
        timeout_graceful_shutdown=GRACE_S,
        http=early_refusal.PROTOCOL,  # a peer past its address limit is refused as it connects
    )
    if workers == 1:
        uvicorn.run(create_app(_then(serving_service, opened), public_url=public_url), **common)
        return
    _then(lambda: open_service(Settings.from_env()), opened)().close()
    # Workers are spawned: glibc reads the arena cap from the environment at their start.
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    uvicorn.run(WORKER_APP, factory=True, workers=workers, **common)
