"""The operator's half of the façade: spaces, policies, deliveries and their why, grants,
trusted sources, runs and their trail, tokens, and bulk import.

``Esfis`` (``server.service``) inherits these verbs, so an interface holds one object and calls
one door. They act as the operator: no caller, no scope, and nothing here is an agent's answer.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable

from server.barrier import Grant
from server.clock import parse_time
from server.deliveries import explain
from server.errors import InvalidInput, RuleNotFound, SpaceNotEmpty
from server.models import Delivery, Space, Token, TrustedSource, Why
from server.policies import Effect, Rule, validate_ai
from server.runs import Run, TrailStep
from server.spaces import validate_space_name

if TYPE_CHECKING:
    from server.importer import ImportReport


class OperatorVerbs:
    """Mixed into ``Esfis``; uses its books (registry, book, log, runs, grant_book, tokens)."""

    # -- spaces and policies (operator) -----------------------------------------------------

    def add_space(self, folder: str | os.PathLike[str], name: str | None = None) -> Space:
        return self.registry.add_folder(folder, name)

    def create_space(self, name: str, folders: list[str] | None = None) -> Space:
        return self.registry.add_named(name, folders)

    def spaces(self) -> list[Space]:
        return self.registry.list()

    def remove_space(self, name: str, *, purge: bool = False) -> int:
        """Remove a space; refuses while it holds memories unless ``purge``. Returns purged count."""
        space = self.registry.get(self.registry.require(name))
        if space.memories and not purge:
            raise SpaceNotEmpty(
                f"space {name!r} holds {space.memories} memories; pass --purge to forget them with it"
            )
        # Spaces below it stay: each is a space of its own, reached from its own folders.
        removed = self.book.drop_space(name, self.clock())
        self.registry.delete(name)
        return removed

    def allow(self, ai: str, space: str | None = None) -> Rule:
        return self.registry.set_rule(ai, space, "allow")

    def deny(self, ai: str, space: str | None = None) -> Rule:
        return self.registry.set_rule(ai, space, "deny")

    def set_policy(self, ai: str, space: str | None, effect: Effect) -> Rule:
        return self.registry.set_rule(ai, space, effect)

    def policies(self) -> list[Rule]:
        return self.registry.policies().rules()

    def clear_policy(self, ai: str, space: str | None = None) -> None:
        if not self.registry.clear_rule(ai, space):
            raise RuleNotFound(f"no rule for {ai} {'in ' + space if space else 'everywhere'}")

    # -- deliveries (operator) --------------------------------------------------------------

    def deliveries(self, *, ai: str | None = None, space: str | None = None, last: int = 20) -> list[Delivery]:
        if not 1 <= last <= 10_000:
            raise InvalidInput("last must be from 1 to 10000", field="last")
        return self.log.list(ai=ai, space=space, last=last)

    def delivery(self, delivery_id: int) -> Delivery:
        return self.log.get(delivery_id)

    def why(self, delivery_id: int) -> Why:
        delivery = self.log.get(delivery_id)
        vector = self._embed_query(delivery.query)
        return explain(delivery, self.book, self.store, self.registry.names(), vector, self.clock())

    # -- grants, trusted sources, runs (operator) -------------------------------------------

    def add_grant(self, from_space: str, to_space: str | None, *, ai: str | None = None,
                  until: str | datetime | None = None) -> Grant:
        """Data of ``from_space``'s subtree may be written into ``to_space`` (None: personal)."""
        self.registry.require(validate_space_name(from_space, field="from"))
        if to_space is not None:
            self.registry.require(validate_space_name(to_space, field="to"))
        if ai is not None:
            validate_ai(ai)
        moment = None if until is None else parse_time(until, now=self.clock(), field="until")
        return self.grant_book.add(from_space, to_space, ai, moment)

    def grants(self) -> list[Grant]:
        return self.grant_book.list()

    def revoke_grant(self, grant_id: str) -> Grant:
        return self.grant_book.revoke(grant_id)

    def trust(self, source: str) -> TrustedSource:
        return self.grant_book.trust(source)

    def trusted_sources(self) -> list[TrustedSource]:
        return self.grant_book.trusted()

    def distrust(self, source: str) -> None:
        self.grant_book.distrust(source)

    def run_list(self, *, last: int = 20) -> list[Run]:
        return self.runs.list(last=last)

    def trail(self, run_id: str) -> tuple[Run, list[TrailStep]]:
        return self.runs.trail(run_id)

    # -- tokens ---------------------------------------------------------------------------

    def create_token(self, *, ai: str | None = None, space: str | None = None,
                     operator: bool = False) -> tuple[Token, str]:
        """A new HTTP token and its secret: the only time the secret exists outside its holder."""
        return self.token_book.create(ai=ai, space=space, operator=operator)

    def tokens(self) -> list[Token]:
        return self.token_book.list()

    def revoke_token(self, token_id: str) -> Token:
        return self.token_book.revoke(token_id)

    def authenticate(self, authorization: str | None) -> Token:
        """The active token an ``Authorization`` header names; one ``Unauthorized`` for anything else."""
        return self.token_book.authenticate(authorization)

    # -- bulk import ----------------------------------------------------------------------

    def import_jsonl(self, stream: BinaryIO, *, ai: str = "import", batch_size: int | None = None,
                     progress: Callable[[int], None] | None = None) -> "ImportReport":
        """Import JSON Lines from a binary stream (see ``server.importer``): bad rows reported by
        line, the rest imported, re-runs add nothing. A line over the limit is that line's error."""
        from server.importer import DEFAULT_BATCH, import_stream
        from server.import_rows import read_lines

        return import_stream(self, read_lines(stream), ai=ai, batch_size=batch_size or DEFAULT_BATCH,
                             progress=progress)

    def import_parquet(self, path: str | os.PathLike[str], *, ai: str = "import", batch_size: int | None = None,
                       progress: Callable[[int], None] | None = None,
                       sized: Callable[[int], None] | None = None) -> "ImportReport":
        """Import a Parquet file; ``sized(rows)`` is told its row count before the first batch."""
        from server.importer import DEFAULT_BATCH, import_records
        from server.import_rows import parquet_rows

        batch = batch_size or DEFAULT_BATCH
        total, records = parquet_rows(Path(path), batch_size=batch)
        if sized is not None:
            sized(total)
        return import_records(self, records, ai=ai, batch_size=batch, progress=progress)
