"""Declaring a command: its name, help and arguments written right above its handler.

    @command("space add", "register FOLDER to a space (created if new)",
             arg("folder"),
             arg("--name", help="the space's name ..."))
    def space_add(args: Namespace) -> None: ...

A name of two words is a subcommand of the first; ``group`` declares a first word that only
holds subcommands. ``flag`` declares a top-level flag that acts on its own (``esfis --deny '*'
acme``). ``lay`` builds argparse's tree from what the command modules declared, so a command
and its options are never apart, and the parser stays argparse's: the same usage, help and
errors as ever.

An argument may name the core's ``field`` it sets: the core's error about that field (its
limits are the core's, checked there once) is then spoken with the flag the person typed
(``limit must be ...`` becomes ``--limit must be ...``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from server.errors import InvalidInput

Handler = Callable[[argparse.Namespace], None]


@dataclass(frozen=True)
class Arg:
    """One ``add_argument`` call, kept until the parser is built."""

    flags: tuple[str, ...]
    options: Mapping[str, Any]
    field: str | None  # the core's name for what this sets (see the module)

    def add_to(self, parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup) -> None:
        parser.add_argument(*self.flags, **self.options)


@dataclass(frozen=True)
class OneOf:
    """Arguments of which at most one (with ``required``, exactly one) may be given."""

    args: tuple[Arg, ...]
    required: bool = False

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_mutually_exclusive_group(required=self.required)
        for a in self.args:
            a.add_to(group)


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]  # ("grant", "add"): ``esfis grant add``
    help: str
    args: tuple[Arg | OneOf, ...]
    handler: Handler | None  # None: a group, whose subcommands act

    def flag_for(self, name: str | None) -> str | None:
        plain = [a for item in self.args for a in (item.args if isinstance(item, OneOf) else (item,))]
        return next((a.flags[0] for a in plain if name is not None and a.field == name), None)

    def speak_as_flag(self, exc: InvalidInput) -> None:
        """Name the flag in a core error about the field it sets (see the module)."""
        flag = self.flag_for(exc.field)
        if flag is None or exc.field is None:
            return
        for said in (exc.field, exc.field.replace("_", " ")):
            if exc.message.startswith(said + " "):
                exc.message = flag + exc.message[len(said) :]
                exc.args = (exc.message,)
                return


@dataclass(frozen=True)
class Flag:
    arg: Arg
    handler: Handler

    @property
    def dest(self) -> str:
        return self.arg.flags[0].lstrip("-").replace("-", "_")


COMMANDS: dict[tuple[str, ...], Command] = {}
FLAGS: list[Flag] = []


def arg(*flags: str, field: str | None = None, **options: Any) -> Arg:
    """An argument as ``add_argument`` takes it, and the core's field it sets, if any."""
    return Arg(flags, options, field)


def one_of(*args: Arg, required: bool = False) -> OneOf:
    return OneOf(args, required)


def _declare(command: Command) -> None:
    if command.path in COMMANDS:
        raise RuntimeError(f"esfis {' '.join(command.path)} is declared twice")
    COMMANDS[command.path] = command


def command(name: str, help: str, *args: Arg | OneOf) -> Callable[[Handler], Handler]:
    """Declare ``esfis NAME`` (one or two words) with its help and arguments, over its handler."""

    def declare(handler: Handler) -> Handler:
        _declare(Command(tuple(name.split()), help, args, handler))
        return handler

    return declare


def group(name: str, help: str) -> None:
    """Declare ``esfis NAME``, which takes one of its subcommands."""
    _declare(Command((name,), help, (), None))


def flag(*flags: str, **options: Any) -> Callable[[Handler], Handler]:
    """Declare a top-level flag that is a command of its own (``esfis --why N``)."""

    def declare(handler: Handler) -> Handler:
        FLAGS.append(Flag(arg(*flags, **options), handler))
        return handler

    return declare


def lay(parser: argparse.ArgumentParser, order: Sequence[str]) -> None:
    """Add the declared flags, then the declared commands in ``order`` (that of ``--help``)."""
    for f in FLAGS:
        f.arg.add_to(parser)
    tops = {c.path[0] for c in COMMANDS.values()}
    if tops != set(order):
        raise RuntimeError(f"the order of commands and the commands declared differ: {sorted(tops ^ set(order))}")
    _lay_below(parser, (), order, dest="command", metavar="COMMAND", required=False)


def _lay_below(parser: argparse.ArgumentParser, path: tuple[str, ...], names: Sequence[str], **subparsers: Any) -> None:
    sub = parser.add_subparsers(**subparsers)
    for name in names:
        spec = COMMANDS[(*path, name)]
        p = sub.add_parser(name, help=spec.help)
        for item in spec.args:
            item.add_to(p)
        p.set_defaults(spec=spec)
        children = [c.path[-1] for c in COMMANDS.values() if c.path[:-1] == spec.path]
        if children:
            _lay_below(p, spec.path, children, dest=f"{name}_command", required=spec.handler is None)
