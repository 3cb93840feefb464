"""A part of the server loaded at its first use (the MCP SDK behind ``/mcp`` and the OAuth
endpoints), refused as what it is when it fails to load.

A broken or partial install (a package removed, a wheel half copied over a live home) shows at
the first request that needs the part, not at start: such a request is answered 503
``not_installed`` with ``Retry-After`` (never a 500 and a traceback), the server's log names the
part and the error once a minute at most, and the next request tries the load again, so the
server recovers by itself once the install is whole.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from server.errors import NotInstalled

log = logging.getLogger("esfis.serve")
T = TypeVar("T")
LOG_EVERY_S = 60.0
_logged: dict[str, float] = {}  # a part's name → when its failure was last logged


def loading(part: str, build: Callable[[], T]) -> Callable[[], T]:
    """``build``, its failure to import (or to be built from what it imported) said as
    ``NotInstalled`` naming ``part``."""

    def load() -> T:
        try:
            return build()
        except (ImportError, AttributeError, SyntaxError) as exc:  # what a broken install raises
            cause = f"{type(exc).__name__}: {exc}"
            now = time.monotonic()
            if now - _logged.get(part, -LOG_EVERY_S) >= LOG_EVERY_S:
                _logged[part] = now
                log.error("%s is unavailable: a part of esfis failed to load (%s); reinstall esfis", part, cause)
            raise NotInstalled(
                f"{part} is unavailable on this server: a part of esfis failed to load ({cause}); "
                "the operator's install needs repair"
            ) from None

    return load
