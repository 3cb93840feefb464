"""The operator's half of the façade: spaces, policies, deliveries and their why, grants,
trusted sources, runs and their trail, tokens, backup and bulk import.

``Esfis.operator`` is one ``Operator``, over the service's own ``Parts``. Its verbs act as the
operator: no caller, no scope, and nothing here is an agent's answer. Only the operator's
interfaces call them: the CLI, the HTTP routes an operator token opens, the settings pages.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, BinaryIO, Literal

import server.facade.approvals as held_calls
import server.facade.bulk as bulk
import server.facade.curation as curation
import server.facade.settings_pages as settings_pages
from server.barrier.trail_upkeep import Pruned, prune_trail
from server.clock import parse_time
from server.errors import InvalidInput, RuleNotFound, SpaceNotEmpty, SpaceNotFound
from server.facade.settings_pages import Everywhere, rule_place
from server.memories.deliveries import explain
from server.memories.folding import FoldReport, fold_copies_of
from server.models import (
    EVERYWHERE,
    PERSONAL,
    Delivery,
    Held,
    HeldView,
    Memory,
    Place,
    Space,
    Token,
    TrustedSource,
    Why,
)
from server.records import Effect, Grant, Rule, Run, TrailStep
from server.render import counted
from server.spaces import partition_key, validate_space_name
from server.spaces.access import Access
from server.spaces.policies import validate_ai

if TYPE_CHECKING:
    from server.bulk.backup import BackupReport
    from server.bulk.check import CheckReport
    from server.bulk.export import RestoreImportReport
    from server.bulk.importer import ImportReport
    from server.facade.parts import Parts


_log = logging.getLogger("esfis")


class Operator:
    """The operator's verbs over one service's parts."""

    def __init__(self, parts: Parts) -> None:
        self._parts = parts

    # -- spaces and policies (operator) -----------------------------------------------------

    def add_space(self, folder: str | os.PathLike[str], name: str | None = None) -> Space:
        return self._parts.registry.add_folder(folder, name)

    def create_space(self, name: str, folders: list[str] | None = None) -> Space:
        return self._parts.registry.add_named(name, folders)

    def create_spaces(self, names: list[str]) -> tuple[list[str], list[str]]:
        """Many spaces by name at once (``esfis space add --from FILE``): the created ones and
        those that existed; one refused name creates none."""
        return self._parts.registry.add_many(names)

    def spaces(self) -> list[Space]:
        return self._parts.registry.list()

    def remove_space(self, name: str, *, purge: bool = False) -> int:
        """Remove a space; refuses while it holds memories unless ``purge``. Returns purged count."""
        space = self._parts.registry.get(self._parts.registry.require(name))
        if space.memories and not purge:
            raise SpaceNotEmpty(
                f"space {name!r} holds {counted(space.memories, 'memory')}; remove it with purge (the CLI's --purge, HTTP's ?purge=true) to forget them with it"
            )
        # Spaces below it stay: each is a space of its own, reached from its own folders.
        removed = self._parts.memories.drop_space(name, self._parts.clock())
        with self._parts.catalog.transaction() as tx:  # held texts of it go with its memories
            cleared = self._parts.approvals.purge_space(tx, name)
        if cleared:
            self._parts.catalog.scrub(None)
        self._parts.registry.delete(name)
        return removed

    def allow(self, ai: str, space: str | Everywhere = EVERYWHERE) -> Rule:
        return self._parts.registry.set_rule(ai, rule_place(space), "allow")

    def deny(self, ai: str, space: str | Everywhere = EVERYWHERE) -> Rule:
        return self._parts.registry.set_rule(ai, rule_place(space), "deny")

    def set_policy(self, ai: str, space: str | Everywhere, effect: Effect) -> Rule:
        return self._parts.registry.set_rule(ai, rule_place(space), effect)

    def policies(self) -> list[Rule]:
        return self._parts.registry.policies().rules()

    def clear_policy(self, ai: str, space: str | Everywhere = EVERYWHERE) -> None:
        place = rule_place(space)
        if not self._parts.registry.clear_rule(ai, place):
            raise RuleNotFound(f"no rule for {ai} {'everywhere' if place is None else 'in ' + place}")

    # -- deliveries (operator) --------------------------------------------------------------

    def deliveries(self, *, ai: str | None = None, space: str | None = None, last: int = 20) -> list[Delivery]:
        if not 1 <= last <= 10_000:
            raise InvalidInput("last must be from 1 to 10000", field="last")
        for field, value in (("ai", ai), ("space", space)):
            if value is not None and "\x00" in value:  # no name holds one, on either catalog
                raise InvalidInput(f"{field} holds a NUL character", field=field)
        return self._parts.deliveries.list(ai=ai, space=space, last=last)

    def delivery(self, delivery_id: int) -> Delivery:
        return self._parts.deliveries.get(delivery_id)

    def why(self, delivery_id: int) -> Why:
        delivery = self._parts.deliveries.get(delivery_id)
        vector = self._parts.embed_query(delivery.query)
        return explain(
            delivery,
            book=self._parts.memories,
            store=self._parts.store,
            all_spaces=self._parts.registry.names(),
            query_vector=vector,
            now=self._parts.clock(),
        )

    # -- held calls (operator) --------------------------------------------------------------

    def approvals_waiting(self) -> int:
        """How many calls wait for a person now (``/metrics``)."""
        return self._parts.approvals.waiting()

    def approvals(self, *, status: str | None = "pending", last: int = 100) -> list[HeldView]:
        """Held calls, newest first (the pending ones by default), each rendered as the person
        must read it; one that can no longer be applied is voided, never shown as approvable."""
        return held_calls.listing(self._parts, status=status, last=last)

    def approval(self, approval_id: str) -> HeldView:
        return held_calls.view(self._parts, self._parts.approvals.get(approval_id))

    def decide_approval(self, approval_id: str, *, approve: bool, by: str) -> Held:
        """The operator's answer to a held call: approved, it is applied now as its run's step
        (or void, with the reason, if it no longer can be); declined, its text is cleared."""
        return held_calls.decide(self._parts, approval_id, approve=approve, by=by)

    def settle_approvals(self) -> int:
        return self._parts.approvals.settle()

    # -- grants, trusted sources, runs (operator) -------------------------------------------

    def add_grant(
        self,
        from_space: str,
        to_space: str | Personal,
        *,
        ai: str | None = None,
        until: str | datetime | None = None,
    ) -> Grant:
        """Data of ``from_space``'s subtree may be written into ``to_space`` (or ``PERSONAL``).
        The grant answered names personal as a ``to_space`` of None."""
        self._parts.registry.require(validate_space_name(from_space, field="from"))
        if to_space is PERSONAL:
            target = None
        else:
            target = self._parts.registry.require(validate_space_name(to_space, field="to"))
        if ai is not None:
            validate_ai(ai)
        moment = None if until is None else parse_time(until, now=self._parts.clock(), field="until")
        return self._parts.grants.add(from_space, target, ai=ai, until=moment)

    def grants(self) -> list[Grant]:
        return self._parts.grants.list()

    def revoke_grant(self, grant_id: str) -> Grant:
        return self._parts.grants.revoke(grant_id)

    def trust(self, source: str) -> TrustedSource:
        return self._parts.grants.trust(source)

    def trusted_sources(self) -> list[TrustedSource]:
        return self._parts.grants.trusted()

    def distrust(self, source: str) -> None:
        self._parts.grants.distrust(source)

    def run_list(self, *, last: int = 20) -> list[Run]:
        return self._parts.runs.list(last=last)

    def end_run(self, run_id: str, *, by: str) -> Run:
        """End a run (``server.barrier.runs.RunBook.end``); ``by`` names who, for its trail."""
        return self._parts.runs.end(run_id, by=by)

    def prune_trail(self, *, days: int | None = None) -> Pruned:
        """Prune the runs that are over, older than ``days`` (default: the service's ``trail_days``)."""
        return prune_trail(
            self._parts.catalog, self._parts.clock(), days=self._parts.trail_days if days is None else days
        )

    # -- web sessions -----------------------------------------------------------------------

    def end_web_session(self, nonce: str, expires: int) -> None:
        """Record a signed-out web session (until it would have expired), for every server."""
        self._parts.tokens.end_session(nonce, expires)

    def web_session_ended(self, nonce: str) -> bool:
        return self._parts.tokens.session_ended(nonce)

    def trail(self, run_id: str) -> tuple[Run, list[TrailStep]]:
        return self._parts.runs.trail(run_id)

    # -- tokens ---------------------------------------------------------------------------

    def create_token(
        self,
        *,
        ai: str | None = None,
        space: str | None = None,
        operator: bool = False,
        runs_only: bool = False,
        approvals: str = "queue",
    ) -> tuple[Token, str]:
        """A new HTTP token and its secret: the only time the secret exists outside its holder.
        ``approvals="host"``: an agent token whose MCP host's prompts count as a person's."""
        return self._parts.tokens.create(
            ai=ai, space=space, operator=operator, runs_only=runs_only, approvals=approvals
        )

    def tokens(self) -> list[Token]:
        return self._parts.tokens.list()

    def revoke_token(self, token_id: str) -> Token:
        return self._parts.tokens.revoke(token_id)

    # -- in bulk (``server.facade.bulk``) ---------------------------------------------------

    def sweep_orphans(self, older_than: timedelta = timedelta(minutes=10)) -> tuple[int, int]:
        """Purge every partition's rows older than ``older_than`` that no catalog entry names
        (writes killed between their vectors and their catalog rows, on any machine); returns
        (rows purged, partitions read)."""
        return bulk.sweep_orphans(self._parts, older_than)

    def check(self, repair: bool = False) -> CheckReport:
        """Whether the home is whole (``server.bulk.check``): lost memories, orphan rows,
        forgotten texts still stored, what killed writes left, counts, images, unreadable
        partitions. With ``repair``, mends what can be and says what is left."""
        return bulk.check(self._parts, repair=repair)

    def backup(self, path: str | os.PathLike[str]) -> BackupReport:
        """A consistent backup of this home into ``path`` (``server.bulk.backup``): an absolute folder
        on this machine, absent or empty, outside the home; keyed with ``ESFIS_BACKUP_KEY``, else
        the home's ``backup.key``."""
        return bulk.backup(self._parts, path)

    def import_jsonl(
        self,
        stream: BinaryIO,
        *,
        ai: str = "import",
        batch_size: int | None = None,
        progress: Callable[[int], None] | None = None,
        create_spaces: bool = False,
    ) -> ImportReport:
        """Import JSON Lines from a binary stream (see ``server.bulk.importer``): bad rows reported by
        line, the rest imported, re-runs add nothing. A line over the limit is that line's error."""
        return bulk.import_jsonl(
            self._parts, stream, ai=ai, batch_size=batch_size, progress=progress, create_spaces=create_spaces
        )

    def import_parquet(
        self,
        path: str | os.PathLike[str],
        *,
        ai: str = "import",
        batch_size: int | None = None,
        progress: Callable[[int], None] | None = None,
        sized: Callable[[int], None] | None = None,
        create_spaces: bool = False,
    ) -> ImportReport:
        """Import a Parquet file; ``sized(rows)`` is told its row count before the first batch."""
        return bulk.import_parquet(
            self._parts,
            path,
            ai=ai,
            batch_size=batch_size,
            progress=progress,
            sized=sized,
            create_spaces=create_spaces,
        )

    def import_restore(self, stream: BinaryIO, *, progress: Callable[[int], None] | None = None) -> RestoreImportReport:
        """Restore the rows of an ``esfis export`` (``server.bulk.export``): ids, writers, times and
        labels kept, never widened; rows already known are skipped."""
        return bulk.import_restore(self._parts, stream, progress=progress)

    # -- for the settings pages (``server.facade.settings_pages``) -------------------------

    def known_ais(self) -> list[str]:
        """The AIs that have used esfis, hold an active AI token, or have a rule."""
        return settings_pages.known_ais(self._parts)

    def access(self, space: str | Everywhere) -> list[Access]:
        """Each known AI's and everyone's rule at a place, and the decision it makes (DESIGN §3)."""
        return settings_pages.access(self._parts, space)

    def set_access(self, ai: str, space: str | Everywhere, effect: str) -> None:
        """``allow``, ``deny``, or ``inherit`` (the rule removed) for the AI at this place."""
        settings_pages.set_access(self._parts, ai, space, effect)

    def delivery_page(
        self,
        *,
        ai: str | None = None,
        space: str | None = None,
        run: str | None = None,
        page: int = 1,
        per_page: int = 25,
    ) -> tuple[list[Delivery], int]:
        """Deliveries newest first by AI, caller's space and run; one page, and the total."""
        return settings_pages.delivery_page(self._parts, ai=ai, space=space, run=run, page=page, per_page=per_page)

    def run_page(self, *, ai: str | None = None, page: int = 1, per_page: int = 25) -> tuple[list[Run], int]:
        """Runs newest first, optionally one AI's; one page, and the total."""
        return settings_pages.run_page(self._parts, ai=ai, page=page, per_page=per_page)

    # -- the memories themselves (server.facade.curation) -------------------------------------

    def memory_page(self, f: curation.Filter, *, cursor: str | None = None, limit: int = 50) -> curation.Page:
        """Memories newest first under a filter, a keyset page at a time (``next_cursor``)."""
        return curation.page(self._parts, f, cursor=cursor, limit=limit)

    def memory(self, memory_id: str) -> curation.Detail:
        """One memory: its text, what it superseded, the deliveries that included it."""
        return curation.detail(self._parts, memory_id)

    def search_memories(self, query: str, f: curation.Filter, *, limit: int = 10) -> tuple[list[curation.Found], int]:
        """A recall as the operator in the filter's spaces, logged as the operator's; its delivery id."""
        return curation.search(self._parts, query, f, limit=limit)

    def correct_memory(self, memory_id: str, text: str) -> Memory:
        """Replace a memory's text as the operator: the new version supersedes the old."""
        return curation.correct(self._parts, memory_id, text)

    def forget_memory(self, memory_id: str) -> None:
        """Forget one memory for good, as the operator."""
        curation.forget(self._parts, memory_id)

    def preview_forget(self, f: curation.Filter) -> curation.Preview:
        """What a forget by filter would forget: the count, and the row its confirmation stops at."""
        return curation.preview(self._parts, f)

    def forget_where(self, f: curation.Filter, *, up_to: int) -> int:
        """Forget for good what ``preview_forget`` counted (the same filter and its ``up_to``)."""
        return curation.forget_where(self._parts, f, up_to=up_to)

    def space_days(self, space: str | Personal, *, days: int = 30) -> tuple[list[curation.Day], list[curation.Day]]:
        """Memories written per day by AI, and recalls per day with the empty ones: counts only."""
        return curation.days(self._parts, space, days=days)

    def dedupe(self, space: str | Personal, *, dry_run: bool = False) -> FoldReport:
        """Fold a space's copies (memories of the same fact) into their earliest memory by
        superseding the others; resumable, counted; never across spaces
        (``server.memories.folding``). ``dry_run``: count only."""
        place = space_or_personal(self._parts, space)
        return fold_copies_of(
            self._parts.memories,
            self._parts.store,
            partition_key(place),
            place,
            now=self._parts.clock(),
            dry_run=dry_run,
        )


Personal = Literal[Place.PERSONAL]


def space_or_personal(parts: Parts, space: str | Personal) -> str | None:
    """A space the operator names, checked to exist, or None for ``PERSONAL``."""
    if space is PERSONAL:
        return None
    if not isinstance(space, str):
        raise InvalidInput("name a space, or PERSONAL", field="space")
    validate_space_name(space)
    if not parts.registry.exists(space):
        raise SpaceNotFound(f"no space {space!r}")
    return space
