"""The ``esfis`` command line: parsing and printing over the service façade, nothing more.

Each command is declared beside its handler (``registry``), in a module of its concept:

    memories   the agents' verbs: remember, recall, get, replace, forget, share, open
    curation   the operator's memories: list, show, forget by filter
    policies   spaces, policy rules (--allow, --deny), deliveries (--why), tokens
    barrier    runs and trails, grants, trusted sources
    bulk       import, export, backup, restore, reindex, sweep
    serving    serve, settings-url, mcp
    context    what commands stand on: the service (one ``with`` per command), the caller,
               a person at the terminal, progress bars

Errors print one line on stderr and exit with the error class's ``exit_code`` (it depends on
the kind of error, never on whether an unseen id exists); a usage error is an ``InvalidInput``
like any other. ``--allow``, ``--deny`` and ``--why`` are top-level flags, as in ``esfis --deny
'*' acme``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from server.cli import barrier, bulk, curation, memories, policies, serving  # noqa: F401  (each declares its commands)
from server.cli.registry import FLAGS, Command, lay
from server.errors import EsfisError, InvalidInput
from server.faults import fault_of

# The commands in the order ``esfis --help`` lists them.
ORDER = (
    "space",
    "policy",
    "remember",
    "recall",
    "get",
    "replace",
    "forget",
    "memories",
    "share",
    "open",
    "runs",
    "trail",
    "grant",
    "trust",
    "approvals",
    "deliveries",
    "serve",
    "settings-url",
    "mcp",
    "import",
    "reindex",
    "sweep",
    "check",
    "dedupe",
    "token",
    "backup",
    "restore",
    "export",
)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr like every other error, and an option is
    only ever its whole name: an abbreviation that works today (``--lim``) would change meaning
    the day another option shares its start, and a removed name (``--label``) would live on as
    an abbreviation of the one that replaced it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        raise InvalidInput(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="esfis",
        description="Scope-first memory for AI agents. Data lives in ESFIS_HOME (default ~/.esfis).",
    )
    lay(parser, ORDER)
    parser.add_argument("--json", action="store_true", help="with --why: print JSON")
    return parser


def run(argv: Sequence[str]) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    chosen = [f for f in FLAGS if getattr(args, f.dest)]
    if len(chosen) > 1 or (chosen and args.command):
        parser.error("use one of --allow, --deny, --why or a command")
    if chosen:
        chosen[0].handler(args)
    elif args.command:
        spec: Command = args.spec
        assert spec.handler is not None  # a group's subcommand is required
        try:
            spec.handler(args)
        except InvalidInput as exc:
            spec.speak_as_flag(exc)
            raise
    else:
        parser.print_help()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        run(sys.argv[1:] if argv is None else argv)
    except EsfisError as exc:
        print(f"esfis: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:
        fault = fault_of(exc)  # a full disk, a failing one, a catalog gone: one line, not a traceback
        if fault is None:
            raise
        print(f"esfis: error: {fault.message}", file=sys.stderr)
        return fault.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return 0
