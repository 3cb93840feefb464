"""The agents' verbs at the command line: remember, recall, get, replace, forget, share, open.

Each acts as a caller (``--ai``, ``--space``, ``--run``, else the environment and the current
folder); a write the data barrier holds asks a person at the terminal, and only there.
"""

from __future__ import annotations

import argparse
import sys
from argparse import Namespace

from server import inputs, render
from server.cli.context import CALLER, ask_at_terminal, caller, dumps, open_service, shapes
from server.cli.curation import forget_where
from server.cli.registry import arg, command
from server.cli.selection import NARROWING, OLD_WHERE, UNTIL, chosen, data_filter, json_value, narrowed
from server.clock import iso
from server.errors import InvalidInput
from server.models import DEFAULT_LIMIT, MAX_LIMIT, Held


def _integer(value: str) -> int:
    """``--limit``'s type: a whole number; its range is the core's to check (``Esfis.recall``)."""
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--limit must be an integer from 1 to {MAX_LIMIT}, got {value!r}") from None


@command(
    "remember",
    "store a memory in this space (or personal)",
    *CALLER,
    arg("text", help=inputs.TEXT),
    arg("--personal", action="store_true", help="write a personal memory (reaches every space)"),
    arg("--valid-until", help=inputs.VALID_UNTIL),
    arg("--labels", action="append", metavar="MARK", help=f"{inputs.LABELS} (one mark per flag, repeatable)"),
    arg("--no-dedupe", action="store_true", help="store it even when the space already holds this fact"),
    arg("--data", type=json_value("--data"), metavar="JSON", help=inputs.DATA),
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
    arg("query", nargs="?", help=inputs.QUERY + "; may be left out with --filter"),
    arg(
        "--limit",
        type=_integer,
        default=DEFAULT_LIMIT,
        help=inputs.LIMIT,
        field="limit",
    ),
    arg("--as-of", metavar="TIME", help=inputs.AS_OF),
    arg("--filter", type=json_value("--filter"), metavar="JSON", help=inputs.FILTER),
    arg(
        "--where",
        type=json_value("--where"),
        metavar="JSON",
        help=f"deprecated, accepted until {UNTIL}: the old name of --filter",
    ),
    arg("--json", action="store_true"),
)
def recall(args: Namespace) -> None:
    data = data_filter(args)
    with open_service() as service:
        result = service.recall(caller(service, args), args.query, limit=args.limit, as_of=args.as_of, where=data)
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
    arg("--data", type=json_value("--data"), metavar="JSON", help=inputs.REPLACE_DATA),
)
def replace(args: Namespace) -> None:
    with open_service() as service:
        memory = service.replace(
            caller(service, args), args.id, args.text, space=args.new_space, ask=ask_at_terminal, data=args.data
        )
    print(memory.id)


@command(
    "forget",
    "remove a memory for good; without ID, every memory a selection chooses (operator)",
    arg("id", nargs="?"),
    # With an ID these say who forgets, from where (an agent's verb); without, what to forget.
    arg("--ai", help="with ID: the acting AI (default: $ESFIS_AI, else 'cli'); without: only those this AI wrote"),
    arg(
        "--space",
        field="space",
        help="with ID: the caller's space (default: $ESFIS_SPACE, else the current folder's); "
        "without: the space whose memories (no --space: personal ones)",
    ),
    CALLER[2],  # --run
    arg("--personal", action="store_true", help="without ID: personal memories (in no space)"),
    *NARROWING,
    OLD_WHERE,
    arg("--dry-run", action="store_true", help="without ID: count what it selects, forget nothing"),
    arg("--yes", action="store_true", help="without ID: forget without asking at the terminal"),
    arg("--up-to", type=int, metavar="ROW", help="without ID: a dry run's up_to (nothing newer is touched)"),
    arg("--json", action="store_true", help="without ID, with --dry-run: the count as JSON"),
)
def forget(args: Namespace) -> None:
    if args.id is None:
        if not chosen(args):
            raise InvalidInput("forget takes a memory's ID, or a selection (--space or --personal, --ai, --below, …)")
        forget_where(args)
        return
    if narrowed(args) or args.where is not None:
        raise InvalidInput("forget ID forgets that memory: leave out the selection's flags, or the ID")
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
