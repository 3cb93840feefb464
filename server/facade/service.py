"""The service façade: the one object that the CLI, HTTP, MCP and web interfaces all call.

Every verb takes a ``Caller`` (who, from where, over what, in which run) and runs the same
checks: the scope (space → permissions, ``server.facade.reach``) decides what a caller can see
and touch, and an id outside it answers exactly like an id that never existed. Then the run's
gates (``server.barrier.gates``): the seal, the data barrier on every write, untrusted content
on forget. Each step is recorded in the run's trail in the same transaction as what it did.
Beside the verbs: context by reference (``references``), held calls (``approvals``), and a
long-lived server's upkeep (``upkeep``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from datetime import datetime
from pathlib import Path

import numpy as np

import server.facade.approvals as held_calls
import server.facade.browsing as browsing
import server.facade.reach as reach
import server.facade.references as references
import server.facade.upkeep as upkeep
from indexing.embedding.batching import BatchingEmbedder
from indexing.errors import IndexingError
from server.barrier.approvals import is_approval_id
from server.barrier.gates import HeldCall
from server.barrier.labels import check_origins, space_mark
from server.barrier.runs import Step
from server.catalog import Tx
from server.clock import Clock, as_of_time, parse_time
from server.errors import AlreadySuperseded, InvalidInput, MemoryNotFound, OutOfReach, StoreUnavailable
from server.facade.callers import resolve_caller
from server.facade.connections import Connections, RateCounters
from server.facade.health import Standing, standing
from server.facade.operator import Operator
from server.facade.parts import Parts
from server.facade.shown import marks_of, shown, shown_recalled
from server.facade.writing import already_there, duplicate_answer, new_memory, write_trail
from server.memories.data import check_data, stored
from server.memories.data_filter import parse_filter
from server.memories.input import MAX_QUERY_BYTES, check_text
from server.memories.recall import run_recall
from server.metrics import time_stage
from server.models import DEFAULT_LIMIT, MAX_LIMIT, Ask, Caller, Held, Memory, OpenedMemory, Recall, Reference, Token
from server.spaces import validate_space_name
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
        text = check_text(text)
        data = check_data(data)
        origins = check_origins(labels)
        now = self._parts.clock()
        until = None if valid_until is None else parse_time(valid_until, now=now, field="valid_until")
        if until is not None and until <= now:
            raise InvalidInput("valid_until must lie in the future", field="valid_until")
        if not personal and caller.space is None:
            raise InvalidInput(
                "this caller stands in no space: register the folder (esfis space add), "
                "name a space, or write a personal memory",
                field="space",
            )
        target = None if personal else caller.space
        scope = reach.writable(self._parts, caller, target)
        self._parts.room.check()  # a full disk refuses before the model runs or the trail moves
        run = self._parts.gates.enter(caller)
        steps = self._parts.gates.write(
            caller,
            run,
            carried=run.carried,
            target=target,
            action="remember",
            text=text,
            ask=ask,
            policies=scope.policies,
            hold=HeldCall(origins=origins, valid_until=until) if hold else None,
            data=stored(data),
        )
        if isinstance(steps, Held):
            return steps
        memory = new_memory(
            self._parts,
            caller,
            run,
            carried=run.carried,
            target=target,
            text=text,
            origins=origins,
            now=now,
            until=until,
            data=data,
        )
        found = already_there(self._parts, memory, dedupe=dedupe)
        if found.duplicate_of is not None:
            existing = self._loaded(found.duplicate_of)
            if existing.data == memory.data:
                return shown(scope, duplicate_answer(self._parts, run, caller, steps, existing))
            # The same fact under other data is another memory: its data would be lost otherwise.
            found = dataclasses.replace(found, duplicate_of=None)
        self._parts.memories.write([memory], also=write_trail(self._parts, run, caller, steps, memory))
        return dataclasses.replace(shown(scope, self._loaded(memory.id)), similar=found.similar)

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
        data_filter = parse_filter(where)
        listing = data_filter is not None and (query is None or (isinstance(query, str) and not query.strip()))
        query = "" if listing else check_text(query, field="query", limit=MAX_QUERY_BYTES)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}", field="limit")
        now = self._parts.clock()
        at = None if as_of is None else as_of_time(as_of, now=now)
        scope = reach.scope_of(self._parts, caller)
        run = self._parts.gates.enter(caller)
        vector = None
        if scope.allowed and not listing:
            embedding = time.perf_counter()
            vector = self._parts.embed_query(query) if query_vector is None else self._parts.given_vector(query_vector)
            time_stage("embedding", time.perf_counter() - embedding)
        outcome = run_recall(
            scope,
            vector,
            limit=limit,
            now=now,
            store=self._parts.store,
            book=self._parts.memories,
            query_text=query or None,
            as_of=at,
            data_filter=data_filter,
        )
        marks = marks_of(m.labels for m in outcome.memories)
        step = Step("recall", marks, memory_ids=tuple(m.id for m in outcome.memories))

        def bookkeeping(tx: Tx) -> int:
            delivery_id = self._parts.deliveries.record(
                tx,
                caller,
                query=query,
                limit=limit,
                at=now,
                searched=list(scope.allowed),
                items=outcome.items,
                cut=outcome.cut,
            )
            self._parts.runs.record(tx, run, caller, steps=[step], carry=marks)
            return delivery_id

        # Committed with concurrent recalls' when they meet; returns once this one's rows are in.
        # Flushed to the disk first only when the run opens or its marks grow (the barrier's
        # memory); otherwise a power cut may lose the record, never a killed process
        # (docs/guarantees.md, "What a power cut may take").
        durable = not run.opened or not set(marks) <= set(run.carried.marks())
        logged = time.perf_counter()
        delivery_id = self._parts.commits.run(bookkeeping, durable=durable)
        time_stage("delivery_log", time.perf_counter() - logged)
        return Recall([shown_recalled(scope, m) for m in outcome.memories], delivery_id)

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
        old = reach.visible(self._parts, caller, id_)
        text = check_text(text)
        data = check_data(data)
        if space is not None:
            validate_space_name(space)
            if not self._parts.registry.exists(space):
                raise OutOfReach(f"space {space!r} is not reachable from here")
        target = old.space if space is None else space
        scope = reach.writable(self._parts, caller, target)
        if old.superseded_by is not None:
            raise reach.superseded(self._parts, caller, old)
        self._parts.room.check()
        run = self._parts.gates.enter(caller)
        carried = run.carried.with_marks(old.labels.marks())
        steps = self._parts.gates.write(
            caller,
            run,
            carried=carried,
            target=target,
            action="replace",
            text=text,
            ask=ask,
            policies=scope.policies,
            hold=HeldCall(memory_id=old.id) if hold else None,
            data=stored(data),
        )
        if isinstance(steps, Held):
            return steps
        now = self._parts.clock()
        memory = new_memory(
            self._parts,
            caller,
            run,
            carried=carried,
            target=target,
            text=text,
            origins=(),
            now=now,
            until=None,
            data=data,
        )
        try:
            self._parts.memories.write(
                [memory],
                supersedes=(old.id, now),
                also=write_trail(self._parts, run, caller, steps, memory, carry=old.labels.marks(), old=old.id),
            )
        except AlreadySuperseded:
            raise reach.superseded(self._parts, caller, self._parts.memories.load(old.id) or old) from None
        return shown(scope, self._loaded(memory.id))

    def forget(self, caller: Caller, id_: str, *, ask: Ask | None = None, hold: bool = False) -> Held | None:
        """Forget for good. A run carrying untrusted content needs a person's approval (held
        for the operator with ``hold``). An approval's id (``apr_…``) of the caller's own run
        withdraws that held call: its text leaves the catalog."""
        if is_approval_id(id_):
            held_calls.withdraw(self._parts, caller, id_)
            return None
        memory = reach.visible(self._parts, caller, id_)
        run = self._parts.gates.enter(caller)
        trusted = [t.source for t in self._parts.grants.trusted()]
        steps = self._parts.gates.forget(
            caller,
            run,
            trusted=trusted,
            target=memory.space,
            text=memory.text or "",
            ask=ask,
            hold=HeldCall(memory_id=memory.id) if hold else None,
        )
        if isinstance(steps, Held):
            return steps
        step = Step("forget", memory.labels.marks(), target=space_mark(memory.space), memory_ids=(memory.id,))

        def trail(tx) -> None:
            self._parts.runs.record(tx, run, caller, steps=[*steps, step])
            self._parts.contexts.scrub(tx, memory.id)

        self._parts.memories.forget(memory, self._parts.clock(), also=trail)
        return None

    def check_approval(self, caller: Caller, approval_id: str) -> Held:
        """A held call of the caller's own (its run's or its token's): pending, approved (with
        the memory it made), declined, expired, void or withdrawn. Any other id answers as one
        that never existed."""
        return held_calls.check(self._parts, caller, approval_id)

    def _loaded(self, id_: str) -> Memory:
        memory = self._parts.memories.load(id_)
        assert memory is not None
        return memory

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
            args=(self._closing, self.operator, self.connections, self.rates),
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
