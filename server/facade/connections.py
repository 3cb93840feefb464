"""The façade's OAuth half: what esfis's authorization server (``server.http.oauth``) and the
consent page (``server.web.routes_connect``) do with connections (``server.spaces.connections``).

Strangers reach the authorization server's endpoints, so everything they may call here keeps
rows bounded and answers nothing about what exists; approving and denying are the operator's
(the consent page's session), and the AI and the subtree a connection gets are the operator's
choice alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from server.spaces.connections import Consent, Issued, Refresh, check_request_id
from server.spaces.oauth_clients import StoredClient
from server.spaces.rates import RateCount, RateKey

if TYPE_CHECKING:
    from server.facade.parts import Parts


class Connections:
    def __init__(self, parts: Parts) -> None:
        self._book = parts.connections

    # -- the authorization server's (any caller) --------------------------------------------

    def save_client(self, client_id: str, kind: str, info: dict[str, Any]) -> None:
        self._book.save_client(client_id, kind, info)

    def client(self, client_id: str) -> StoredClient | None:
        return self._book.client(client_id)

    def consented(self, client_id: str) -> bool:
        return self._book.consented(client_id)

    def ask(self, client_id: str, client_name: str, params: dict[str, Any], *, address: str) -> str:
        return self._book.ask(client_id, client_name, params, address=address)

    def code(self, code: str) -> Consent | None:
        return self._book.code(code)

    def exchange(self, code: str, *, resource: str) -> Issued | None:
        return self._book.exchange(code, resource=resource)

    def refresh(self, secret: str) -> Refresh | None:
        return self._book.refresh(secret)

    def rotate(self, secret: str) -> Issued | None:
        return self._book.rotate(secret)

    def revoke(self, secret: str, client_id: str) -> None:
        self._book.revoke(secret, client_id)

    @property
    def access_s(self) -> int:
        return self._book.access_s

    # -- the operator's (the consent page) --------------------------------------------------

    def pending(self, request_id: str) -> Consent:
        return self._book.pending(check_request_id(request_id))

    def approve(self, request_id: str, *, ai: str, space: str | None, by: str) -> tuple[Consent, str]:
        return self._book.approve(check_request_id(request_id), ai=ai, space=space, by=by)

    def deny(self, request_id: str, *, by: str) -> Consent:
        return self._book.deny(check_request_id(request_id), by=by)

    def prune(self) -> int:
        return self._book.prune()


class RateCounters:
    """The counters the interfaces' rate limits count in (``server.spaces.rates``), shared by
    every worker and server of one catalog."""

    def __init__(self, parts: Parts) -> None:
        self._book = parts.rates

    def incr(self, key: str, expiry_s: int, amount: int = 1) -> int:
        return self._book.incr(key, expiry_s, amount)

    def incr_many(self, keys: list[tuple[str, int]]) -> list[int]:
        return self._book.incr_many(keys)

    def hit_many(self, hits: list[RateKey]) -> list[RateCount]:
        return self._book.hit_many(hits)

    def get(self, key: str) -> int:
        return self._book.get(key)

    def expiry(self, key: str) -> float:
        return self._book.expiry(key)

    def clear(self, key: str) -> None:
        self._book.clear(key)

    def prune(self) -> int:
        return self._book.prune()


__all__ = ["Connections", "RateCounters", "Consent", "Issued", "Refresh", "StoredClient"]
