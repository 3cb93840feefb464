"""The server's access log: method, route template, status and time, and nothing else.

uvicorn's own access log writes the request's path and query string. Here those carry
capabilities and names a log must not keep: a context reference (``/v1/context/ctx_…`` opens
memories), memory ids, ``?space=`` and ``?cwd=``. So the server turns uvicorn's off and logs the
route's template instead (``GET /v1/context/{ref} 200 2.1ms``), never a reference, an id, a
token, a query string or a body. A request that matched no route is logged as ``(no route)``.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.metrics import count_request

log = logging.getLogger("esfis.access")
NO_ROUTE = "(no route)"


def route_template(scope: Scope) -> str:
    """The template of the route that served ``scope`` (set by the router), never its path."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if not isinstance(path, str) or not path:
        return NO_ROUTE
    root = scope.get("root_path", "") or ""
    return root + path if isinstance(root, str) else path


class AccessLog:
    """Pure ASGI middleware, outermost, so it sees the status every other layer answered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers when the app raised before it started a response

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            method = scope.get("method", "?")
            method = method if isinstance(method, str) else "?"
            seconds = time.perf_counter() - started
            route = route_template(scope)
            log.info("%s %s %d %.1fms", method, route, status, seconds * 1000)
            count_request(method, route, status, seconds)  # /metrics: the same template, never a path
