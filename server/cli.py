"""The ``esfis`` command line: parsing and printing over the service façade, nothing more.

Errors print one line on stderr and exit non-zero (the code depends on the kind of error, never
on whether an unseen id exists). ``--allow``, ``--deny`` and ``--why`` are top-level flags, as
in ``esfis --deny '*' acme``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from server.errors import Conflict, EsfisError, Forbidden, InvalidInput, NotFound, Unauthorized
from server import render

EXIT_CODES: list[tuple[type[EsfisError], int]] = [
    (InvalidInput, 2),
    (NotFound, 3),
    (Forbidden, 4),
    (Unauthorized, 4),
    (Conflict, 5),
]


def _service():
    from server.service import open_service

    return open_service()


def _caller(service, args: argparse.Namespace, *, own_space: bool = True):
    ai = args.ai or os.environ.get("ESFIS_AI") or "cli"
    space = (getattr(args, "space", None) if own_space else None) or os.environ.get("ESFIS_SPACE") or None
    return service.caller(ai, space=space, cwd=None if space else os.getcwd(), transport="cli")


# -- commands -------------------------------------------------------------------------------


def cmd_space_add(args) -> None:
    space = _service().add_space(args.folder, args.name)
    print(space.name)


def cmd_space_list(args) -> None:
    spaces = _service().spaces()
    if args.json:
        print(json.dumps({"spaces": [render.space_json(s) for s in spaces]}, indent=2))
    else:
        print(render.spaces_table(spaces))


def cmd_space_remove(args) -> None:
    removed = _service().remove_space(args.name, purge=args.purge)
    print(f"removed space {args.name}" + (f" and forgot {removed} memories" if removed else ""))


def cmd_policy_list(args) -> None:
    rules = _service().policies()
    if args.json:
        print(json.dumps({"policies": [render.rule_json(r) for r in rules]}, indent=2))
    else:
        print(render.rules_table(rules))


def cmd_policy_clear(args) -> None:
    _service().clear_policy(args.ai_name, args.target)


def cmd_remember(args) -> None:
    service = _service()
    memory = service.remember(
        _caller(service, args), args.text, personal=args.personal, valid_until=args.valid_until, labels=args.label
    )
    print(memory.id)


def cmd_recall(args) -> None:
    service = _service()
    result = service.recall(_caller(service, args), args.query, limit=args.limit)
    if args.json:
        print(json.dumps(render.recall_json(result.memories), indent=2))
    else:
        print(render.recall_table(result.memories))


def cmd_get(args) -> None:
    service = _service()
    memory = service.get(_caller(service, args), args.id)
    print(json.dumps(render.memory_json(memory), indent=2) if args.json else memory.text)


def cmd_replace(args) -> None:
    service = _service()
    memory = service.replace(_caller(service, args, own_space=False), args.id, args.text, space=args.space)
    print(memory.id)


def cmd_forget(args) -> None:
    service = _service()
    service.forget(_caller(service, args), args.id)
    print(f"forgot {args.id}")


def cmd_deliveries(args) -> None:
    deliveries = _service().deliveries(ai=args.ai_filter, space=args.space_filter, last=args.last)
    if args.json:
        print(json.dumps({"deliveries": [render.delivery_json(d) for d in deliveries]}, indent=2))
    else:
        print(render.deliveries_table(deliveries))


def cmd_allow_deny(effect: str, values: list[str]) -> None:
    if not 1 <= len(values) <= 2:
        raise InvalidInput(f"usage: esfis --{effect} AI [SPACE]", field=effect)
    rule = _service().set_policy(values[0], values[1] if len(values) == 2 else None, effect)  # type: ignore[arg-type]
    print(rule.describe())


def cmd_why(value: str, as_json: bool) -> None:
    try:
        delivery_id = int(value)
    except ValueError:
        raise InvalidInput(f"--why takes a delivery number, got {value!r}", field="why") from None
    why = _service().why(delivery_id)
    print(json.dumps(render.why_json(why), indent=2) if as_json else render.why_text(why))


# -- parsing --------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr like every other error."""

    def error(self, message: str):  # type: ignore[override]
        raise InvalidInput(f"{message} (see {self.prog} --help)")


def _limit(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--limit must be an integer from 1 to 100, got {value!r}") from None
    if not 1 <= number <= 100:
        raise argparse.ArgumentTypeError(f"--limit must be an integer from 1 to 100, got {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="esfis",
        description="Scope-first memory for AI agents. Data lives in ESFIS_HOME (default ~/.esfis).",
    )
    parser.add_argument("--allow", nargs="+", metavar="AI [SPACE]", help="allow AI (or '*') in SPACE, or everywhere")
    parser.add_argument("--deny", nargs="+", metavar="AI [SPACE]", help="deny AI (or '*') in SPACE, or everywhere")
    parser.add_argument("--why", metavar="N", help="explain delivery N (operator)")
    parser.add_argument("--json", action="store_true", help="with --why: print JSON")
    caller = Parser(add_help=False)
    caller.add_argument("--ai", help="the acting AI (default: $ESFIS_AI, else 'cli')")
    caller.add_argument("--space", help="the caller's space (default: $ESFIS_SPACE, else the current folder's)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    space = sub.add_parser("space", help="add, list and remove spaces").add_subparsers(dest="space_command", required=True)
    p = space.add_parser("add", help="register FOLDER to a space (created if new)")
    p.add_argument("folder")
    p.add_argument("--name", help="the space's name (default: the folder's base name, under its enclosing space)")
    p.set_defaults(run=cmd_space_add)
    p = space.add_parser("list", help="list spaces, their folders and memory counts")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_space_list)
    p = space.add_parser("remove", help="remove a space (refuses while it holds memories)")
    p.add_argument("name")
    p.add_argument("--purge", action="store_true", help="forget the space's memories with it")
    p.set_defaults(run=cmd_space_remove)

    policy = sub.add_parser("policy", help="list and clear policy rules").add_subparsers(dest="policy_command", required=True)
    p = policy.add_parser("list", help="list the rules")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_policy_list)
    p = policy.add_parser("clear", help="remove the rule for AI in SPACE (or everywhere)")
    p.add_argument("ai_name", metavar="AI")
    p.add_argument("target", metavar="SPACE", nargs="?")
    p.set_defaults(run=cmd_policy_clear)

    p = sub.add_parser("remember", parents=[caller], help="store a memory in this space (or personal)")
    p.add_argument("text")
    p.add_argument("--personal", action="store_true", help="write a personal memory (reaches every space)")
    p.add_argument("--valid-until", help="ISO 8601 time or a duration (30m, 12h, 7d)")
    p.add_argument("--label", action="append", help="an origin mark, e.g. source:slack (repeatable)")
    p.set_defaults(run=cmd_remember)

    p = sub.add_parser("recall", parents=[caller], help="the memories of this space and personal that best answer QUERY")
    p.add_argument("query")
    p.add_argument("--limit", type=_limit, default=10, help="1 to 100 (default 10)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_recall)

    p = sub.add_parser("get", parents=[caller], help="print one memory")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_get)

    p = sub.add_parser("replace", help="supersede memory ID with TEXT")
    p.add_argument("--ai", help="the acting AI (default: $ESFIS_AI, else 'cli')")
    p.add_argument("id")
    p.add_argument("text")
    p.add_argument("--space", help="the new memory's space (default: the old one's)")
    p.set_defaults(run=cmd_replace)

    p = sub.add_parser("forget", parents=[caller], help="remove a memory for good")
    p.add_argument("id")
    p.set_defaults(run=cmd_forget)

    p = sub.add_parser("deliveries", help="the delivery log (operator)")
    p.add_argument("--ai", dest="ai_filter")
    p.add_argument("--space", dest="space_filter")
    p.add_argument("--last", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_deliveries)

    from server import cli_extra

    cli_extra.register(sub)
    return parser


def run(argv: Sequence[str]) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    chosen = [flag for flag in ("allow", "deny", "why") if getattr(args, flag)]
    if len(chosen) > 1 or (chosen and args.command):
        parser.error("use one of --allow, --deny, --why or a command")
    if args.allow:
        cmd_allow_deny("allow", args.allow)
    elif args.deny:
        cmd_allow_deny("deny", args.deny)
    elif args.why:
        cmd_why(args.why, args.json)
    elif args.command:
        args.run(args)
    else:
        parser.print_help()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        run(sys.argv[1:] if argv is None else argv)
    except EsfisError as exc:
        print(f"esfis: error: {exc.message}", file=sys.stderr)
        return next((code for cls, code in EXIT_CODES if isinstance(exc, cls)), 1)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
