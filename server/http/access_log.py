"""The server's access log: method, route template, status and time, and nothing else.

uvicorn's own access log writes the request's path and query string. Here those carry
capabilities and names a log must not keep: a context reference (``/v1/context/ctx_…`` opens
memories), memory ids, ``?space=`` and ``?cwd=``. So the server turns uvicorn's off and logs the
route's template instead (``GET /v1/context/{ref} 200 2.1ms``), never a reference, an id, a
token, a query string or a body. A request that matched no route is logged as ``(no route)``.

Refusals of a rate limit (429) are not logged one by one: a caller past its limit can send
thousands a second, and a line each would cost the server a third of what refusing them costs
and fill the disk at that rate. They are counted by route and written as one line a second
(``POST /v1/recall 429 ×4,120 in 1.0s``); ``/metrics`` still counts each.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable

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


REFUSALS_EVERY_S = 1.0  # how often the summed rate-limit refusals are written


class Refusals:
    """429s counted by route on the event loop, written as one line per route every
    ``REFUSALS_EVERY_S`` (a timer armed by the first of each period: nothing runs while none come)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.since = 0.0

    def add(self, method: str, route: str) -> None:
        if not self.counts:
            self.since = time.perf_counter()
            asyncio.get_running_loop().call_later(REFUSALS_EVERY_S, self.write)
        self.counts[(method, route)] += 1

    def write(self) -> None:
        seconds = time.perf_counter() - self.since
        for (method, route), count in sorted(self.counts.items()):
            log.info("%s %s 429 ×%s in %.1fs", method, route, f"{count:,}", seconds)
        self.counts.clear()


class AccessLog:
    """Pure ASGI middleware, outermost, so it sees the status every other layer answered."""

    def __init__(self, app: ASGIApp, on_refused: Callable[[str], None] | None = None) -> None:
        self.app = app
        self.refusals = Refusals()
        self.on_refused = on_refused  # told the address of every 429 (server.http.early_refusal)

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
            if status == 429:
                self.refusals.add(method, route)
                client = scope.get("client")
                if self.on_refused is not None and client:
                    self.on_refused(str(client[0]))
            else:
                log.info("%s %s %d %.1fms", method, route, status, seconds * 1000)
            count_request(method, route, status, seconds)  # /metrics: the same template, never a path
