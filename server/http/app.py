"""The HTTP application: ``create_app(service_factory)`` (``server.http.workers`` serves it).

One service per process, opened at start-up (catalog and store: fast), and one model, loaded
in a background thread so ``/healthz`` answers at once while ``sentence_transformers`` imports
(~10 s); a request that needs a vector before then waits for the load. Nothing about spaces,
policies or tokens is cached here: the CLI may change them while the server runs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Literal

import anyio
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.routing import Route

from server.facade import Esfis
from server.http import early_refusal
from server.http.access_log import AccessLog
from server.http.auth import Gate
from server.http.bodies import MCP_PATH
from server.http.docs import mount_docs
from server.http.errors import install_error_handlers
from server.http.html_policy import HtmlPolicy
from server.http.mcp import McpEndpoint, Protection
from server.http.metrics import mount_metrics, note_health, server_health
from server.http.oauth import OAuthSite, mount_oauth, site_from_env
from server.http.rate_limits import Limiter, RateLimits
from server.http.routes_agent import router as agent_router
from server.http.routes_operator import router as operator_router
from server.settings import Settings
from server.web import mount_web

log = logging.getLogger("esfis.http")


class Warmup:
    """Loads the model once, off the request path, and says how far it got."""

    def __init__(self, service: Esfis) -> None:
        self.state: Literal["loading", "ready", "failed"] = "loading"
        note_health(self.state)
        threading.Thread(target=self._run, args=(service.warm_up,), name="esfis-model-load", daemon=True).start()

    def _run(self, load: Callable[[], None]) -> None:
        try:
            load()
            self.state = "ready"
        except Exception:  # the first request that embeds reports it in the one error shape
            log.exception("the model failed to load")
            self.state = "failed"
        note_health(self.state)


class Health(BaseModel):
    status: Literal["ok", "degraded", "unavailable"]
    model: Literal["loading", "ready", "failed"]
    workers: int
    disk: Literal["ok", "full"] = "ok"
    catalog: Literal["ok", "unavailable"] = "ok"


def create_app(
    service_factory: Callable[[], Esfis],
    *,
    mcp: Protection | None = None,
    public_url: str | None = None,
    oauth: OAuthSite | None = None,
) -> FastAPI:
    """The HTTP API, the operator's web page, and MCP over HTTP at ``/mcp`` (``server.http.mcp``),
    whose ``Host`` and ``Origin`` checks ``mcp`` sets (default: a server on loopback);
    ``public_url`` is ESFIS_PUBLIC_URL, where a proxy serves the web page (``server.web.site``);
    ``oauth`` is where the OAuth authorization server is (default: as ``esfis serve`` set it)."""
    settings = Settings.from_env()
    site = oauth if oauth is not None else site_from_env(enabled=settings.oauth, public_url=public_url)
    endpoint = McpEndpoint(
        lambda: app.state.service,
        mcp or Protection.from_env(),
        approval_wait_s=settings.approval_wait_s,
        site=site,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service = await anyio.to_thread.run_sync(service_factory)
        service.start_upkeep()
        app.state.service = service
        app.state.warmup = Warmup(service)
        try:
            async with endpoint.running():
                yield
        finally:
            service.close()

    app = FastAPI(
        title="esfis",
        summary="Scope-first memory for AI agents",
        description=(
            "Agents remember and recall within the spaces they reach; operators manage spaces, "
            "policies, deliveries and imports. Every request under /v1 takes "
            "`Authorization: Bearer <token>` (from `esfis token create`). Every error answers "
            '`{"error": {"code": "...", "message": "..."}}`.'
        ),
        version="1",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's loads Swagger UI from a CDN: ours is served from a package
        redoc_url=None,
    )
    install_error_handlers(app)
    endpoint.route = Route(MCP_PATH, endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    app.router.routes.append(endpoint.route)
    mount_oauth(app, lambda: app.state.service, site)  # /authorize, /token, … and their metadata
    limiter = Limiter(lambda: app.state.service, RateLimits.from_env(os.environ))
    app.state.limiter = limiter  # the settings pages' sign-in counts its failures there
    early_refusal.watch(limiter)  # esfis serve's connections from a spent address are refused as they open
    app.add_middleware(Gate, service=lambda: app.state.service, site=lambda: site, limiter=lambda: limiter)
    app.add_middleware(HtmlPolicy)  # every HTML answer carries a Content-Security-Policy
    # Added last: outermost, it sees every answer's status, and tells each 429's address.
    app.add_middleware(AccessLog, on_refused=early_refusal.note_refused)
    app.include_router(agent_router)
    app.include_router(operator_router)
    mount_web(app, public_url=public_url)  # the operator's web page, under /settings/SEGMENT/
    mount_docs(app)  # /docs: Swagger UI from a packaged copy
    mount_metrics(app)  # /metrics: the operator's, for every worker

    @app.get(
        "/healthz",
        response_model=Health,
        tags=["health"],
        responses={503: {"model": Health, "description": "the catalog cannot be reached: not ready"}},
    )
    async def healthz() -> JSONResponse:
        """Answers as soon as the server listens; ``model`` says whether every worker's model is
        loaded (the least ready of them), ``workers`` how many workers answer. ``disk`` is
        ``full`` while writes are refused for want of room (``status`` ``degraded``: reads go
        on); ``catalog`` ``unavailable`` while it cannot be reached (503, ``status``
        ``unavailable``: not ready). Both recover by themselves."""
        model, workers = server_health(app.state.warmup.state)
        service = getattr(app.state, "service", None)
        standing = None if service is None else await anyio.to_thread.run_sync(service.standing)
        disk = "ok" if standing is None else standing.disk
        catalog = "ok" if standing is None else standing.catalog
        status = "unavailable" if catalog != "ok" else "degraded" if disk != "ok" else "ok"
        body = {"status": status, "model": model, "workers": workers, "disk": disk, "catalog": catalog}
        return JSONResponse(body, status_code=503 if catalog != "ok" else 200)

    return app
