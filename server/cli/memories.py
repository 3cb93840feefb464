"""The agents' verbs at the command line: remember, recall, get, replace, forget, share, open.

Each acts as a caller (``--ai``, ``--space``, ``--run``, else the environment and the current
folder); a write the data barrier holds asks a person at the terminal, and only there.
"""

from __future__ import annotations

import argparse
import json
import sys
from argparse import Namespace
from collections.abc import Callable

from server import inputs, render
from server.cli.context import CALLER, ask_at_terminal, caller, dumps, open_service, shapes
from server.cli.curation import FILTER_HELP, forget_where
from server.cli.registry import arg, command
from server.clock import iso
from server.errors import InvalidInput
from server.models import DEFAULT_LIMIT, MAX_LIMIT, Held


def _integer(value: str) -> int:
    """``--limit``'s type: a whole number; its range is the core's to check (``Esfis.recall``)."""
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--limit must be an integer from 1 to {MAX_LIMIT}, got {value!r}") from None


def _json(flag: str) -> Callable[[str], object]:
    """A flag's type: JSON text, parsed; what it must hold is the core's to check."""

    def parse(value: str) -> object:
        try:
            return json.loads(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{flag} must be JSON (a JSON object): {exc}") from None

    return parse


@command(
    "remember",
    "store a memory in this space (or personal)",
    *CALLER,
    arg("text", help=inputs.TEXT),
    arg("--personal", action="store_true", help="write a personal memory (reaches every space)"),
    arg("--valid-until", help=inputs.VALID_UNTIL),
    arg("--labels", action="append", metavar="MARK", help=f"{inputs.LABELS} (one mark per flag, repeatable)"),
    arg("--no-dedupe", action="store_true", help="store it even when the space already holds this fact"),
    arg("--data", type=_json("--data"), metavar="JSON", help=inputs.DATA),
)
def remember(args: Namespace) -> None:
    with open_service() as service:
        memory = service.remember(
            caller(service, args),
            args.text,
            personal=args.personal,
            valid_until=args.valid_until,
            labels=args.labels,
            ask=ask_at_terminal,
            dedupe=not args.no_dedupe,
            data=args.data,
        )
    print(memory.id)
    # The id alone on stdout, as scripts read it; what the check found, on stderr.
    if isinstance(memory, Held):  # never without hold: the terminal was asked instead
        return
    if memory.duplicate_of is not None:
        print(f"(already held: {memory.duplicate_of} says the same; nothing new was stored)", file=sys.stderr)
    for close in memory.similar:
        print(f"(similar: {close.id} at {close.score:.3f}; if it is outdated, esfis replace it)", file=sys.stderr)


@command(
    "recall",
    "the memories of this space and personal that best answer QUERY",
    *CALLER,
    arg("query", nargs="?", help=inputs.QUERY + "; may be left out with --where"),
    arg(
        "--limit",
        type=_integer,
        default=DEFAULT_LIMIT,
        help=inputs.LIMIT,
        field="limit",
    ),
    arg("--as-of", metavar="TIME", help=inputs.AS_OF),
    arg("--where", type=_json("--where"), metavar="JSON", help=inputs.FILTER),
    arg("--json", action="store_true"),
)
def recall(args: Namespace) -> None:
    with open_service() as service:
        result = service.recall(caller(service, args), args.query, limit=args.limit, as_of=args.as_of, where=args.where)
    print(dumps(shapes().RecallOut.of(result.memories).dump()) if args.json else render.recall_table(result.memories))


@command("get", "print one memory", *CALLER, arg("id"), arg("--json", action="store_true"))
def get(args: Namespace) -> None:
    with open_service() as service:
        memory = service.get(caller(service, args), args.id)
        now = service.clock()
    if args.json:
        print(dumps(shapes().MemoryOut.of(memory).dump()))
        return
    print(render.memory_text(memory.text))
    # The text alone on stdout, as scripts read it; that it is history, on stderr.
    if memory.valid_until is not None and memory.valid_until <= now:
        by = f": superseded by {memory.superseded_by}" if memory.superseded_by else ""
        print(f"(no longer current since {iso(memory.valid_until)}{by})", file=sys.stderr)


@command(
    "replace",
    "supersede memory ID with TEXT",
    *CALLER,
    arg("id"),
    arg("text", help=inputs.NEW_TEXT),
    arg("--new-space", help=inputs.NEW_SPACE),
    arg("--data", type=_json("--data"), metavar="JSON", help=inputs.REPLACE_DATA),
)
def replace(args: Namespace) -> None:
    with open_service() as service:
        memory = service.replace(
            caller(service, args), args.id, args.text, space=args.new_space, ask=ask_at_terminal, data=args.data
        )
    print(memory.id)


@command(
    "forget",
    "remove a memory for good; with --where, every memory a filter selects (operator)",
    *CALLER,
    arg("id", nargs="?"),
    arg("--where", type=_json("--where"), metavar="JSON", help="forget by filter: " + FILTER_HELP),
    arg("--dry-run", action="store_true", help="with --where: count what it selects, forget nothing"),
    arg("--yes", action="store_true", help="with --where: forget without asking at the terminal"),
    arg("--up-to", type=int, metavar="ROW", help="with --where: a dry run's up_to (nothing newer is touched)"),
    arg("--json", action="store_true", help="with --where --dry-run: the count as JSON"),
)
def forget(args: Namespace) -> None:
    if (args.id is None) == (args.where is None):
        raise InvalidInput("forget takes a memory's ID, or --where FILTER (not both)")
    if args.where is not None:
        forget_where(args)
        return
    with open_service() as service:
        service.forget(caller(service, args), args.id, ask=ask_at_terminal)
    print(f"forgot {args.id}")


@command(
    "share",
    "a context reference to memories (labels, never texts)",
    *CALLER,
    arg("ids", metavar="ID", nargs="+"),
    arg("--json", action="store_true"),
)
def share(args: Namespace) -> None:
    with open_service() as service:
        reference = service.share(caller(service, args), args.ids)
    print(dumps(shapes().ReferenceOut.of(reference).dump()) if args.json else reference.ref)


@command(
    "open",
    "open a context reference (when this run may)",
    *CALLER,
    arg("ref", metavar="REF"),
    arg("--json", action="store_true"),
)
def open_reference(args: Namespace) -> None:
    with open_service() as service:
        reference, memories = service.open_context(caller(service, args), args.ref)
    if args.json:
        print(dumps(shapes().ContextOut.of(reference, memories).dump()))
    else:
        print("\n".join(f"{m.id}  [{m.labels.space or 'personal'}]  {render.memory_text(m.text)}" for m in memories))
