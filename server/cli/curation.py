"""The operator's memories at the command line: ``esfis memories list`` (a keyset page under a
selection), ``esfis memories show ID`` (one memory's provenance), and the forget by selection
that ``esfis forget`` without an ID runs (``--dry-run`` counts; otherwise the count is shown
and confirmed at a terminal, or by ``--yes``, and nothing written after the count is touched).

A selection is spelled as on every command that selects (``server.cli.selection``): ``--space
acme --below --ai cursor --origin source:slack --since 7d --before 2026-12-01 --state current``;
no ``--space`` (or ``--personal``) means personal memories.
"""

from __future__ import annotations

import sys
from argparse import Namespace

from server import render
from server.cli.context import dumps, open_service, shapes
from server.cli.registry import arg, command, group
from server.cli.selection import NARROWING, OLD_WHERE, PLACE, WRITER, selection
from server.errors import InvalidInput

group("memories", "the memories themselves: list and show, as the operator")


@command(
    "memories list",
    "memories newest first under a filter, a page at a time (operator)",
    *PLACE,
    *NARROWING,
    WRITER,
    OLD_WHERE,
    arg("--cursor", help="the next_cursor a page printed"),
    arg("--limit", type=int, default=50, help="memories on a page, 1 to 200"),
    arg("--json", action="store_true"),
)
def list_memories(args: Namespace) -> None:
    with open_service() as service:
        found = service.operator.memory_page(
            selection(args, command="memories list"), cursor=args.cursor, limit=args.limit
        )
    if args.json:
        print(dumps(shapes().MemoryPageOut.of(found).dump()))
        return
    for item in found.memories:
        m = item.memory
        state = " (superseded)" if m.superseded_by else ""
        print(f"{m.id}  {m.created_at:%Y-%m-%d %H:%M}  {m.ai}  [{m.space or 'personal'}]{state}  {_line(m.text)}")
    if found.next_cursor:
        print(f"(older: --cursor {found.next_cursor})", file=sys.stderr)


@command(
    "memories show",
    "one memory: its text, labels, run, what it superseded and the deliveries that included it (operator)",
    arg("id"),
    arg("--json", action="store_true"),
)
def show_memory(args: Namespace) -> None:
    with open_service() as service:
        detail = service.operator.memory(args.id)
    if args.json:
        print(dumps(shapes().MemoryDetailOut.of(detail).dump()))
        return
    m = detail.memory
    print(render.memory_text(m.text))
    print(
        f"id {m.id} in {m.space or 'personal'}, written by {m.ai} at {m.created_at:%Y-%m-%d %H:%M:%S}", file=sys.stderr
    )
    print(f"origin: {', '.join(m.origin) or 'none'}; digest {m.digest}; run {m.run_id or 'none'}", file=sys.stderr)
    print(f"supersedes {detail.supersedes or 'nothing'}; superseded by {m.superseded_by or 'nothing'}", file=sys.stderr)
    for d in detail.deliveries:
        print(f"delivery {d['delivery_id']}: rank {d['rank']} ({d['outcome']}) to {d['ai']}", file=sys.stderr)


def forget_where(args: Namespace) -> None:
    """``esfis forget`` by selection: count, then (confirmed) forget what was counted."""
    with open_service() as service:
        chosen = selection(args, command="forget")
        preview = service.operator.preview_forget(chosen)
        if args.dry_run:
            if args.json:
                print(dumps({"dry_run": True, "matched": preview.count, "up_to": preview.up_to}))
            else:
                print(f"would forget {render.counted(preview.count, 'memory')} (the same with --yes forgets them)")
            return
        up_to = preview.up_to if args.up_to is None else args.up_to
        if not args.yes:
            if not sys.stdin.isatty():
                raise InvalidInput("to forget without a terminal to confirm at, add --yes (or count with --dry-run)")
            print(
                f"forget {render.counted(preview.count, 'memory')} for good? [y/N] ",
                end="",
                file=sys.stderr,
                flush=True,
            )
            if sys.stdin.readline().strip().lower() not in ("y", "yes"):
                print("nothing forgotten", file=sys.stderr)
                return
        forgotten = service.operator.forget_where(chosen, up_to=up_to)
    print(f"forgot {render.counted(forgotten, 'memory')}")


def _line(text: str | None, width: int = 100) -> str:
    flat = render.memory_text(" ".join(text.split()) if text else text)
    return flat if len(flat) <= width else flat[: width - 1] + "…"
