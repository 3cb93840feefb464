"""The long-running interfaces: ``esfis serve`` (the HTTP API and the operator's pages) and
``esfis mcp`` (MCP over stdio). Their stacks are imported only when run, so ``esfis recall``
never pays for FastAPI or the MCP SDK."""

from __future__ import annotations

import os
import sys
from argparse import Namespace
from collections.abc import Callable
from typing import TYPE_CHECKING

from server.cli.context import settings
from server.cli.registry import arg, command
from server.settings import BATCH_WINDOW_MS

if TYPE_CHECKING:
    from server.facade import Esfis


def _say_where(host: str, port: int, public_url: str | None) -> Callable[[Esfis], None]:
    """What ``serve`` prints once the service is open: the settings page, and on a fresh home a
    first operator token, only to a person at a terminal (``server.web.announcement``)."""
    from server.web import announcement

    def say(service: Esfis) -> None:
        lines = announcement(service, host, port, at_terminal=sys.stderr.isatty(), public_url=public_url)
        lines.append(oauth_line(host, port, public_url))
        for line in lines:
            print(line, file=sys.stderr)
        sys.stderr.flush()

    return say


def oauth_line(host: str, port: int, public_url: str | None) -> str:
    """Whether MCP hosts may connect with OAuth, and where (or why not)."""
    from server.http.oauth import site_for

    site = site_for(enabled=settings().oauth, public_url=public_url, host=host, port=port)
    if site.on:
        return f"esfis: OAuth for MCP hosts at {site.mcp_resource} (each connection is consented on the settings page)"
    return f"esfis: OAuth is off ({site.why_off}); static bearer tokens work"


@command(
    "serve",
    "serve the HTTP API (and the operator's web page)",
    arg("--host", default="127.0.0.1"),
    arg("--port", type=int, default=8765),
    arg(
        "--workers",
        type=int,
        default=None,
        help="worker processes on one socket (default: one per core this process may use)",
    ),
    arg(
        "--batch-window-ms",
        type=float,
        default=None,
        help=f"the most a query waits for others to embed with (default {BATCH_WINDOW_MS:g}; 0: no batching)",
    ),
)
def serve(args: Namespace) -> None:
    from server.arenas import limit_malloc_arenas
    from server.http.workers import serve as serve_http

    limit_malloc_arenas()  # a long-lived process with many threads
    if args.batch_window_ms is not None:  # the workers read it from the environment
        os.environ["ESFIS_BATCH_WINDOW_MS"] = str(args.batch_window_ms)
    public_url = settings().public_url  # ESFIS_PUBLIC_URL, refused here when malformed
    opened = _say_where(args.host, args.port, public_url)
    serve_http(host=args.host, port=args.port, workers=args.workers, opened=opened, public_url=public_url)


@command(
    "settings-url",
    "print the address of the operator's settings pages, as esfis serve prints it",
    arg("--host", default="127.0.0.1", help="the address esfis serve listens on (default 127.0.0.1)"),
    arg("--port", type=int, default=8765, help="its port (default 8765)"),
)
def settings_url(args: Namespace) -> None:
    from server.home import make_private
    from server.web import settings_url as url_of

    found = settings()
    make_private(found.home)  # the address's key is made in the home on first use, 0600
    print(url_of(found.home, args.host, args.port, found.public_url))


@command("mcp", "serve MCP over stdio, in the space of the current folder")
def mcp(args: Namespace) -> None:
    from server.arenas import limit_malloc_arenas
    from server.loading import loading

    def stdio() -> Callable[[], None]:
        from server.mcp.stdio import run_stdio

        return run_stdio

    limit_malloc_arenas()
    loading("MCP over stdio", stdio, logged=False)()()
