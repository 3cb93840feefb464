"""The service façade: the one object that the CLI, HTTP, MCP and web interfaces all call.

Every verb takes a ``Caller`` (who, from where, over what, in which run) and runs the same
checks: the scope (space → permissions, ``server.facade.reach``) decides what a caller can see
and touch, and an id outside it answers exactly like an id that never existed. Then the run's
gates (``server.barrier.gates``): the seal, the data barrier on every write, untrusted content
on forget. Each step is recorded in the run's trail in the same transaction as what it did.
Each verb's work lives in a module of its own, the door only delegates: the writes
(``remembering``), recall's pipeline (``recall``), listings (``browsing``), context by
reference (``references``), held calls (``approvals``), and a long-lived server's upkeep
(``upkeep``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from datetime import datetime
from pathlib import Path

import numpy as np

import server.facade.approvals as held_calls
import server.facade.browsing as browsing
import server.facade.reach as reach
import server.facade.recall as recalling
import server.facade.references as references
import server.facade.remembering as remembering
import server.facade.upkeep as upkeep
from indexing.embedding.batching import BatchingEmbedder
from indexing.errors import IndexingError
from server.barrier.runs import Step
from server.clock import Clock
from server.errors import MemoryNotFound, StoreUnavailable
from server.facade.callers import resolve_caller
from server.facade.connections import Connections, RateCounters
from server.facade.health import Standing, standing
from server.facade.operator import Operator
from server.facade.parts import Parts
from server.facade.shown import shown
from server.models import DEFAULT_LIMIT, Ask, Caller, Held, Memory, OpenedMemory, Recall, Reference, Token
from server.spaces.scope import Scope

_log = logging.getLogger("esfis")


class Esfis:
    """The one door. Agents' verbs are its methods, each taking a ``Caller``; the operator's are
    on ``operator`` (``server.facade.operator``). Both hold the same ``Parts``, privately."""

    operator: Operator
    connections: Connections
    rates: RateCounters

    def __init__(self, parts: Parts) -> None:
        """Over ``parts`` (``Parts.over``: the books over one catalog and one store), which it
        holds and closes."""
        self._parts = parts
        self._closing = threading.Event()
        self.operator = Operator(self._parts)
        self.connections = Connections(self._parts)
        self.rates = RateCounters(self._parts)

    @property
    def home(self) -> Path:
        """ESFIS_HOME: the vectors, the write journals, the keys (the catalog may lie elsewhere)."""
        return self._parts.home

    @property
    def clock(self) -> Clock:
        """The service's clock (every time it records is read from it)."""
        return self._parts.clock

    # -- callers and scope ------------------------------------------------------------------

    def caller(
        self,
        ai: str | None = None,
        *,
        space: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        transport: str = "cli",
        run: str | None = None,
        owner: str | None = None,
        scope: str | None = None,
        token: Token | None = None,
    ) -> Caller:
        """Who calls, from where, in which run (``server.facade.callers.resolve_caller``)."""
        return resolve_caller(
            self._parts.registry,
            ai,
            space=space,
            cwd=cwd,
            transport=transport,
            run=run,
            owner=owner,
            scope=scope,
            token=token,
        )

    def scope(self, caller: Caller) -> Scope:
        """What ``caller`` may see and touch now (``server.facade.reach``)."""
        return reach.scope_of(self._parts, caller)

    # -- memories ---------------------------------------------------------------------------

    def remember(
        self,
        caller: Caller,
        text: str,
        *,
        personal: bool = False,
        valid_until: str | datetime | None = None,
        labels: list[str] | None = None,
        ask: Ask | None = None,
        hold: bool = False,
        dedupe: bool = True,
        data: object = None,
    ) -> Memory | Held:
        """Write a memory into the caller's space (or personal). ``labels`` are origin marks;
        ``ask`` asks a person when the barrier needs one (None: nobody can be asked); with
        ``hold``, a write nobody could approve at the call is held for the operator, and its
        ``Held`` answered instead (``server.barrier.approvals``). With ``dedupe`` (the default),
        a fact the target space holds already is not stored again: the answer is that memory,
        marked ``duplicate_of``; memories close to it are answered as ``similar``
        (``server.memories.duplicates``). ``data``: the writer's metadata, a JSON object
        (``server.memories.data``)."""
        return remembering.remember(
            self._parts,
            caller,
            text,
            personal=personal,
            valid_until=valid_until,
            labels=labels,
            ask=ask,
            hold=hold,
            dedupe=dedupe,
            data=data,
        )

    def recall(
        self,
        caller: Caller,
        query: str | None,
        *,
        limit: int = DEFAULT_LIMIT,
        query_vector: np.ndarray | None = None,
        as_of: str | datetime | None = None,
        where: object = None,
    ) -> Recall:
        """The best current memories the caller reaches. ``query_vector``, when given, is the
        query's embedding computed beforehand (benchmarks, batch callers); it skips the model.
        ``as_of`` (a time, not after now): the memories valid then instead, superseded since
        included, forgotten never. ``where``: a filter over the memories' data
        (``server.memories.data_filter``), applied before relevance; with it, the query may be
        None or empty: the newest memories that match."""
        return recalling.recall(
            self._parts, caller, query, limit=limit, query_vector=query_vector, as_of=as_of, where=where
        )

    def get(self, caller: Caller, id_: str) -> Memory:
        scope = reach.scope_of(self._parts, caller)
        memory = reach.visible(self._parts, caller, id_, scope=scope)
        run = self._parts.gates.enter(caller)
        if memory.superseded_by is not None:
            try:
                reach.visible(self._parts, caller, memory.superseded_by, scope=scope)
            except MemoryNotFound:
                # The successor lives where this caller cannot see: do not name it.
                memory = dataclasses.replace(memory, superseded_by=None)
        marks = memory.labels.marks()
        self._parts.runs.record_now(run, caller, [Step("get", marks, memory_ids=(memory.id,))], carry=marks)
        return shown(scope, memory)

    def replace(
        self,
        caller: Caller,
        id_: str,
        text: str,
        *,
        space: str | None = None,
        ask: Ask | None = None,
        hold: bool = False,
        data: object = None,
    ) -> Memory | Held:
        """Supersede a memory; the new one lives in ``space`` if given, else in the old one's.
        What the new memory holds is the old one's data and the run's: the barrier judges both.
        ``data``: the new version's metadata; without it, the new version carries none (a
        replace states the whole new memory)."""
        return remembering.replace(self._parts, caller, id_, text, space=space, ask=ask, hold=hold, data=data)

    def forget(self, caller: Caller, id_: str, *, ask: Ask | None = None, hold: bool = False) -> Held | None:
        """Forget for good. A run carrying untrusted content needs a person's approval (held
        for the operator with ``hold``). An approval's id (``apr_…``) of the caller's own run
        withdraws that held call: its text leaves the catalog."""
        return remembering.forget(self._parts, caller, id_, ask=ask, hold=hold)

    def check_approval(self, caller: Caller, approval_id: str) -> Held:
        """A held call of the caller's own (its run's or its token's): pending, approved (with
        the memory it made), declined, expired, void or withdrawn. Any other id answers as one
        that never existed."""
        return held_calls.check(self._parts, caller, approval_id)

    # -- context by reference ---------------------------------------------------------------

    def share(self, caller: Caller, ids: list[str]) -> Reference:
        """A reference to memories this caller sees: labels, digests and runs, never texts
        (``server.facade.references``)."""
        return references.share(self._parts, caller, ids)

    def open_context(self, caller: Caller, ref: str) -> tuple[Reference, list[OpenedMemory]]:
        """The memories of a reference, when this run reaches every label in it (or a grant
        covers the crossing); opening adds the labels to the run."""
        return references.open_context(self._parts, caller, ref)

    def authenticate(self, authorization: str | None) -> Token:
        """The active token an ``Authorization`` header names; one ``Unauthorized`` for anything else."""
        return self._parts.tokens.authenticate(authorization)

    # -- runs ---------------------------------------------------------------------------------

    def open_run(self, token: Token, *, space: str | None = None, ttl: str | int | None = None) -> tuple[Token, str]:
        """A run token for an agent session (``POST /v1/runs``): the harness gives the model
        only this token. Refused for a run token and an operator token."""
        return self._parts.tokens.open_run(token, space=space, ttl=ttl)

    def warm_up(self) -> None:
        """Load the model and the vector engine now, so the first request does not pay for them."""
        try:
            self._parts.embedder.load()
            _ = self._parts.store.session  # imports the vector engine
        except IndexingError as exc:
            raise StoreUnavailable(str(exc)) from exc

    def standing(self) -> Standing:
        """The disk's room and the catalog's reach, for ``/healthz`` (``server.facade.health``)."""
        return standing(self._parts)

    def recover(self) -> None:
        """Finish what killed processes left (``server.facade.upkeep.recover``)."""
        upkeep.recover(self._parts)

    def __enter__(self) -> Esfis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing.set()
        if isinstance(self._parts.embedder, BatchingEmbedder):
            _log.info("embedding batches: %s", self._parts.embedder.summary())
        self._parts.journal.close()
        close_all(self._parts.catalog, self._parts.store.coordination, self._parts.store)

    # -- a long-lived server's upkeep -----------------------------------------------------

    def start_upkeep(self) -> None:
        """In the background, until ``close``: the catalog's checkpoints (no request's commit waits
        for the WAL's copy-back), and the upkeep's rounds (``server.facade.upkeep``)."""
        self._parts.catalog.checkpoint_in_background()
        threading.Thread(
            target=upkeep.keep_up,
            args=(
                self._closing,
                self.operator,
                self.connections,
                self.rates,
                self._parts.deliveries,
                self._parts.catalog,
            ),
            name="esfis-trail-upkeep",
            daemon=True,
        ).start()

    # -- what an agent may read, listed (server.facade.browsing) ------------------------------

    def list_spaces(
        self, caller: Caller, *, within: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> browsing.SpacePage:
        """A page of the spaces ``caller`` reads, by name; ``personal``: it reads personal memories."""
        return browsing.spaces(self._parts, caller, within=within, cursor=cursor, limit=limit)

    def list_memories(
        self,
        caller: Caller,
        *,
        within: str | None = None,
        below: bool = True,
        where: object = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> browsing.MemoryPage:
        """A page of the memories ``caller`` reads, newest first; read by its run as a recall's are."""
        return browsing.memories(
            self._parts, caller, within=within, below=below, where=where, cursor=cursor, limit=limit
        )


def close_all(*handles: object) -> None:
    for handle in handles:
        close = getattr(handle, "close", None)
        if close is not None:
            close()
