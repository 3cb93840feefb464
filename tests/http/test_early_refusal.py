"""``server.http.early_refusal``'s logic alone: whom it trusts as a proxy (read as uvicorn reads
``FORWARDED_ALLOW_IPS``), when an address that keeps sending is cut off, and the answer it sends.
Over a real ``esfis serve``: ``tests/http/test_rate_limits.py``."""

from __future__ import annotations

import json

import pytest

from server.http import early_refusal
from server.http.access_log import Refusals
from server.http.early_refusal import CUTOFF_REFUSALS, Persistence, _trusted, refusal_bytes


@pytest.mark.parametrize(
    "allowed, host, trusted",
    [
        ("127.0.0.1,::1", "127.0.0.1", True),
        ("127.0.0.1,::1", "::1", True),
        ("127.0.0.1,::1", "127.0.0.2", False),
        ("10.0.0.0/8", "10.200.3.4", True),
        ("10.0.0.0/8", "11.0.0.1", False),
        (("192.0.2.7", "unix:/run/esfis.sock"), "unix:/run/esfis.sock", True),
        ("*", "203.0.113.9", True),
        ("", "127.0.0.1", False),
    ],
)
def test_proxies_are_read_as_uvicorn_reads_forwarded_allow_ips(allowed, host, trusted):
    assert (host in _trusted(allowed)) is trusted


def test_an_address_is_cut_off_only_past_its_refusals_and_only_for_its_window(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(early_refusal.time, "monotonic", lambda: now[0])
    seen = Persistence()
    for _ in range(CUTOFF_REFUSALS - 1):
        seen.refused("198.51.100.7")
    assert seen.cut_off("198.51.100.7") is None  # one short
    seen.refused("198.51.100.7")
    assert seen.cut_off("198.51.100.7") == 60 and seen.cut_off("198.51.100.8") is None
    now[0] += 59.5
    assert seen.cut_off("198.51.100.7") == 1
    now[0] += 1
    assert seen.cut_off("198.51.100.7") is None  # its window is over
    seen.refused("198.51.100.7")
    assert seen.cut_off("198.51.100.7") is None  # a new window counts from one


def test_the_answer_is_a_whole_429_in_the_error_shape_and_a_proxy_is_never_refused(monkeypatch):
    seen = Persistence()
    for _ in range(CUTOFF_REFUSALS):
        seen.refused("198.51.100.7")
    monkeypatch.setattr(early_refusal, "persistence", seen)
    monkeypatch.setattr(early_refusal, "_watched", [])
    answer = refusal_bytes("198.51.100.7", _trusted("127.0.0.1"))
    assert answer is not None
    head, body = answer.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 429 Too Many Requests"
    assert "connection: close" in lines and f"content-length: {len(body)}" in lines
    assert any(line.startswith("retry-after: ") and int(line.split(": ")[1]) >= 1 for line in lines)
    assert json.loads(body)["error"]["code"] == "too_many_requests"
    assert refusal_bytes("198.51.100.7", _trusted("198.51.100.0/24")) is None  # a proxy speaks for many
    assert refusal_bytes("198.51.100.9", _trusted("127.0.0.1")) is None  # not cut off


def test_the_addresses_counted_are_bounded_and_the_first_window_to_end_goes_first(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(early_refusal.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(early_refusal, "CUTOFF_KEPT", 3)
    seen = Persistence()
    for address in ("a", "b", "c"):
        for _ in range(CUTOFF_REFUSALS):
            seen.refused(address)
        now[0] += 1
    now[0] += 58  # a's window is over: refused again, it starts a new one, last
    seen.refused("a")
    seen.refused("d")  # full: b, the first to end, is dropped
    assert list(seen._windows) == ["c", "a", "d"]
    assert seen.cut_off("b") is None and seen.cut_off("c") == 1 and seen.cut_off("a") is None


class _Transport:
    """What a refused connection's protocol touches of its transport."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def _refused(loop) -> tuple[early_refusal.RefusingProtocol, _Transport]:
    protocol = early_refusal.RefusingProtocol.__new__(early_refusal.RefusingProtocol)
    transport = _Transport()
    protocol._refusal, protocol.transport, protocol.loop = b"HTTP/1.1 429 ...", transport, loop
    return protocol, transport


def test_a_refusal_is_held_before_it_is_sent_and_past_the_bound_sent_at_once(monkeypatch):
    """A tarpit: a refused request's answer waits ``HOLD_S`` (a caller looping on its refusals
    sends a few a second), past the silent-peer close and a peer's own half-close; at most
    ``HOLD_MOST`` are held at once, the next one answered as it comes; a caller that hangs up
    while held frees its place."""
    import asyncio

    monkeypatch.setattr(early_refusal, "HOLD_S", 0.05)
    monkeypatch.setattr(early_refusal, "HOLD_MOST", 2)
    monkeypatch.setattr(early_refusal, "_summary", Refusals())

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        (first, one), (second, two), (third, three) = (_refused(loop) for _ in range(3))
        first._silence = loop.call_later(0.01, one.close)  # its silent-peer close, armed as it connected
        first.data_received(b"POST /v1/recall HTTP/1.1\r\n")
        first.data_received(b"\r\n{}")  # the same request's rest: still one answer
        assert first.eof_received() is True  # it closed its side: the held answer still goes out
        assert third.eof_received() is None  # nothing asked, nothing held: closed
        second.data_received(b"GET / HTTP/1.1\r\n\r\n")
        assert one.sent == [] and two.sent == [] and early_refusal.RefusingProtocol.holding == 2
        third.data_received(b"GET / HTTP/1.1\r\n\r\n")
        assert three.sent == [b"HTTP/1.1 429 ..."] and three.closed  # past the bound: at once
        second.connection_lost(None)  # hung up while held
        assert early_refusal.RefusingProtocol.holding == 1
        await asyncio.sleep(0.1)
        assert one.sent == [b"HTTP/1.1 429 ..."] and one.closed and two.sent == []
        assert early_refusal.RefusingProtocol.holding == 0

    asyncio.run(scenario())
