"""When a call is sent again, and how long a held call's poll waits between looks.

- A **safe** call (a read: get, recall, open_context, an approval's check) is sent again after a
  429 (when the server's Retry-After is at most ``max_wait``), a 503, or a connection that broke,
  up to ``attempts`` sends in all, waiting Retry-After or a growing backoff in between.
- Any call, a write included, is sent again when its connection was never made (nothing reached
  the server).
- Nothing else is repeated: a write whose answer was lost might have been applied, and esfis has
  no idempotency key to make a second send harmless. The error goes to the caller, with
  ``retry_after`` on ``TooManyRequests``.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from esfis_client.errors import retry_after

NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
BROKEN = (httpx.TransportError,)


@dataclass(frozen=True)
class Retries:
    attempts: int = 3  # sends in all, the first included
    backoff: float = 0.25  # seconds before the second send; doubled each time
    max_wait: float = 30.0  # the longest Retry-After honoured; a longer one is raised at once

    def after_answer(self, *, safe: bool, attempt: int, response: httpx.Response) -> float | None:
        """Seconds to wait before sending again, or None: the answer stands."""
        if not safe or attempt >= self.attempts:
            return None
        if response.status_code == 429:
            wait = retry_after(response)
            return wait if wait <= self.max_wait else None
        if response.status_code == 503:
            return max(retry_after(response) if "Retry-After" in response.headers else 0.0, self._backoff(attempt))
        return None

    def after_error(self, *, safe: bool, attempt: int, error: Exception) -> float | None:
        """Seconds to wait before sending again after a transport error, or None: raise it."""
        if attempt >= self.attempts:
            return None
        if isinstance(error, NEVER_SENT) or (safe and isinstance(error, BROKEN)):
            return self._backoff(attempt)
        return None

    def _backoff(self, attempt: int) -> float:
        return self.backoff * 2 ** (attempt - 1)


NO_RETRIES = Retries(attempts=1)


def poll_delays(first: float = 0.1, longest: float = 5.0):
    """A held call's poll: 0.1 s, then doubling to one look every 5 s."""
    delay = first
    while True:
        yield delay
        delay = min(longest, delay * 2)
