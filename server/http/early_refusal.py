"""A connection from an address past its rate limit, refused as it opens (``esfis serve``'s HTTP
protocol: uvicorn's httptools protocol with one check in front).

A caller that keeps sending past its limit is refused with 429, and each refusal through the app
costs the server a new connection (a 429 closes its own), HTTP parsing, the middlewares and the
gate: about 300 µs of CPU (ad hoc, two workers). Here, as a connection is made, its peer is
looked up in this worker's memory: an address whose window it saw spent (the memory the gate
reads, ``Limiter.refused_in_memory``), or one that kept sending after ``CUTOFF_REFUSALS`` 429s
in a window (``Persistence``: a token past its limit is refused from memory and no longer counted
against its address, so the address window alone would not tell). Such a connection answers its
first request with a ready-made 429 (``Retry-After``, ``Connection: close``, the error shape of
every other answer) and closes, without parsing the request or entering the app: about 140 µs a
refusal in the same flood. A peer that sends nothing is closed after ``SILENT_S``.

That answer is held ``HOLD_S`` before it is sent (a tarpit): a caller that loops on its
refusals, however many connections it keeps, sends a few requests a second a connection instead
of thousands, and a held connection costs the worker a timer, not CPU. A caller that honours
``Retry-After`` loses nothing: it could not be served sooner. ``HOLD_MOST`` bounds the
connections one worker holds at once (each is a file descriptor); past it, a refusal is sent at
once, as before.

Only a peer that is the caller is refused this way: a trusted proxy (uvicorn's
``FORWARDED_ALLOW_IPS``, by default the loopback) speaks for many callers, told apart by the
address it forwards with each request, so its connections always reach the gate, which refuses
the forwarded address alone. Refusals here are counted in ``/metrics``
(``esfis_refusals_total{code="too_many_requests"}``) and logged summed, a line a second
(``- (connection) 429 ×N in 1.0s``), as the access log sums the gate's.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import time
from functools import lru_cache
from typing import Protocol

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from server.http.access_log import Refusals
from server.http.rate_limits import Limiter
from server.metrics import count_refusal

PROTOCOL = "server.http.early_refusal:RefusingProtocol"  # uvicorn's ``http`` setting
SILENT_S = 5.0  # a refused connection that sends no request is closed after this long
CUTOFF_REFUSALS = 100  # 429s answered to one address in a window, past which it is cut off (Persistence)
CUTOFF_WINDOW_S = 60.0
CUTOFF_KEPT = 10_000  # addresses whose refusals a worker counts at once
HOLD_S = 1.0  # a refusal at the connection is sent this long after its request came
HOLD_MOST = 512  # refusals one worker holds at once; past them, one is sent as its request comes
_watched: list[Limiter] = []  # the serving app's limiter (one app a worker process)
_summary = Refusals()


class Proxies(Protocol):
    def __contains__(self, host: str, /) -> bool: ...


class Persistence:
    """Addresses that keep sending after being refused: ``CUTOFF_REFUSALS`` 429s answered to one
    address within ``CUTOFF_WINDOW_S`` cut it off for the rest of that window (a caller past its
    token's limit is refused from memory, never counted against its address again, so its
    address window alone would not say it floods). Bounded: ``CUTOFF_KEPT`` addresses at most,
    the oldest window dropped first, in constant time (a window is put last when it starts and
    all last as long, so the dict's order is the windows' order of ending): a caller with many
    addresses makes no refusal dearer."""

    def __init__(self) -> None:
        self._windows: dict[str, tuple[float, int]] = {}  # address → (its window's end, 429s in it)

    def refused(self, address: str) -> None:
        now = time.monotonic()
        ends, count = self._windows.get(address, (0.0, 0))
        if ends <= now:
            self._windows.pop(address, None)  # a new window goes last
            if len(self._windows) >= CUTOFF_KEPT:
                del self._windows[next(iter(self._windows))]  # the first to end
            ends, count = now + CUTOFF_WINDOW_S, 0
        self._windows[address] = (ends, count + 1)

    def cut_off(self, address: str) -> int | None:
        """Seconds until ``address`` is served again, when it is cut off."""
        ends, count = self._windows.get(address, (0.0, 0))
        left = ends - time.monotonic()
        return max(1, math.ceil(left)) if count >= CUTOFF_REFUSALS and left > 0 else None


persistence = Persistence()


def note_refused(address: str) -> None:
    """A 429 was answered to ``address`` (the access log tells every one, on the event loop)."""
    persistence.refused(address)


def watch(limiter: Limiter) -> None:
    """Make ``limiter``'s memory of spent windows the one new connections are checked against."""
    _watched[:] = [limiter]


def refusal_bytes(peer: str, proxies: Proxies) -> bytes | None:
    """The whole HTTP answer refusing a connection from ``peer``, or None to serve it; a peer
    among ``proxies`` (trusted to forward its callers' addresses) is always served."""
    spent = _watched[0].refused_in_memory("address", peer) if _watched else None
    if spent is not None:
        message, wait = spent.message, spent.retry_after
    elif (left := persistence.cut_off(peer)) is not None:
        message, wait = f"this address kept sending past its limits: try again in {left} s", left
    else:
        return None
    if peer in proxies:
        return None
    body = json.dumps({"error": {"code": "too_many_requests", "message": message}}).encode()
    head = (
        "HTTP/1.1 429 Too Many Requests\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        f"retry-after: {wait}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


class RefusingProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, refusing a peer past its address limit as its connection
    opens (see the module)."""

    _refusal: bytes | None = None
    _silence: asyncio.TimerHandle | None = None
    _held: asyncio.TimerHandle | None = None
    holding = 0  # refusals this worker holds now, every connection together

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = transport.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple) and peer else None
        refusal = None
        if host is not None:
            given = self.config.forwarded_allow_ips
            allowed = given if isinstance(given, str) else tuple(given)
            refusal = refusal_bytes(host, _trusted(allowed) if self.config.proxy_headers else ())
        if refusal is None:
            super().connection_made(transport)
            return
        self._refusal = refusal
        self.transport = transport
        self._silence = self.loop.call_later(SILENT_S, transport.close)

    def data_received(self, data: bytes) -> None:
        if self._refusal is None:
            super().data_received(data)
            return
        if self._held is not None or self.transport.is_closing():
            return  # the request's later bytes: its answer is on its way
        if self._silence is not None:
            self._silence.cancel()  # it spoke: its answer is due, not the silent peer's close
            self._silence = None
        if RefusingProtocol.holding >= HOLD_MOST:
            self._answer()  # answered after its request came, so none is lost to a reset
            return
        RefusingProtocol.holding += 1
        self._held = self.loop.call_later(HOLD_S, self._answer)

    def eof_received(self) -> bool | None:  # type: ignore[override]  # asyncio's contract: True keeps it open
        if self._refusal is None:
            return super().eof_received()
        # A peer that sent its request and closed its side (HTTP/1.0 tools, `nc -N`) still gets
        # the held answer: the transport stays open for it, and ``_answer`` closes it.
        return True if self._held is not None else None

    def _answer(self) -> None:
        self._release()
        if self._refusal is not None and not self.transport.is_closing():
            self.transport.write(self._refusal)
            self.transport.close()
            count_refusal("too_many_requests")
            _summary.add("-", "(connection)")

    def _release(self) -> None:
        if self._held is not None:
            self._held.cancel()
            self._held = None
            RefusingProtocol.holding -= 1

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refusal is None:
            super().connection_lost(exc)
            return
        self._release()  # a caller that gave up waiting
        if self._silence is not None:
            self._silence.cancel()


@lru_cache(maxsize=4)
def _trusted(allowed: str | tuple[str, ...]) -> Proxies:
    """``FORWARDED_ALLOW_IPS`` read as uvicorn reads it (a comma-separated string or a list of
    addresses, networks, ``*``, or other literals), in esfis's own code: uvicorn's reader is private."""
    return TrustedProxies([h.strip() for h in allowed.split(",")] if isinstance(allowed, str) else list(allowed))


class TrustedProxies:
    """The peers trusted to forward their callers' addresses (``FORWARDED_ALLOW_IPS``)."""

    def __init__(self, hosts: list[str]) -> None:
        self.everyone = "*" in hosts
        self.literals: set[str] = set()
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for host in filter(None, hosts):
            try:
                self.networks.append(ipaddress.ip_network(host, strict=False))
            except ValueError:
                self.literals.add(host)

    def __contains__(self, host: str, /) -> bool:
        if self.everyone or host in self.literals:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self.networks)
