"""``esfis mcp``: the MCP server over stdin/stdout, one process per agent session.

The process stands where it was started (``standing``) and is one run, ended when the client
closes stdin. Nothing but protocol goes to stdout: while it serves, the SDK writes the
protocol to a private copy of fd 1 and points fd 1 itself at stderr, so a stray print (a
library's, a C extension's) lands on stderr; logs go to stderr too.
"""

import logging
import os
import sys
from typing import TYPE_CHECKING

from server.errors import EsfisError, RunNotFound
from server.mcp.opening import Opening
from server.mcp.server import build_server
from server.mcp.standing import Standing, stand
from server.settings import Settings

if TYPE_CHECKING:
    from server.facade import Esfis

log = logging.getLogger("esfis.mcp")


def _quiet() -> None:
    """Keep libraries from drawing progress bars or chattering; what remains goes to stderr."""
    for name, value in {
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TQDM_DISABLE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "TRANSFORMERS_VERBOSITY": "error",
        "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    }.items():
        os.environ.setdefault(name, value)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING,
        format="esfis mcp: %(levelname)s %(name)s: %(message)s",
    )
    logging.captureWarnings(True)


def run_stdio() -> None:
    """``esfis mcp``: serve MCP over stdin/stdout until the client closes stdin."""
    _quiet()
    settings = Settings.from_env()
    standing = stand(settings, os.environ, os.getcwd())
    if standing.problem is not None:
        log.error("%s", standing.problem.message)
    log.info("space %s, run %s", standing.space or "(none: personal only)", standing.run_id)

    def open_() -> "Esfis":
        from server.facade import open_service  # the vector stack: after the handshake

        service = open_service(settings)
        service.start_upkeep()  # as `esfis serve`: checkpoints and the trail's pruning
        return service

    opening = Opening(open_)
    try:
        build_server(opening.get, standing, warm=opening.start, approval_wait_s=settings.approval_wait_s).run("stdio")
    finally:
        _end_session(opening, standing)


def _end_session(opening: Opening, standing: Standing) -> None:
    """The client closed stdin: this process's run is over. Its trail stays (the upkeep prunes
    it in time) and the operator's run list shows it ended ``by mcp exit``; a session that took
    no step has no run to end."""
    service = opening.opened()
    if service is None:
        return
    try:
        service.operator.end_run(standing.caller(service, None).run_id, by="mcp exit")
    except RunNotFound:
        pass  # no step was taken: no run was recorded
    except EsfisError as exc:  # the space removed meanwhile, the catalog gone: the upkeep ends it later
        log.warning("could not end this session's run: %s", exc.message)
    finally:
        service.close()
