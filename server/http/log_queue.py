"""The server's log lines written by a thread of their own, not by the request that logs them.

The access log writes a line per request (``server.http.access_log``); written where it is
logged, the handler's lock, formatting and write ran on the event loop, a few tenths of a
millisecond of every request's path in the profile of a real ``esfis serve``
(benchmarks/profile_http.py). Behind a ``QueueHandler`` the loop only enqueues the record; a
``QueueListener`` thread hands it to the handlers uvicorn's logging configuration gave the
``esfis`` logger, in order. Records are formatted by those handlers, as before.
"""

from __future__ import annotations

import atexit
import logging
import queue
from logging.handlers import QueueHandler, QueueListener

_listener: QueueListener | None = None


def write_logs_off_the_loop(name: str = "esfis") -> None:
    """Once per process, after logging is configured: ``name``'s handlers behind a queue."""
    global _listener
    logger = logging.getLogger(name)
    if _listener is not None or not logger.handlers:
        return
    handlers = list(logger.handlers)
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    for handler in handlers:
        logger.removeHandler(handler)
    logger.addHandler(QueueHandler(records))
    _listener = QueueListener(records, *handlers, respect_handler_level=True)
    _listener.start()
    atexit.register(_listener.stop)  # what is queued at exit is written
