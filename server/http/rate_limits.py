"""Rate limits on everything a stranger or a runaway agent can call, shared by every worker and
server: the ``limits`` library's fixed windows, counted in the catalog (``server.spaces.rates``
through the façade), answered 429 with ``Retry-After``.

| limit | counts | default | setting |
| --- | --- | --- | --- |
| per token | requests of one token to ``/v1`` and ``/mcp`` | 1200/minute | ``ESFIS_RATE_TOKEN`` |
| per address | requests from one address to ``/v1``, ``/mcp`` and ``/metrics``, tokens or none | 2400/minute | ``ESFIS_RATE_ADDRESS`` |
| runs | run tokens one token opens (``POST /v1/runs``) | 600/minute | ``ESFIS_RATE_RUNS`` |
| forgets | forgets one token asks for (``DELETE /v1/memories/…``, MCP's ``forget``) | 120/minute | ``ESFIS_RATE_FORGETS`` |
| OAuth | requests from one address to ``/register``, ``/authorize``, ``/token``, ``/revoke`` | 60/minute | ``ESFIS_RATE_OAUTH`` |
| sign-in | failed operator sign-ins from one address (the settings pages, the OAuth consent) | 10/15minutes | ``ESFIS_RATE_SIGN_IN`` |

Each setting takes the ``limits`` notation (``100/minute``, ``10/15minutes``, ``5/second``) or
``off``. The defaults are far above what an agent does (a recall or a write every 50 ms for a
minute); sign-in counts only failures, and once they are spent even the right token waits for
the window, so guessing gets no faster by mixing in a good guess. A forget has a limit of its
own because it costs what the catalog weighs, not what it removes (``Catalog.scrub`` reads
every page: tens of ms at 100,000 memories), so a token's forgets one after the other could
keep a core busy within the per-token limit. What takes no token and reads no catalog (``/healthz``, the
discovery documents, ``/docs``, a page's static files) is not counted: a count is a catalog
write, dearer than the answer it would guard. An address is the connection's
peer, or what a proxy forwards when uvicorn trusts it (``--forwarded-allow-ips``; by default
127.0.0.1 only). A counter's key names the limit and a token id or an address, never a secret.

The limits counted per address are capped in the catalog (``server.spaces.rates.MAX_ROWS``):
with the counters' table full, an address that has no counter yet is counted in its limit's
overflow key, one count for all such newcomers. A worker refuses a caller whose window it saw
spent from memory, on the event loop (``Limiter.refused_in_memory``, asked by the gate before
any thread hop or body read), so a hammering caller costs each worker a dict read a request.

A worker claims a limit's hits in leases (``lease``: a 64th of the limit, at most 16, hit by hit
under 128 a window): one catalog write counts the lease, and the hits it holds pass with no
write until it is used up or its window ends (a request's count was the catalog write every
request paid, about half a millisecond of its time). What a lease claims counts at once, so a
limit is never exceeded; a caller may be refused early by what other workers claimed and have
not used yet, at most 15 hits a worker a window. A newcomer counted in an overflow key claims
one hit, as before.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from limits import RateLimitItem, parse
from limits.storage import Storage
from limits.strategies import FixedWindowRateLimiter

from server.errors import InvalidInput, TooManyRequests
from server.facade import RateCount, RateKey

if TYPE_CHECKING:
    from server.facade import Esfis

DEFAULTS = {
    "token": "1200/minute",
    "address": "2400/minute",
    "runs": "600/minute",
    "forgets": "120/minute",
    "oauth": "60/minute",
    "sign_in": "10/15minutes",
}
# The limits that count an address: a stranger's to multiply, so their counters are capped.
BY_ADDRESS = ("address", "oauth", "sign_in")
OVERFLOW = "(overflow)"  # the who of a capped limit's overflow key: never an address
SAID = {
    "token": "this token made too many requests",
    "address": "too many requests from this address",
    "runs": "this token opened too many run tokens",
    "forgets": "this token asked for too many forgets",
    "oauth": "too many authorization requests from this address",
    "sign_in": "too many failed sign-ins from this address",
}


class CatalogStorage(Storage):
    """``limits``' storage over the catalog's counters: every worker and server counts together."""

    STORAGE_SCHEME = ["esfis-catalog"]

    def __init__(self, service: Callable[[], Esfis]) -> None:
        super().__init__()
        self.service = service

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        return ()

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        return self.service().rates.incr(key, expiry, amount)

    def hit_many(self, hits: list[RateKey]) -> list[RateCount]:
        return self.service().rates.hit_many(hits)

    def get(self, key: str) -> int:
        return self.service().rates.get(key)

    def get_expiry(self, key: str) -> float:
        return self.service().rates.expiry(key)

    def check(self) -> bool:
        return True

    def reset(self) -> int | None:
        return None

    def clear(self, key: str) -> None:
        self.service().rates.clear(key)


@dataclass(frozen=True)
class RateLimits:
    """The limits in force (None: off), read from the environment once, at start."""

    token: RateLimitItem | None
    address: RateLimitItem | None
    runs: RateLimitItem | None
    forgets: RateLimitItem | None
    oauth: RateLimitItem | None
    sign_in: RateLimitItem | None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> RateLimits:
        return cls(**{name: _item(environ, name) for name in DEFAULTS})


def _item(environ: Mapping[str, str], name: str) -> RateLimitItem | None:
    variable = f"ESFIS_RATE_{name.upper()}"
    value = (environ.get(variable) or DEFAULTS[name]).strip()
    if value.lower() == "off":
        return None
    try:
        return parse(value)
    except ValueError:
        raise InvalidInput(
            f"{variable} must be a rate such as 100/minute or 10/15minutes, or off; not {value[:40]!r}",
            field=variable,
        ) from None


SPENT_KEPT = 10_000  # spent windows a worker remembers before it drops those that ended
MAX_LEASE = 16  # the most hits of one key a worker claims in one catalog write


class Limiter:
    """Hits and tests the limits; each call is one catalog round trip (run it off the loop),
    except a hit on a window this worker already saw spent: refused from memory until the
    window ends, with no catalog write. In a fixed window a count past the limit stays past it,
    so skipping the count changes no answer, and a caller at its limit, hammering, costs each
    worker one catalog trip a window instead of one a request (the hostile neighbour of
    ``benchmarks/test_hostile_neighbour.py``)."""

    def __init__(self, service: Callable[[], Esfis], limits: RateLimits) -> None:
        self.limits = limits
        self.storage = CatalogStorage(service)
        self.strategy = FixedWindowRateLimiter(self.storage)
        self._spent: dict[str, float] = {}  # a counter's key → when its spent window ends (epoch s)
        self._spent_lock = threading.Lock()  # hits run on the gate's threads
        self._credit: dict[str, tuple[int, float]] = {}  # key → (hits claimed, not yet used; window end)
        self._credit_lock = threading.Lock()

    def hit(self, name: str, who: str) -> None:
        """Counts one call of ``who`` under the limit ``name``; ``TooManyRequests`` past it."""
        self.hit_all([(name, who)])

    def hit_all(self, hits: list[tuple[str, str]]) -> None:
        """One call of each (limit, who), counted in one catalog statement (a request's address
        and token); ``TooManyRequests`` for the first of them past its limit. Counted as the
        library's fixed window counts (``FixedWindowRateLimiter.hit``: the count after the
        hit, at most the limit's amount), under the same keys."""
        active = [(name, who, item) for name, who in hits if (item := getattr(self.limits, name)) is not None]
        if not active:
            return
        now = time.time()
        for name, who, item in active:
            ends = self._spent.get(item.key_for(name, who))
            if ends is not None and ends > now:
                raise _refused(name, item, ends)
        with self._credit_lock:  # hits this worker claimed already in the window: no catalog write
            claims = []
            for name, who, item in active:
                key = item.key_for(name, who)
                left, ends = self._credit.get(key, (0, 0.0))
                if left > 0 and ends > now:
                    self._credit[key] = (left - 1, ends)
                else:
                    claims.append((name, item, key))
        if not claims:
            return
        with self._credit_lock:
            if len(self._credit) >= SPENT_KEPT:
                self._credit = {k: v for k, v in self._credit.items() if v[1] > now}
            # Leases while this worker has room to remember them; hit by hit past that (a flood
            # of addresses), so no caller's claim is lost for want of a place to keep it.
            room = len(self._credit) < SPENT_KEPT
        leases = [lease(item) if room else 1 for _, item, _ in claims]
        counted = self.storage.hit_many(
            [
                RateKey(key, item.get_expiry(), _overflow(name, item), amount)
                for (name, item, key), amount in zip(claims, leases, strict=True)
            ]
        )
        for (name, item, key), amount, hit in zip(claims, leases, counted, strict=True):
            claimed = amount if hit.key == key else 1  # a newcomer in the overflow key claims one
            # The claim took the count from hit.count - claimed to hit.count: the hits it holds
            # within the limit, this one first.
            allowed = min(claimed, item.amount - (hit.count - claimed))
            if allowed < 1:
                self._remember_spent(key, hit.ends)
                raise _refused(name, item, hit.ends)
            if allowed > 1:
                with self._credit_lock:
                    self._credit[key] = (allowed - 1, hit.ends)

    def refused_in_memory(self, name: str, who: str) -> TooManyRequests | None:
        """The refusal a hit of ``who`` under ``name`` gets from this worker's memory of spent
        windows, else None: a dict read, no catalog, no lock, so the gate asks it on the event
        loop before any thread hop or body read."""
        item: RateLimitItem | None = getattr(self.limits, name)
        if item is None:
            return None
        ends = self._spent.get(item.key_for(name, who))
        if ends is None or ends <= time.time():
            return None
        return _refused(name, item, ends)

    def test(self, name: str, who: str) -> None:
        """``TooManyRequests`` when ``who`` has no room left under ``name``; counts nothing."""
        item: RateLimitItem | None = getattr(self.limits, name)
        if item is not None and not self.strategy.test(item, name, who):
            raise self._refusal(name, item, who)

    def _refusal(self, name: str, item: RateLimitItem, who: str) -> TooManyRequests:
        return _refused(name, item, self.strategy.get_window_stats(item, name, who).reset_time)

    def _remember_spent(self, key: str, ends: float) -> None:
        with self._spent_lock:
            if len(self._spent) >= SPENT_KEPT:
                now = time.time()
                self._spent = {k: v for k, v in self._spent.items() if v > now}
            self._spent[key] = ends


def lease(item: RateLimitItem) -> int:
    """How many hits a worker claims in one catalog write: a 64th of the limit, at most
    ``MAX_LEASE``, one under 128 a window (a small limit is counted hit by hit, exactly)."""
    return max(1, min(MAX_LEASE, item.amount // 64))


def _overflow(name: str, item: RateLimitItem) -> str | None:
    """The key a newcomer under ``name`` is counted in when the counters are full (None: never capped)."""
    return item.key_for(name, OVERFLOW) if name in BY_ADDRESS else None


def _refused(name: str, item: RateLimitItem, reset: float) -> TooManyRequests:
    wait = max(1, math.ceil(reset - time.time()))
    refusal = TooManyRequests(f"{SAID[name]} ({item}): try again in {wait} s")
    refusal.retry_after = wait
    return refusal
