"""Spaces, their folders, and policy rules, as stored in the catalog.

Given an ``AccessCache`` (a long-lived service's), what every request reads (whether a space
exists, the folders, a subtree, the policies) is kept under the catalog's access generation
(``server.catalog.access``): a space or rule the CLI adds while ``esfis serve`` runs still applies
to the server's next request, on every server. Without one, every call reads the catalog.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import orjson

from server.catalog import Catalog, Tx
from server.catalog.access import AccessCache
from server.clock import Clock, from_micros, to_micros
from server.errors import InvalidInput, SpaceExists, SpaceNotFound
from server.models import Space
from server.records import Effect, Rule
from server.spaces import (
    ancestors,
    canonical_folder,
    default_space_name,
    partition_key,
    space_for_folder,
    validate_space_name,
)
from server.spaces.policies import PolicySet, validate_ai

T = TypeVar("T")


class Registry:
    def __init__(self, catalog: Catalog, clock: Clock, access: AccessCache | None = None) -> None:
        self.catalog = catalog
        self.clock = clock
        self.access = access

    def _kept(self, key: tuple[str, ...], load: Callable[[], T]) -> T:
        return load() if self.access is None else self.access.get(key, load)

    # -- spaces -----------------------------------------------------------------------------

    def names(self) -> list[str]:
        return [r["name"] for r in self.catalog.all("SELECT name FROM spaces ORDER BY name")]

    def exists(self, name: str) -> bool:
        return self._kept(
            ("exists", name), lambda: self.catalog.one("SELECT 1 FROM spaces WHERE name = ?", (name,)) is not None
        )

    def folders(self) -> dict[str, str]:
        # A copy: a caller may change what it is given, never what is kept.
        kept = self._kept(
            ("folders",), lambda: {r["path"]: r["space"] for r in self.catalog.all("SELECT path, space FROM folders")}
        )
        return dict(kept)

    def space_at(self, cwd: str | os.PathLike[str]) -> str | None:
        return space_for_folder(cwd, self.folders())

    def require(self, name: str) -> str:
        validate_space_name(name)
        if not self.exists(name):
            raise SpaceNotFound(f"no space named {name!r} (esfis space list shows them)")
        return name

    def add_folder(self, folder: str | os.PathLike[str], name: str | None = None) -> Space:
        """Register ``folder`` to a space, creating the space if it is new."""
        path = _directory(folder)
        if name is None:
            enclosing = space_for_folder(path.parent, self.folders()) if path.parent != path else None
            name = default_space_name(path, enclosing)
        validate_space_name(name, field="name")
        # Checked inside the transaction (which holds the write lock): another process may
        # register the same folder between a look and the write.
        with self.catalog.transaction() as tx:
            _claim_folder(tx, path, name)
            _insert_space(tx, name, self.clock())
            tx.execute("INSERT INTO folders (path, space) VALUES (?, ?) ON CONFLICT DO NOTHING", (str(path), name))
        return self.get(name)

    def add_named(self, name: str, folders: list[str] | None = None) -> Space:
        """Create a space by name (for HTTP-only callers), with optional folders: each must be
        a directory, as for ``add_folder``; one given twice is one folder."""
        validate_space_name(name, field="name")
        paths = list(dict.fromkeys(_directory(f) for f in folders or []))
        with self.catalog.transaction() as tx:
            if not _insert_space(tx, name, self.clock()):
                raise SpaceExists(f"space {name!r} already exists")
            for path in paths:
                _claim_folder(tx, path, name)
                tx.execute("INSERT INTO folders (path, space) VALUES (?, ?)", (str(path), name))
        return self.get(name)

    def known(self, names: Iterable[str]) -> set[str]:
        """Which of ``names`` are registered, in one read per thousand."""
        wanted = list(dict.fromkeys(names))
        found: set[str] = set()
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            rows = self.catalog.all(
                f"SELECT name FROM spaces WHERE name IN ({', '.join('?' * len(chunk))})", tuple(chunk)
            )
            found.update(r["name"] for r in rows)
        return found

    def add_many(self, names: Iterable[str]) -> tuple[list[str], list[str]]:
        """Create every space of ``names`` that is not registered, in one transaction: the
        created ones, and those that existed, each in the order given. Every name is checked
        first, as ``space add`` checks one; one refused name creates nothing (``InvalidSpaceName``
        says which)."""
        wanted = checked_names(names)
        with self.catalog.transaction() as tx:
            return self._create_many(tx, wanted)

    def add_many_in(self, tx: Tx, names: Iterable[str]) -> tuple[list[str], list[str]]:
        """``add_many`` inside the caller's transaction (an import's batch creates its spaces
        with its rows: a batch killed before its commit leaves neither)."""
        return self._create_many(tx, checked_names(names))

    def _create_many(self, tx: Tx, wanted: list[str]) -> tuple[list[str], list[str]]:
        at = to_micros(self.clock())
        present: set[str] = set()
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            rows = tx.all(f"SELECT name FROM spaces WHERE name IN ({', '.join('?' * len(chunk))})", tuple(chunk))
            present.update(r["name"] for r in rows)
        created = [n for n in wanted if n not in present]
        if created:  # one statement, not a step per row (each would give up the GIL: beside an import's writes)
            item = tx.sql.item
            tx.execute(
                f"INSERT INTO spaces (name, created_at) SELECT {item(0)}, {item(1, 'BIGINT')} FROM {tx.sql.rows} "
                "WHERE true ON CONFLICT DO NOTHING",
                (orjson.dumps([(n, at) for n in created]).decode(),),
            )
        # A new space inherits no token (as _insert_space): one left active for its name is revoked.
        for start in range(0, len(created), CHUNK):
            chunk = created[start : start + CHUNK]
            tx.execute(
                f"UPDATE tokens SET revoked_at = ? WHERE revoked_at IS NULL AND space IN "
                f"({', '.join('?' * len(chunk))})",
                (at, *chunk),
            )
        return created, [n for n in wanted if n in present]

    def get(self, name: str) -> Space:
        row = self.catalog.one("SELECT name, created_at FROM spaces WHERE name = ?", (name,))
        if row is None:
            raise SpaceNotFound(f"no space named {name!r} (esfis space list shows them)")
        folders = tuple(
            r["path"] for r in self.catalog.all("SELECT path FROM folders WHERE space = ? ORDER BY path", (name,))
        )
        count = self.catalog.one("SELECT live FROM partitions WHERE key = ?", (partition_key(name),))
        created = from_micros(row["created_at"])
        assert created is not None
        return Space(name, folders, created, int(count["live"]) if count else 0)

    def list(self) -> builtins.list[Space]:
        return [self.get(name) for name in self.names()]

    def subtree(self, name: str) -> builtins.list[str]:
        """``name`` and the registered spaces below it, by an index range: '/' sorts just
        before '0', so every ``name/…`` lies between ``name/`` and ``name0``."""

        def load() -> tuple[str, ...]:
            rows = self.catalog.all(
                "SELECT name FROM spaces WHERE name = ? OR (name > ? AND name < ?) ORDER BY name",
                (name, name + "/", name + "0"),
            )
            return tuple(r["name"] for r in rows)

        return list(self._kept(("subtree", name), load))

    def delete(self, name: str) -> None:
        """Remove a space and its folders. A policy never loosens as a side effect.

        Rules match by name through ancestors, so a rule on ``acme`` still governs
        ``acme/platform`` once ``acme`` itself is gone: it stays while any space at or below
        its name survives. The rules of this space, and of each ancestor left with nothing
        registered below it, go with the last one.
        """
        with self.catalog.transaction() as tx:
            tx.execute("DELETE FROM folders WHERE space = ?", (name,))
            tx.execute("DELETE FROM spaces WHERE name = ?", (name,))
            for governed in ancestors(name):
                if _any_at_or_below(tx, governed):
                    break  # this name and every ancestor above it still govern a space
                tx.execute("DELETE FROM policies WHERE space = ?", (governed,))
            # A token confined to a space that is gone is revoked, never widened to the spaces
            # left below it nor handed to a new space of that name. Every active scoped token
            # names a registered space (tokens.create checks it in its own transaction), so
            # this also sweeps tokens left over from removals made before this rule.
            tx.execute(
                "UPDATE tokens SET revoked_at = ? WHERE revoked_at IS NULL AND space IS NOT NULL "
                "AND space NOT IN (SELECT name FROM spaces)",
                (to_micros(self.clock()),),
            )
            # A grant dies with either of its spaces, alike: a new space of the name inherits
            # no crossing. Revoked, not deleted, so the trail steps naming it still explain.
            tx.execute(
                "UPDATE grants SET revoked_at = ? WHERE revoked_at IS NULL AND (from_space NOT IN "
                "(SELECT name FROM spaces) OR (to_space IS NOT NULL AND to_space NOT IN (SELECT name FROM spaces)))",
                (to_micros(self.clock()),),
            )

    # -- policies ---------------------------------------------------------------------------

    def policies(self) -> PolicySet:
        def load() -> PolicySet:
            rows = self.catalog.all("SELECT ai, space, effect FROM policies")
            return PolicySet(Rule(r["ai"], r["space"] or None, r["effect"]) for r in rows)

        return self._kept(("policies",), load)

    def set_rule(self, ai: str, space: str | None, effect: Effect) -> Rule:
        validate_ai(ai, wildcard=True)
        if space is not None:
            self.require(space)
        with self.catalog.transaction() as tx:
            tx.execute(
                "INSERT INTO policies (ai, space, effect, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (ai, space) DO UPDATE SET effect = excluded.effect, created_at = excluded.created_at",
                (ai, space or "", effect, to_micros(self.clock())),
            )
        return Rule(ai, space, effect)

    def clear_rule(self, ai: str, space: str | None) -> bool:
        validate_ai(ai, wildcard=True)
        if space is not None:
            validate_space_name(space)
        with self.catalog.transaction() as tx:
            cursor = tx.execute("DELETE FROM policies WHERE ai = ? AND space = ?", (ai, space or ""))
            return cursor.rowcount > 0


def _directory(folder: str | os.PathLike[str]) -> Path:
    path = canonical_folder(folder)
    if not path.is_dir():
        raise InvalidInput(f"folder {str(folder)!r} does not exist or is not a directory", field="folder")
    return path


def _claim_folder(tx, path: Path, name: str) -> None:
    """Refuse a folder that already belongs to another space (a folder belongs to one)."""
    row = tx.one("SELECT space FROM folders WHERE path = ?", (str(path),))
    if row is not None and row["space"] != name:
        raise SpaceExists(f"folder {str(path)!r} already belongs to space {row['space']!r}")


CHUNK = 900  # names per IN (...): under SQLite's bound of 999 parameters


def checked_names(names: Iterable[str]) -> list[str]:
    """``names`` without repeats, each checked as ``space add`` checks one."""
    wanted = list(dict.fromkeys(names))
    for name in wanted:
        validate_space_name(name, field="name")
    return wanted


def _insert_space(tx, name: str, at: datetime) -> bool:
    """Register ``name`` unless it is; whether it is new. A new space inherits no token: one
    still active for that name (left from a removal made before removals revoked them) is
    revoked here."""
    cursor = tx.execute(
        "INSERT INTO spaces (name, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING", (name, to_micros(at))
    )
    if cursor.rowcount == 0:
        return False
    tx.execute("UPDATE tokens SET revoked_at = ? WHERE space = ? AND revoked_at IS NULL", (to_micros(at), name))
    return True


def _any_at_or_below(tx, name: str) -> bool:
    """Whether a space named ``name`` or lying below it is registered (the index range of
    ``Registry.subtree``)."""
    row = tx.one(
        "SELECT 1 FROM spaces WHERE name = ? OR (name > ? AND name < ?) LIMIT 1", (name, name + "/", name + "0")
    )
    return row is not None
