"""Space names, containment, and where a caller stands.

Rules (docs/design.md §2):

- A name is 1 to 8 segments joined by ``/``; a segment is ``[a-z0-9][a-z0-9._-]{0,62}``, ASCII,
  lower case. Anything else is refused with the rule in the message; nothing is folded or
  rewritten.
- Containment is by whole segments: ``acme/platform`` is inside ``acme``; ``acme2`` and
  ``acme-corp`` are not.
- A caller's space is the space whose registered folder is the longest path containing its
  working directory, compared by whole path components after resolving symlinks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from server.errors import InvalidSpaceName

MAX_SEGMENTS = 8
SEGMENT = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
# The whole name in one match (an import checks one a row). A segment cannot be "." or "..": its
# first character is a letter or a digit.
NAME = re.compile(rf"{SEGMENT.pattern}(?:/{SEGMENT.pattern}){{0,{MAX_SEGMENTS - 1}}}")
NAME_RULE = (
    "a space name is 1 to 8 segments joined by '/', each segment starting with a lower-case "
    "ASCII letter or digit followed by up to 62 of [a-z0-9._-]"
)
PERSONAL_KEY = "personal"


def validate_space_name(name: object, *, field: str = "space") -> str:
    """Return ``name`` unchanged if it is a valid space name, else raise with the rule."""
    if not isinstance(name, str):
        raise InvalidSpaceName(f"invalid space name: {NAME_RULE}", field=field)
    if NAME.fullmatch(name) is None:
        raise InvalidSpaceName(f"invalid space name {name!r}: {NAME_RULE}", field=field)
    return name


def parent_of(name: str) -> str | None:
    return name.rsplit("/", 1)[0] if "/" in name else None


def ancestors(name: str) -> list[str]:
    """``name`` and each ancestor, nearest first: acme/a/b → [acme/a/b, acme/a, acme]."""
    out = [name]
    while (parent := parent_of(out[-1])) is not None:
        out.append(parent)
    return out


def contains(outer: str, inner: str) -> bool:
    """Whether ``inner`` is ``outer`` or lies below it, by whole segments."""
    return inner == outer or inner.startswith(outer + "/")


def partition_key(space: str | None) -> str:
    """The index partition of a space; personal memories have their own."""
    return PERSONAL_KEY if space is None else "space:" + space


def space_of_key(key: str) -> str | None:
    return None if key == PERSONAL_KEY else key.removeprefix("space:")


def reached_spaces(caller_space: str | None, registered: Iterable[str]) -> list[str]:
    """The registered spaces a caller standing in ``caller_space`` reaches: it and its subtree."""
    if caller_space is None:
        return []
    return sorted(s for s in registered if contains(caller_space, s))


def canonical_folder(folder: str | os.PathLike[str]) -> Path:
    """A folder as compared for containment: absolute, symlinks resolved."""
    return Path(os.path.realpath(os.path.expanduser(os.fspath(folder))))


def space_for_folder(cwd: str | os.PathLike[str], folders: Mapping[str, str]) -> str | None:
    """The space of the longest registered folder containing ``cwd`` (whole components)."""
    here = canonical_folder(cwd).parts
    best: tuple[int, str] | None = None
    for folder, space in folders.items():
        parts = Path(folder).parts
        if here[: len(parts)] == parts and (best is None or len(parts) > best[0]):
            best = (len(parts), space)
    return None if best is None else best[1]


def default_space_name(folder: Path, enclosing_space: str | None) -> str:
    """The base name of the folder, under the enclosing registered space's name if any."""
    base = folder.name
    if not SEGMENT.fullmatch(base):
        raise InvalidSpaceName(
            f"the folder name {base!r} is not a valid space name; give the space a name (the CLI's --name). {NAME_RULE}",
            field="name",
        )
    return base if enclosing_space is None else f"{enclosing_space}/{base}"
