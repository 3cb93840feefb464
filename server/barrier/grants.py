"""Grants and trusted sources, as an operator records them in the catalog.

A grant lets data of one space's subtree be written into exactly one other target (a space, or
personal); it is one-way, optionally for one AI, optionally until a time. It dies with either of
its spaces (``Registry.delete`` revokes it), so a space remade under an old name inherits no
crossing. A revoked grant stays in the catalog so that the trail steps naming it can still be
explained.

A trusted source is an origin mark (``source:github``) whose content an operator vouches for:
a run that carries only trusted marks may ``forget`` without a person's approval.
"""

from __future__ import annotations

import builtins
import re
import secrets
from datetime import datetime

from server.catalog import Catalog
from server.clock import Clock, from_micros, to_micros
from server.errors import GrantNotFound, InvalidInput, NotFound, SpaceNotFound
from server.labels import check_source
from server.models import TrustedSource
from server.records import Grant

GRANT_ID = re.compile(r"gr_[a-z0-9]{12}")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def new_grant_id() -> str:
    return "gr_" + "".join(secrets.choice(_ALPHABET) for _ in range(12))


class GrantBook:
    def __init__(self, catalog: Catalog, clock: Clock) -> None:
        self.catalog = catalog
        self.clock = clock

    def add(self, from_space: str, to_space: str | None, *, ai: str | None, until: datetime | None) -> Grant:
        now = self.clock()
        if until is not None and until <= now:
            raise InvalidInput("until must lie in the future", field="until")
        if to_space == from_space:
            raise InvalidInput("a grant crosses from one space into another: FROM and TO are the same", field="to")
        grant = Grant(new_grant_id(), from_space, to_space, ai, until, now)
        with self.catalog.transaction() as tx:
            # Checked again under the write lock: a grant outliving a space removed meanwhile
            # would hand its crossing to a new space of that name.
            for name in (from_space, to_space):
                if name is not None and tx.one("SELECT 1 FROM spaces WHERE name = ?", (name,)) is None:
                    raise SpaceNotFound(f"no space named {name!r} (esfis space list shows them)")
            tx.execute(
                "INSERT INTO grants (id, from_space, to_space, ai, until, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (grant.id, from_space, to_space, ai, None if until is None else to_micros(until), to_micros(now)),
            )
        return grant

    def list(self, *, revoked: bool = False) -> builtins.list[Grant]:
        sql = "SELECT * FROM grants" + ("" if revoked else " WHERE revoked_at IS NULL") + " ORDER BY created_at, id"
        return [_grant(r) for r in self.catalog.all(sql)]

    def get(self, grant_id: str) -> Grant:
        if not isinstance(grant_id, str) or not GRANT_ID.fullmatch(grant_id):
            raise InvalidInput(
                f"malformed grant id {str(grant_id)[:40]!r}: ids look like gr_ and 12 of [a-z0-9]", field="grant"
            )
        row = self.catalog.one("SELECT * FROM grants WHERE id = ?", (grant_id,))
        if row is None:
            raise GrantNotFound(f"no grant {grant_id}")
        return _grant(row)

    def revoke(self, grant_id: str) -> Grant:
        grant = self.get(grant_id)
        if grant.revoked_at is not None:
            return grant
        with self.catalog.transaction() as tx:
            tx.execute(
                "UPDATE grants SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (to_micros(self.clock()), grant_id),
            )
        return self.get(grant_id)

    # -- trusted sources --------------------------------------------------------------------

    def trust(self, source: str) -> TrustedSource:
        source = check_source(source, field="source")
        with self.catalog.transaction() as tx:
            tx.execute(
                "INSERT INTO trusted_sources (source, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (source, to_micros(self.clock())),
            )
        return next(t for t in self.trusted() if t.source == source)

    def trusted(self) -> builtins.list[TrustedSource]:
        rows = self.catalog.all("SELECT source, created_at FROM trusted_sources ORDER BY source")
        return [TrustedSource(r["source"], from_micros(r["created_at"])) for r in rows]

    def distrust(self, source: str) -> None:
        source = check_source(source, field="source")
        with self.catalog.transaction() as tx:
            if tx.execute("DELETE FROM trusted_sources WHERE source = ?", (source,)).rowcount == 0:
                raise NotFound(f"{source} is not a trusted source")


def _grant(row) -> Grant:
    return Grant(
        id=row["id"],
        from_space=row["from_space"],
        to_space=row["to_space"],
        ai=row["ai"],
        until=from_micros(row["until"]),
        created_at=from_micros(row["created_at"]),
        revoked_at=from_micros(row["revoked_at"]),
    )
