"""Which redirect URIs a client may register: https, or http on a loopback address for a native
client (RFC 8252 §7.3), with no fragment and no user; compared exactly when used (the SDK's
``validate_redirect_uri``). Registration is open, so a registered URI vouches for nothing:
``/authorize`` sends an error there only for a client the operator has said yes to, and shows
any other on its own page (``server.http.oauth.routes.refused_here``); no open redirect either way."""

from __future__ import annotations

from urllib.parse import urlsplit

from server.http.oauth.address import LOOPBACK


def redirect_refusal(uri: str) -> str | None:
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError:
        return "not a well-formed URL"
    if len(uri) > 2048:
        return "over 2048 characters"
    if parts.fragment or "#" in uri:
        return "a redirect URI has no fragment"
    if parts.username or parts.password:
        return "a redirect URI has no user or password"
    if not parts.hostname:
        return "a redirect URI names a host"
    if parts.scheme == "https":
        return None
    if parts.scheme == "http" and parts.hostname in LOOPBACK:
        return None
    return "a redirect URI is https, or http on a loopback address (127.0.0.1, [::1], localhost)"
