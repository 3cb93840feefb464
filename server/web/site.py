"""Where the settings pages are: the one place their addresses and their cookies' scope are made.

Every page lives under ``/settings/SEGMENT/``. SEGMENT is 128 random bits (26 characters of
lowercase base32), made on first use and kept in ``ESFIS_HOME/web-path.key`` (0600) beside the
session key; ``esfis serve`` prints the address with it, and ``esfis settings-url`` prints it
again. Browsers do not keep cookies apart by port, and SameSite does not separate two ports of
one host: a page on another port of 127.0.0.1 receives any cookie whose Path it can name, with a
plain ``<img>`` to its own port. So the session's cookies are scoped to ``/settings/SEGMENT``, a
path no other page can guess, and their signatures are bound to SEGMENT too: a cookie shown at
any other address is worth nothing. ``/settings/`` without it, or with another, reads and sets
no cookie; it says where to look (``routes_auth.lost``). Deleting ``web-path.key`` gives the
pages a new address and ends every session.

With ``ESFIS_PUBLIC_URL=https://…`` (a server behind a proxy), the cookies are ``__Host-``
cookies instead: Secure, host-only, and — as that prefix demands — Path=/. The browser then
sends them to every path of that host, so the segment no longer keeps them in; it still makes
them useless anywhere but at the settings address (docs/web.md, "Behind a proxy").

Build every address here: ``url(request, "spaces", name)`` is ``/settings/SEGMENT/spaces/NAME``,
for templates (``url``, given to every page) and redirects alike; routes are declared under
``PREFIX`` (``pages.settings_router()``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from fastapi import Request

from server.web.operators import private_key

SETTINGS = "/settings"
PREFIX = "/settings/{segment}"  # every page's route; the segment is checked by pages.WebRoute
STYLE_URL = "/settings/static/style.css"  # outside the segment: no cookie goes with it
SEGMENT_KEY = "web-path"
SEGMENT_BYTES = 16


@dataclass(frozen=True)
class Site:
    """How the pages are reached: ``public_url`` is ESFIS_PUBLIC_URL (an origin), None when the
    browser talks to the address the server listens on."""

    public_url: str | None = None

    @property
    def host_cookies(self) -> bool:
        """``__Host-`` cookies: served at a public https origin."""
        return self.public_url is not None and self.public_url.startswith("https://")

    def cookie(self, name: str) -> str:
        return f"__Host-{name}" if self.host_cookies else name

    def cookie_path(self, segment: str) -> str:
        return "/" if self.host_cookies else f"{SETTINGS}/{segment}"

    def secure(self, request: Request) -> bool:
        return self.host_cookies or request.url.scheme == "https"

    def origin(self, request: Request) -> str:
        """The origin a form of these pages is sent from (its ``Origin`` header)."""
        return self.public_url or f"{request.url.scheme}://{request.headers.get('host', '')}"


def segment_of(home: Path) -> str:
    """This home's settings segment (made on first use)."""
    raw = private_key(home, SEGMENT_KEY, size=SEGMENT_BYTES)
    return base64.b32encode(raw).decode().rstrip("=").lower()


def origin_of(host: str, port: int) -> str:
    """The origin a browser on this machine opens for a server listening on ``host:port``."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def settings_url(home: Path, host: str, port: int, public_url: str | None = None) -> str:
    """The settings pages' full address, as ``esfis serve`` and ``esfis settings-url`` print it."""
    return f"{public_url or origin_of(host, port)}{SETTINGS}/{segment_of(home)}/"


def site_of(request: Request) -> Site:
    site = getattr(request.app.state, "web_site", None)
    return site if isinstance(site, Site) else Site()


def segment(request: Request) -> str:
    """The segment, read once per request (a stat and a read, as the session key is)."""
    known = getattr(request.state, "segment", None)
    if isinstance(known, str):
        return known
    found = segment_of(request.app.state.service.home)
    request.state.segment = found
    return found


def url(request: Request, *parts: object) -> str:
    """The path of a settings page: ``url(request, "spaces", "acme/platform")`` is
    ``/settings/SEGMENT/spaces/acme/platform``; ``url(request)`` is the pages' root. Parts are
    joined as they are (a space's name keeps its ``/``); a query string is the caller's."""
    return f"{SETTINGS}/{segment(request)}/" + "/".join(str(p) for p in parts)
