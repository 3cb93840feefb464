"""The operator's web page, Settings › Spaces, served by ``esfis serve`` under
``/settings/SEGMENT/``, an address of its own that the server prints (``server.web.site``).

An interface like the CLI, HTTP and MCP: it calls the service façade only (the process's one
``Esfis``, ``app.state.service``), renders pages on the server (Jinja2, no script, no asset
from outside this package), and maps every error to a page in one place (``pages.WebRoute``).

    site           the pages' address (a secret segment), every URL built, the cookies' scope
    routes_auth    sign-in (an operator token on a form), sign-out, the style sheet, 404 pages,
                   and the page that says where the pages are
    routes_spaces  the tree of spaces, folders, adding and removing; who sees what
    routes_memories  the memories themselves: browse, search, open one, replace, forget, forget
                   by filter; plots.py draws a space's days (inline SVG)
    routes_log     deliveries and their why, runs and their trails, grants, trusted sources
    routes_approvals  calls held for a person: each as it would be written; approve, decline
    routes_tokens  tokens: list, create (secret shown once), revoke
    routes_connect consenting to an OAuth connection: which AI, which spaces
    session        signed, expiring session cookies and CSRF tokens
    operators      who may sign in, the session key, a fresh home's first operator token
    pages          templates, headers, guards, error pages
"""

from __future__ import annotations

from fastapi import FastAPI

from server.facade import Esfis
from server.web.operators import first_operator_token
from server.web.site import Site, settings_url


def mount_web(app: FastAPI, *, public_url: str | None = None) -> None:
    """Add the Settings pages to the HTTP application (its lifespan opens the service);
    ``public_url`` is ESFIS_PUBLIC_URL, the origin a proxy serves them at."""
    from server.web import (
        routes_approvals,
        routes_auth,
        routes_connect,
        routes_log,
        routes_memories,
        routes_spaces,
        routes_tokens,
    )

    app.state.web_site = Site(public_url)
    app.include_router(routes_auth.assets)  # the style sheet, outside the segment
    app.include_router(routes_connect.landing)  # /oauth/connect/ID: an OAuth consent's first page, outside it
    app.state.authorize_refusal_page = routes_connect.authorize_refusal_page  # /authorize's errors, on a page
    # A module of pages declares ``router = pages.settings_router()`` and joins this tuple.
    for module in (
        routes_auth,
        routes_spaces,
        routes_memories,
        routes_log,
        routes_approvals,
        routes_tokens,
        routes_connect,
    ):
        app.include_router(module.router)
    app.include_router(routes_auth.missing_pages)  # every other /settings/SEGMENT/… is a 404 page
    app.include_router(routes_auth.fallback)  # last: /settings/ and every other address under it


def announcement(
    service: Esfis, host: str, port: int, *, at_terminal: bool, public_url: str | None = None
) -> list[str]:
    """What ``esfis serve`` says once the service is open (the CLI prints it): where the settings
    page is. On a fresh home (no active operator token) with a person at the terminal, make a
    first operator token and show it there, once, so signing in needs no other command; to a log
    (not a terminal), never: it says how to make one instead."""
    lines = [f"esfis: settings page: {settings_url(service.home, host, port, public_url)}"]
    if not any(t.operator and t.active for t in service.operator.tokens()):
        if at_terminal:
            secret = first_operator_token(service.operator)
            lines.append(f"esfis: sign in with this operator token (shown once, keep it safe): {secret}")
        else:
            lines.append("esfis: no operator token yet: make one with `esfis token create --operator`")
    return lines


__all__ = ["announcement", "mount_web", "settings_url"]
