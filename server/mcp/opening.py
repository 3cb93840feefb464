"""The service behind an MCP server, opened and warmed in a background thread.

Start-up stays light: ``initialize`` and ``tools/list`` need neither the vector stack nor the
model, so the service opens and the model loads in a background thread once the handshake has
been answered, and the first call that needs them waits for them.
"""

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from server.errors import EsfisError, StoreUnavailable

if TYPE_CHECKING:
    from server.facade import Esfis

log = logging.getLogger("esfis.mcp")


class Opening:
    """The service, opened and warmed in a background thread; ``get`` waits for it.

    Opening imports the vector stack (~0.2 s) and warming imports torch (~10 s), so neither runs
    before the handshake has been answered; a call that needs the service starts it if nothing
    else has, and waits.
    """

    def __init__(self, open_service: Callable[[], "Esfis"]) -> None:
        self._open = open_service
        self._lock = threading.Lock()
        self._started = False
        self._opened = threading.Event()
        self._service: Esfis | None = None
        self._error: EsfisError | None = None

    def start(self) -> None:
        """Begin opening (idempotent)."""
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._run, name="esfis-open", daemon=True).start()

    def _run(self) -> None:
        try:
            self._service = self._open()
        except EsfisError as exc:
            self._error = exc
        except Exception as exc:  # e.g. an OSError from the data directory: still the agent's answer
            log.exception("could not open the esfis service")
            self._error = StoreUnavailable(f"could not open the esfis store: {exc}")
        finally:
            self._opened.set()
        if self._error is not None:
            log.error("%s", self._error.message)
        if self._service is not None:
            _warm_up(self._service)

    def opened(self) -> "Esfis | None":
        """The service if it has opened; None if it never started or is still opening."""
        return self._service if self._opened.is_set() else None

    def get(self) -> "Esfis":
        self.start()
        self._opened.wait()
        if self._error is not None:
            raise self._error
        assert self._service is not None
        return self._service


def _warm_up(service: "Esfis") -> None:
    """Load the model (and the store's engine) now, so the first recall does not pay for it."""
    try:
        service.warm_up()
        log.info("model loaded")
    except Exception as exc:  # the first call that needs the model reports it as a tool error
        log.warning("could not load the model at start: %s", exc)
