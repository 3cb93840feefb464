"""What the commands stand on: the service (opened per command, in a ``with``), the caller an
agent's command acts as, a person at the terminal, JSON and progress bars on stderr."""

from __future__ import annotations

import json
import os
import sys
from argparse import Namespace
from types import ModuleType
from typing import TYPE_CHECKING, Any

from server.cli.registry import arg
from server.models import ApprovalRequest, Caller

if TYPE_CHECKING:
    from tqdm import tqdm

    from server.facade import Esfis
    from server.settings import Settings

# The options of every command that acts as an agent (remember, recall, ... open).
CALLER = (
    arg("--ai", help="the acting AI (default: $ESFIS_AI, else 'cli')"),
    arg("--space", help="the caller's space (default: $ESFIS_SPACE, else the current folder's)"),
    arg("--run", dest="run_name", help="join run ID (default: $ESFIS_RUN; none: this command is a run of its own)"),
)


def open_service() -> Esfis:
    """The service, for one ``with``: the façade is imported only by the commands that use it."""
    from server.facade import open_service as opened

    return opened(settings())


def settings() -> Settings:
    """The one place the CLI reads its settings (the environment); the core is handed them."""
    from server.settings import Settings

    return Settings.from_env()


def acting_ai(args: Namespace, *, default: str) -> str:
    """``--ai``, else ``$ESFIS_AI``, else the command's own default."""
    return args.ai or os.environ.get("ESFIS_AI") or default


def caller(service: Esfis, args: Namespace) -> Caller:
    """The caller of an agent's command (``CALLER``'s options, else the environment)."""
    ai = acting_ai(args, default="cli")
    space = getattr(args, "space", None) or os.environ.get("ESFIS_SPACE") or None
    run = getattr(args, "run_name", None) or os.environ.get("ESFIS_RUN") or None
    return service.caller(ai, space=space, cwd=None if space else os.getcwd(), transport="cli", run=run)


def ask_at_terminal(request: ApprovalRequest) -> bool | None:
    """A person at the call: a yes/no prompt, only when a terminal is attached."""
    if not sys.stdin.isatty():
        return None
    print(request.message(), file=sys.stderr)
    print("approve? [y/N] ", end="", file=sys.stderr, flush=True)
    try:
        answer = sys.stdin.readline()
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")


def shapes() -> ModuleType:
    """Every answer's shape (``server.shapes``), for ``--json``: pydantic and its models cost a
    tenth of a second to import, which the text tables most commands print never need."""
    from server import shapes

    return shapes


def dumps(data: Any) -> str:
    """Every ``--json`` answer's layout."""
    return json.dumps(data, indent=2)


def progress(unit: str, **options: Any) -> tqdm[Any]:
    """A progress bar on stderr, drawn only at a terminal (a log gets the summary line alone)."""
    from tqdm import tqdm

    return tqdm(unit=unit, file=sys.stderr, disable=not sys.stderr.isatty(), dynamic_ncols=True, **options)
