"""esfis as an OAuth 2.1 authorization server and resource server for ``/mcp`` and the agent
routes, per the MCP authorization specification (2025-11-25), built on the MCP SDK's
``mcp.server.auth`` handlers (docs/decisions.md says why that one):

- RFC 9728 protected resource metadata at ``/.well-known/oauth-protected-resource`` (the
  server) and ``/.well-known/oauth-protected-resource/mcp``; a 401 names it in
  ``WWW-Authenticate`` (``server.http.auth``);
- RFC 8414 metadata at ``/.well-known/oauth-authorization-server``;
- ``/authorize``: authorization code with PKCE, S256 only; the consent is the operator's, on a
  settings page (``server.web.routes_connect``). An error is sent back to the client's redirect
  URI only for a client the operator has said yes to; for any other (a registration is a
  stranger's to make) it is shown on esfis's own page, so ``/authorize`` is no open redirector
  (RFC 9700 §4.11.2);
- ``/token``: the code (good once, for a minute), then refresh tokens rotated at each use;
- ``/register``: RFC 7591 dynamic registration; a client id that is an https URL is a Client
  ID Metadata Document (``documents``);
- ``/revoke``: RFC 7009.

Every answer to bad input is an OAuth error (400 or 401 with ``error`` and
``error_description``), never a 500. ``ESFIS_OAUTH=off`` mounts none of it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio.to_thread
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from server.errors import NotInstalled
from server.http.oauth.address import MCP_PATH, PRM_PATH, OAuthSite, site_for, site_from_env
from server.loading import loading

if TYPE_CHECKING:
    from fastapi import FastAPI

    from server.facade import Esfis

# Each OAuth path and the methods it answers (``server.http.oauth.routes`` builds their handlers).
PATHS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("/.well-known/oauth-authorization-server", ("GET", "OPTIONS")),
    (PRM_PATH, ("GET", "OPTIONS")),
    (PRM_PATH + MCP_PATH, ("GET", "OPTIONS")),
    ("/authorize", ("GET", "POST")),
    ("/token", ("POST", "OPTIONS")),
    ("/register", ("POST", "OPTIONS")),
    ("/revoke", ("POST", "OPTIONS")),
)


class Handlers:
    """The OAuth handlers, built once at the first OAuth request, off the event loop: they stand
    on the MCP SDK, whose import would otherwise be half a second of every server's start."""

    def __init__(self, service: Callable[[], Esfis], site: OAuthSite) -> None:
        self._service = service
        self._site = site
        self._apps: dict[str, ASGIApp] | None = None
        self._lock = threading.Lock()

    def build(self) -> dict[str, ASGIApp]:
        with self._lock:
            if self._apps is None:
                from server.http.oauth.routes import routes

                self._apps = {route.path: route.app for route in routes(self._service, self._site)}
            return self._apps

    async def app(self, path: str) -> ASGIApp:
        """The handler of ``path``; ``NotInstalled`` when the SDK under them failed to load."""
        if self._apps is None:
            return (await anyio.to_thread.run_sync(loading("OAuth", self.build)))[path]
        return self._apps[path]


class _Deferred:
    """One OAuth path's ASGI app: its handler, once ``Handlers`` has it."""

    def __init__(self, handlers: Handlers, path: str) -> None:
        self.handlers = handlers
        self.path = path
        self.route: Route | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope.setdefault("route", self.route)  # the access log names a request by its route's template
        try:
            app = await self.handlers.app(self.path)
        except NotInstalled as exc:  # in OAuth's own terms, as the gate says its refusals here
            body = {"error": "temporarily_unavailable", "error_description": exc.message}
            headers = {"Retry-After": str(exc.retry_after), "Cache-Control": "no-store"}
            await JSONResponse(body, status_code=exc.status, headers=headers)(scope, receive, send)
            return
        await app(scope, receive, send)


def mount_oauth(app: FastAPI, service: Callable[[], Esfis], site: OAuthSite) -> None:
    app.state.oauth_site = site
    if not site.on:
        return
    handlers = Handlers(service, site)
    for path, methods in PATHS:
        deferred = _Deferred(handlers, path)
        deferred.route = Route(path, deferred, methods=list(methods))
        app.router.routes.append(deferred.route)


__all__ = ["OAuthSite", "mount_oauth", "site_for", "site_from_env"]
