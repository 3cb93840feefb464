"""Where esfis's authorization server says it is: one issuer and the resources it guards.

Behind a proxy the server cannot know its public address, so it is ESFIS_PUBLIC_URL. Without it,
a server listening on loopback is its own public address (``http://127.0.0.1:PORT``): a host on
the same machine connects with no setting. Anywhere else, or with a public address over plain
http that is not loopback, the authorization server is off, and ``why_off`` says why (``esfis
serve`` prints it): tokens and codes never travel in the clear across a network.

Two resources (RFC 8707, RFC 9728): ``{issuer}/mcp``, for MCP hosts, and ``{issuer}``, for a
client of the HTTP API's agent routes. A token is bound to the one it was issued for: one for
``/mcp`` is refused on ``/v1``, and one for another server everywhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

MCP_PATH = "/mcp"
PRM_PATH = "/.well-known/oauth-protected-resource"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
SERVE_HOST = "ESFIS_SERVE_HOST"  # set by esfis serve for its workers: the address it listens on
SERVE_PORT = "ESFIS_SERVE_PORT"  # set by esfis serve for its workers: the port it listens on


@dataclass(frozen=True)
class OAuthSite:
    issuer: str | None  # None: the authorization server is off
    why_off: str | None = None

    @property
    def on(self) -> bool:
        return self.issuer is not None

    @property
    def loopback(self) -> bool:
        return self.issuer is not None and urlsplit(self.issuer).hostname in LOOPBACK

    @property
    def mcp_resource(self) -> str:
        assert self.issuer is not None
        return self.issuer + MCP_PATH

    def resource_for(self, path: str) -> str:
        """The resource a request to ``path`` is a request for."""
        assert self.issuer is not None
        return self.mcp_resource if path == MCP_PATH else self.issuer

    def metadata_url(self, path: str) -> str:
        """RFC 9728 §3.1: the well-known address of the resource a path belongs to."""
        assert self.issuer is not None
        return self.issuer + PRM_PATH + (MCP_PATH if path == MCP_PATH else "")

    def known_resource(self, resource: str) -> str | None:
        """``resource`` as this server names it, when it is one of its two; else None. Compared
        as URLs: case of scheme and host, a default port and a trailing slash aside."""
        assert self.issuer is not None
        given = _normal(resource)
        for ours in (self.mcp_resource, self.issuer):
            if given is not None and given == _normal(ours):
                return ours
        return None


def _normal(url: str) -> tuple[str, str, str] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        return None
    default = 443 if parts.scheme.lower() == "https" else 80
    netloc = parts.hostname.lower() + ("" if port in (None, default) else f":{port}")
    return parts.scheme.lower(), netloc, parts.path.rstrip("/")


def site_for(*, enabled: bool, public_url: str | None, host: str, port: int | None) -> OAuthSite:
    if not enabled:
        return OAuthSite(None, "ESFIS_OAUTH=off: only static bearer tokens are taken")
    if public_url is not None:
        parts = urlsplit(public_url)
        if parts.scheme != "https" and parts.hostname not in LOOPBACK:
            return OAuthSite(
                None,
                f"ESFIS_PUBLIC_URL {public_url} is plain http and not loopback: OAuth needs https there",
            )
        return OAuthSite(public_url.rstrip("/"))
    if host in LOOPBACK and port:
        shown = f"[{host}]" if ":" in host else host
        return OAuthSite(f"http://{shown}:{port}")
    return OAuthSite(None, "no ESFIS_PUBLIC_URL: set it to the https address the server is reached at to offer OAuth")


def site_from_env(*, enabled: bool, public_url: str | None) -> OAuthSite:
    """As ``esfis serve`` set it for its workers (SERVE_HOST and SERVE_PORT)."""
    port = os.environ.get(SERVE_PORT, "")
    return site_for(
        enabled=enabled,
        public_url=public_url,
        host=os.environ.get(SERVE_HOST, "127.0.0.1"),
        port=int(port) if port.isdigit() else None,
    )
