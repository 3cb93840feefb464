"""A part of esfis loaded at its first use (the MCP SDK behind ``/mcp``, the OAuth endpoints
and ``esfis mcp``), refused as what it is when it fails to load.

A broken or partial install (a package removed, a wheel half copied over a live home) shows at
the first call that needs the part, not at start: it is refused ``NotInstalled`` (over HTTP 503
``not_installed`` with ``Retry-After``; the CLI one line and its exit status), never a 500 or a
traceback; a server's log names the part and the error once a minute at most, and its next
request tries the load again, so it recovers by itself once the install is whole.
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


def loading(part: str, build: Callable[[], T], *, logged: bool = True) -> Callable[[], T]:
    """``build``, its failure to import (or to be built from what it imported) said as
    ``NotInstalled`` naming ``part``; ``logged``: in the server's log too (a server's operator
    reads the log, a CLI's reads the error)."""

    def load() -> T:
        try:
            return build()
        except (ImportError, SyntaxError) as exc:  # what a broken install raises (a module missing or cut)
            cause = f"{type(exc).__name__}: {exc}"
            now = time.monotonic()
            if logged and now - _logged.get(part, -LOG_EVERY_S) >= LOG_EVERY_S:
                _logged[part] = now
                log.error("%s is unavailable: a part of esfis failed to load (%s); reinstall esfis", part, cause)
            raise NotInstalled(
                f"{part} is unavailable: a part of esfis failed to load ({cause}); its install needs repair"
            ) from None

    return load
