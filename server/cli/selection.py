"""One vocabulary for choosing memories at the command line: the same flag for the same thing on
every command that chooses, and the same names as HTTP's fields and the Python client's
parameters (docs/cli.md, docs/http.md):

    --space S           the space (on an agent's verb: where the caller stands)
    --personal          personal memories (in no space)
    --below             with --space: the spaces below it too
    --ai AI             the AI that wrote them (on an agent's verb: the AI that acts)
    --origin MARK       an origin mark (source:slack; a bare slack reads so)
    --since / --before  written since / before a time (7d, or an ISO 8601 time)
    --state S           current, superseded or expired
    --filter JSON       over the memories' data (recall's, as HTTP's ``filter``)

``esfis memories list`` and ``esfis forget`` (without an ID) take every one but ``--filter``;
``esfis recall`` takes ``--space`` and ``--filter``; ``esfis dedupe`` takes ``--space`` or
``--personal``. The old spellings still work for one release, each with a one-line warning on
stderr (``OLD_WHERE``, ``recall --where``): scripts keep running while they move.
"""

from __future__ import annotations

import argparse
import json
import sys
from argparse import Namespace
from collections.abc import Callable
from typing import Any

from server.cli.registry import arg
from server.errors import InvalidInput

UNTIL = "the next release"  # when the old spellings go (CHANGELOG.md)
WHERE_KEYS = ("space", "below", "ai", "origin", "since", "before", "state")
WHERE_EXAMPLE = (
    '{"space": "acme", "below": true, "ai": "cursor", "origin": "source:slack", '
    '"since": "7d", "before": "2026-12-01", "state": "current"}, space null: personal'
)
FLAGS_TEXT = "--space or --personal, --below, --ai, --origin, --since, --before, --state"


def json_value(flag: str) -> Callable[[str], object]:
    """A flag's type: JSON text, parsed; what it must hold is the core's to check."""

    def parse(value: str) -> object:
        try:
            return json.loads(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{flag} must be JSON (a JSON object): {exc}") from None

    return parse


# The place, on the operator's commands (an agent's verb has its caller's --space instead).
PLACE = (
    arg("--space", metavar="SPACE", field="space", help="the space whose memories (no --space: personal ones)"),
    arg("--personal", action="store_true", help="personal memories (in no space)"),
)
WRITER = arg("--ai", metavar="AI", field="ai", help="only those this AI wrote")
NARROWING = (
    arg("--below", action="store_true", help="with --space: the spaces below it too"),
    arg("--origin", metavar="MARK", field="origin", help="only those carrying this origin mark (source:slack)"),
    arg("--since", metavar="TIME", field="since", help="only those written since (7d, or an ISO 8601 time)"),
    arg("--before", metavar="TIME", field="before", help="only those written before (7d, or an ISO 8601 time)"),
    arg("--state", metavar="STATE", field="state", help="current, superseded or expired (default: any)"),
)
OLD_WHERE = arg(
    "--where",
    type=json_value("--where"),
    metavar="JSON",
    help=f"deprecated, accepted until {UNTIL}: the selection as one JSON object ({WHERE_EXAMPLE}); use {FLAGS_TEXT}",
)
DATA_FILTER = "--filter"


def warn_deprecated(said: str, instead: str) -> None:
    """The one line a deprecated spelling earns, on stderr (stdout stays the answer)."""
    print(f"esfis: warning: {said} is deprecated and goes in {UNTIL}: use {instead}", file=sys.stderr)


def narrowed(args: Namespace) -> bool:
    """Whether a flag only a selection takes was given (``--space`` and ``--ai`` are also an
    agent's: on ``esfis forget ID`` they say who acts, and from where)."""
    return bool(
        args.below
        or args.personal
        or any(getattr(args, name) is not None for name in ("origin", "since", "before", "state"))
    )


def chosen(args: Namespace) -> bool:
    """Whether any flag of a selection was given, the old ``--where`` included."""
    return narrowed(args) or any(getattr(args, name) is not None for name in ("space", "ai", "where"))


def selection(args: Namespace, *, command: str) -> Any:
    """The façade's filter from the flags, or from the old ``--where`` (warned; never both)."""
    from server.facade import PERSONAL, MemoryFilter

    if args.where is not None:
        if narrowed(args) or args.space is not None or args.ai is not None:
            raise InvalidInput(f"--where cannot be combined with {FLAGS_TEXT}: give the flags alone")
        warn_deprecated(f"{command} --where", FLAGS_TEXT)
        return where_filter(args.where)
    if args.space is not None and args.personal:
        raise InvalidInput("name one place: --space SPACE or --personal", field="space")
    return MemoryFilter(
        space=PERSONAL if args.space is None else args.space,
        below=args.below,
        ai=args.ai,
        origin=args.origin,
        since=args.since,
        before=args.before,
        state=args.state,
    )


def where_filter(where: Any) -> Any:
    """The façade's filter from an old ``--where`` JSON object; an unknown key is a clear error."""
    from server.facade import PERSONAL, MemoryFilter

    if not isinstance(where, dict):
        raise InvalidInput(f"--where must be a JSON object with keys among {', '.join(WHERE_KEYS)}")
    unknown = sorted(set(where) - set(WHERE_KEYS))
    if unknown:
        raise InvalidInput(f"--where: unknown key {unknown[0]!r} (keys: {', '.join(WHERE_KEYS)})")
    for key in ("space", "ai", "origin", "since", "before", "state"):
        if where.get(key) is not None and not isinstance(where[key], str):
            raise InvalidInput(f"--where: {key} must be a string")
    if not isinstance(where.get("below", False), bool):
        raise InvalidInput("--where: below must be true or false")
    space = where.get("space")
    return MemoryFilter(
        space=PERSONAL if space is None else space,
        below=where.get("below", False),
        ai=where.get("ai"),
        origin=where.get("origin"),
        since=where.get("since"),
        before=where.get("before"),
        state=where.get("state"),
    )


def data_filter(args: Namespace) -> object:
    """Recall's filter over data: ``--filter``, or its old name ``--where`` (warned; never both)."""
    if args.where is None:
        return args.filter
    if args.filter is not None:
        raise InvalidInput("recall takes --filter (--where is its old name): give one")
    warn_deprecated("recall --where", "--filter")
    return args.where
