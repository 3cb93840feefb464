"""The operator's commands over who reaches what: spaces, policy rules (``--allow``, ``--deny``),
the delivery log and its ``--why``, and the HTTP tokens."""

from __future__ import annotations

import sys
from argparse import Namespace
from pathlib import Path
from typing import Literal

from server import render
from server.cli.context import dumps, open_service, shapes
from server.cli.registry import arg, command, flag, group, one_of
from server.errors import InvalidInput
from server.models import EVERYWHERE
from server.render import counted


def _set_policy(effect: Literal["allow", "deny"], values: list[str]) -> None:
    if not 1 <= len(values) <= 2:
        raise InvalidInput(f"usage: esfis --{effect} AI [SPACE]", field=effect)
    with open_service() as service:
        rule = service.operator.set_policy(values[0], values[1] if len(values) == 2 else EVERYWHERE, effect)
    print(rule.describe())


@flag("--allow", nargs="+", metavar="AI [SPACE]", help="allow AI (or '*') in SPACE, or everywhere")
def allow(args: Namespace) -> None:
    _set_policy("allow", args.allow)


@flag("--deny", nargs="+", metavar="AI [SPACE]", help="deny AI (or '*') in SPACE, or everywhere")
def deny(args: Namespace) -> None:
    _set_policy("deny", args.deny)


@flag("--why", metavar="N", help="explain delivery N (operator)")
def why(args: Namespace) -> None:
    try:
        delivery_id = int(args.why)
    except ValueError:
        raise InvalidInput(f"--why takes a delivery number, got {args.why!r}", field="why") from None
    with open_service() as service:
        explained = service.operator.why(delivery_id)
    print(dumps(shapes().WhyOut.of(explained).dump()) if args.json else render.why_text(explained))


# -- spaces and rules -------------------------------------------------------------------------

group("space", "add, list and remove spaces")


@command(
    "space add",
    "register FOLDER to a space (created if new), or create the spaces a file names",
    arg("folder", nargs="?"),
    arg("--name", help="the space's name (default: the folder's base name, under its enclosing space)"),
    arg(
        "--from",
        dest="names_file",
        metavar="FILE",
        help="create the spaces named in FILE, one per line (# comments and blank lines skipped; - reads stdin)",
    ),
)
def space_add(args: Namespace) -> None:
    if (args.folder is None) == (args.names_file is None):
        raise InvalidInput("give a FOLDER or --from FILE (exactly one)", field="folder")
    if args.names_file is not None:
        if args.name is not None:
            raise InvalidInput("--name names one folder's space; a file names its own", field="name")
        names = _names_in(args.names_file)
        with open_service() as service:
            created, existing = service.operator.create_spaces(names)
        for name in created:  # every space created is said: none is made silently
            print(name)
        print(f"created {counted(len(created), 'space')}; {len(existing)} existed already", file=sys.stderr)
        return
    with open_service() as service:
        space = service.operator.add_space(args.folder, args.name)
    print(space.name)


def _names_in(path: str) -> list[str]:
    """Space names, one per line, from a file (or stdin for ``-``); the façade checks every
    name before it makes any."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read the space names from {path}: {exc}", field="from") from None
    from server.facade import validate_space_name  # as every command's façade: when it runs

    names = []
    for number, line in enumerate(text.splitlines(), start=1):
        name = line.strip()
        if not name or name.startswith("#"):
            continue
        try:  # checked here too, to say which line: the façade would name only the name
            names.append(validate_space_name(name))
        except InvalidInput as exc:
            raise InvalidInput(f"{path}, line {number}: {exc.message} (no space was created)", field="from") from None
    return names


@command("space list", "list spaces, their folders and memory counts", arg("--json", action="store_true"))
def space_list(args: Namespace) -> None:
    with open_service() as service:
        spaces = service.operator.spaces()
    print(
        dumps({"spaces": [shapes().SpaceOut.of(s).dump() for s in spaces]})
        if args.json
        else render.spaces_table(spaces)
    )


@command(
    "space remove",
    "remove a space (refuses while it holds memories)",
    arg("name"),
    arg("--purge", action="store_true", help="forget the space's memories with it"),
)
def space_remove(args: Namespace) -> None:
    with open_service() as service:
        removed = service.operator.remove_space(args.name, purge=args.purge)
    print(f"removed space {args.name}" + (f" and forgot {counted(removed, 'memory')}" if removed else ""))


group("policy", "list and clear policy rules")


@command("policy list", "list the rules", arg("--json", action="store_true"))
def policy_list(args: Namespace) -> None:
    with open_service() as service:
        rules = service.operator.policies()
    print(
        dumps({"policies": [shapes().RuleOut.of(r).dump() for r in rules]}) if args.json else render.rules_table(rules)
    )


@command(
    "policy clear",
    "remove the rule for AI in SPACE (or everywhere)",
    arg("ai_name", metavar="AI"),
    arg("target", metavar="SPACE", nargs="?"),
)
def policy_clear(args: Namespace) -> None:
    with open_service() as service:
        service.operator.clear_policy(args.ai_name, EVERYWHERE if args.target is None else args.target)


@command(
    "deliveries",
    "the delivery log (operator)",
    arg("--ai", dest="ai_filter"),
    arg("--space", dest="space_filter"),
    arg("--last", type=int, default=20),
    arg("--json", action="store_true"),
)
def deliveries(args: Namespace) -> None:
    with open_service() as service:
        found = service.operator.deliveries(ai=args.ai_filter, space=args.space_filter, last=args.last)
    print(
        dumps({"deliveries": [shapes().DeliveryOut.of(d).dump() for d in found]})
        if args.json
        else render.deliveries_table(found)
    )


# -- tokens -----------------------------------------------------------------------------------

group("token", "create, list and revoke HTTP tokens")


@command(
    "token create",
    "print a new token (shown once)",
    one_of(
        arg("--ai", dest="token_ai", help="the AI this token acts as"),
        arg("--operator", action="store_true", help="a token that administers"),
        required=True,
    ),
    arg("--space", dest="token_space", field="space", help="with --ai: act only inside this space's subtree"),
    arg(
        "--runs-only",
        action="store_true",
        field="runs_only",
        help="with --ai: a harness's credential that opens run tokens (POST /v1/runs) and nothing else",
    ),
    arg(
        "--approvals",
        choices=("queue", "host"),
        default="queue",
        help="with --ai: who approves this token's held writes over /mcp: the operator on Settings › "
        "Approvals (queue, the default), or the prompt of the MCP host it is configured in (host: "
        "trust that host's user; never for a run token)",
    ),
)
def token_create(args: Namespace) -> None:
    """Prints the secret and nothing else."""
    with open_service() as service:
        _, secret = service.operator.create_token(
            ai=args.token_ai,
            space=args.token_space,
            operator=args.operator,
            runs_only=args.runs_only,
            approvals=args.approvals,
        )
    print(secret)


@command("token list", "list tokens (never their secrets)", arg("--json", action="store_true"))
def token_list(args: Namespace) -> None:
    with open_service() as service:
        tokens = service.operator.tokens()
    print(
        dumps({"tokens": [shapes().TokenOut.of(t).dump() for t in tokens]})
        if args.json
        else render.tokens_table(tokens)
    )


@command("token revoke", "revoke a token by its id", arg("token_id", metavar="ID"))
def token_revoke(args: Namespace) -> None:
    with open_service() as service:
        revoked = service.operator.revoke_token(args.token_id)
    print(f"revoked {revoked.id}")
