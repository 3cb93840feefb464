"""Client ID Metadata Documents: a client whose id is an https URL describes itself there.

The MCP authorization specification (2025-11-25) lets a host skip registration: its client id
is the URL of a JSON document naming it and its redirect URIs. esfis reads that URL when the
id is first shown (and again after ``DOCUMENT_S``), and the document must be what it claims:

- the URL is https, with a path, no user, no fragment (plain http only for a loopback URL on a
  server that is itself on loopback: a test, a host on the same machine);
- the URL's host resolves to public addresses only (never loopback, private, link-local,
  multicast or reserved ones, unless the server is on loopback), an IPv4 address inside an
  IPv6 one judged as itself (NAT64, 6to4, Teredo, IPv4-compatible and -mapped): a stranger
  cannot make the server read its own network. The connection goes to the address that was
  checked, not to a second look-up's answer (the host name still names the TLS certificate and
  the ``Host`` header), so a name that resolves again differently cannot rebind it; esfis reads
  with no redirects, no cookies, and no credentials;
- at most ``MAX_BYTES``, all of it (connection, headers and body) within ``TIMEOUT_S``: a
  document sent a byte at a time is cut off there. JSON, with ``client_id`` equal to the URL and
  at least one redirect URI, each https or loopback http; no client secret (such a client is
  public, and proves itself with PKCE).
"""

from __future__ import annotations

import ipaddress
import json
import socket
from urllib.parse import urlsplit

import anyio
import httpx

from server.http.oauth.address import LOOPBACK, OAuthSite
from server.http.oauth.redirects import redirect_refusal

MAX_BYTES = 5 * 1024
TIMEOUT_S = 5.0


class DocumentError(Exception):
    """Why a client id URL cannot be taken (the message names it)."""


def is_document_id(client_id: str) -> bool:
    return client_id.startswith(("https://", "http://"))


def url_refusal(url: str, site: OAuthSite) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError:
        return "the client id is not a well-formed URL"
    if len(url) > 2048:
        return "the client id URL is over 2048 characters"
    loopback = parts.hostname in LOOPBACK
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback and site.loopback):
        return "a client id URL must be https (plain http only on loopback, for a server on loopback)"
    if not parts.hostname or parts.username or parts.password or parts.fragment:
        return "a client id URL names a host, and has no user, password or fragment"
    if parts.path in ("", "/"):
        return "a client id URL must have a path (RFC: the document is not the site's root)"
    return None


async def _addresses(host: str, port: int) -> list[str]:
    try:
        found = await anyio.to_thread.run_sync(lambda: socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
    except OSError as exc:
        raise DocumentError(f"the client id URL's host does not resolve: {exc.strerror or exc}") from None
    return sorted({str(info[4][0]) for info in found})


NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries to the IPv4 network: mapped (``::ffff:a.b.c.d``),
    6to4 (``2002::/16``), Teredo (``2001::/32``: its server and client), NAT64 (``64:ff9b::/96``,
    ``64:ff9b:1::/48``) and the deprecated IPv4-compatible form (``::a.b.c.d``)."""
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)
    if any(ip in net for net in NAT64) or (ip in IPV4_COMPATIBLE and int(ip) > 1):
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    return []


def public(address: str) -> bool:
    """A unicast address of the public Internet, and so is every IPv4 address it carries."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address):
        inner = embedded_ipv4(ip)
        if inner:
            return all(v4.is_global and not v4.is_multicast for v4 in inner)
    return ip.is_global and not ip.is_multicast


def _pinned(url: str, address: str) -> tuple[str, dict[str, str], dict[str, str]]:
    """The URL aimed at ``address`` itself, with the ``Host`` header and the TLS name it would
    have had: the request reaches the address that was checked."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    literal = f"[{address}]" if ":" in address else address
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=netloc).geturl(), {"Host": host}, {"sni_hostname": parts.hostname}


async def read_document(url: str, site: OAuthSite) -> dict:
    """The client's metadata as its document states it, checked; else ``DocumentError``."""
    refusal = url_refusal(url, site)
    if refusal is not None:
        raise DocumentError(refusal)
    parts = urlsplit(url)
    assert parts.hostname is not None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    addresses = await _addresses(parts.hostname, port)
    for address in addresses:
        if not public(address) and not (site.loopback and ipaddress.ip_address(address).is_loopback):
            raise DocumentError("the client id URL's host is not a public address: esfis does not read it")
    target, headers, extensions = _pinned(url, addresses[0])
    try:
        # One deadline for all of it: httpx's timeout bounds each read, so a document sent a
        # byte at a time would otherwise hold this request for as long as its sender liked.
        with anyio.fail_after(TIMEOUT_S):
            async with (
                httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False, trust_env=False) as client,
                client.stream(
                    "GET", target, headers={"Accept": "application/json", **headers}, extensions=extensions
                ) as response,
            ):
                if response.status_code != 200:
                    raise DocumentError(f"the client id URL answered {response.status_code}, not 200")
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_BYTES:
                        raise DocumentError(f"the client metadata document is over {MAX_BYTES} bytes")
    except TimeoutError:
        raise DocumentError(f"the client id URL did not give its whole document within {TIMEOUT_S:g} s") from None
    except httpx.HTTPError as exc:
        raise DocumentError(f"the client id URL could not be read: {type(exc).__name__}") from None
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise DocumentError("the client metadata document is not JSON") from None
    return checked(document, url, site)


def checked(document: object, url: str, site: OAuthSite) -> dict:
    if not isinstance(document, dict):
        raise DocumentError("the client metadata document is not a JSON object")
    if document.get("client_id") != url:
        raise DocumentError("the client metadata document's client_id is not its own URL")
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise DocumentError("the client metadata document lists no redirect_uris")
    for uri in uris:
        refusal = redirect_refusal(uri)
        if refusal is not None:
            raise DocumentError(f"the client metadata document's redirect URI is refused: {refusal}")
    method = document.get("token_endpoint_auth_method", "none")
    if method != "none" or "client_secret" in document:
        raise DocumentError("a client known by its metadata document is public: token_endpoint_auth_method none")
    name = document.get("client_name")
    return {
        "client_id": url,
        "client_name": name[:200] if isinstance(name, str) and name.strip() else None,
        "redirect_uris": uris,
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    }
