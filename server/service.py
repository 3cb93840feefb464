"""The service façade: the one core that the CLI, HTTP and MCP interfaces all call.

Every verb takes a ``Caller`` (who, from where, over what, in which run) and runs the same
checks: the scope (space → permissions) decides what a caller can see and touch, and an id
outside it answers exactly like an id that never existed. Then the run's gates (``server.barrier.gates``):
the seal, the data barrier on every write, untrusted content on forget. Each step is recorded
in the run's trail in the same transaction as what it did.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import secrets
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from indexing import failpoints
from indexing.batching import BatchingEmbedder
from indexing.embedder import Embedder, load_embedder
from indexing.errors import BadVector, IndexingError
from indexing.store import VectorStore
from server.barrier.contexts import MAX_SHARED, ContextBook
from server.barrier.gates import Ask, Gates
from server.barrier.grants import GrantBook
from server.barrier.labels import ELSEWHERE, Carried, Labels, check_origins, space_mark
from server.barrier.runs import Run, RunBook, Step, run_id_for, standing_run
from server.barrier.trail_upkeep import TRAIL_DAYS
from server.bulk.importer import MAX_BATCH
from server.bulk.journal import sweep
from server.catalog import Catalog, Tx, open_catalog, open_coordination
from server.clock import Clock, parse_time, system_clock
from server.errors import (
    AlreadySuperseded,
    Forbidden,
    InvalidInput,
    MemoryNotFound,
    OutOfReach,
    PolicyDenied,
    StoreUnavailable,
)
from server.home import make_private
from server.memories import MemoryBook
from server.memories.deliveries import DeliveryLog
from server.memories.group_commit import GroupCommit
from server.memories.input import MAX_QUERY_BYTES, NewMemory, check_id, check_text, new_id
from server.memories.journal import JOURNALS, WriteJournal
from server.memories.recall import run_recall
from server.models import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Caller,
    Memory,
    OpenedMemory,
    Recall,
    RecalledMemory,
    Reference,
    Token,
)
from server.operating import OperatorVerbs
from server.settings import Settings
from server.spaces import contains, validate_space_name
from server.spaces.policies import validate_ai
from server.spaces.registry import Registry
from server.spaces.scope import Scope, scope_for
from server.spaces.tokens import TokenBook

if TYPE_CHECKING:
    from server.bulk.backup import BackupReport
    from server.bulk.export import ExportReport
    from server.bulk.reindex import ReindexReport
    from server.bulk.restore import RestoreReport

_log = logging.getLogger("esfis")
RUN_NAME_RULE = "a run name is 1 to 128 of [A-Za-z0-9._:-]"


class Esfis(OperatorVerbs):
    """The one door: agents' verbs here, the operator's in ``OperatorVerbs``."""

    def __init__(
        self,
        catalog: Catalog,
        store: VectorStore,
        embedder: Embedder,
        clock: Clock,
        *,
        home: Path,
        trail_days: int = TRAIL_DAYS,
    ) -> None:
        self.home = home  # ESFIS_HOME: the vectors, the write journals, the keys (the catalog may lie elsewhere)
        self.trail_days = trail_days  # ESFIS_TRAIL_DAYS: runs that are over are pruned after this
        self._closing = threading.Event()
        self.catalog = catalog
        self.store = store
        self.embedder = embedder
        self.clock = clock
        self.registry = Registry(catalog, clock)
        self.journal = WriteJournal(home / JOURNALS)
        self.book = MemoryBook(catalog, store, self.journal)
        self.log = DeliveryLog(catalog)
        self.commits = GroupCommit(catalog)
        self.runs = RunBook(catalog, clock)
        self.grant_book = GrantBook(catalog, clock)
        self.contexts = ContextBook(catalog, clock)
        self.gates = Gates(self.runs, self.grant_book, clock)
        self.token_book = TokenBook(catalog, clock)

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
        """The one place a caller is resolved and checked, for every interface: standing in
        ``space`` if named, else where ``cwd`` lies, else in its token's scope, else nowhere.

        The run is the platform's choice, never the caller's (``server.barrier.runs``). With a
        ``token`` (HTTP), the token decides: a run token is its one run; an agent token's
        requests are its standing run. Otherwise ``run`` names an interface's session (an MCP
        process, a CLI ``--run``; None: this call is a run of its own), and ``owner`` is who the
        name belongs to (default: the transport and the AI)."""
        if token is not None:
            if token.ai is None or token.kind not in ("agent", "run"):
                raise Forbidden("this endpoint acts as an AI: use an agent token or a run token")
            ai, scope = token.ai, token.space
        if ai is None:
            raise InvalidInput("an AI name is required", field="ai")
        validate_ai(ai)
        if run is not None and not _RUN_NAME.fullmatch(run):
            raise InvalidInput(f"invalid run name {run[:40]!r}: {RUN_NAME_RULE}", field="run")
        if space is not None and cwd is not None:
            raise InvalidInput("give space or cwd, not both", field="space")
        if scope is not None and space is None and cwd is None:
            space = scope  # a token confined to a subtree stands in its own space by default
        if space is not None:
            where: str | None = validate_space_name(space)
        elif cwd is not None:
            where = self.registry.space_at(cwd)
        else:
            where = None
        if scope is not None and (where is None or not contains(scope, where)):
            # Before a named space is looked up: a scoped caller learns nothing of other spaces.
            raise OutOfReach(f"this token acts only inside space {scope!r}")
        if space is not None:
            self.registry.require(space)
        common: dict[str, Any] = dict(ai=ai, space=where, transport=transport, scope=scope)
        if token is not None and token.run_id is not None:
            return Caller(
                **common,
                run_id=token.run_id,
                run_name="token",
                run_kind="token",
                run_parent=token.parent_run,
                token_id=token.id,
                run_expires=token.expires_at,
            )
        if token is not None:
            run_id, name = standing_run(token)
            return Caller(
                **common,
                run_id=run_id,
                run_name=name,
                run_kind="standing",
                token_id=token.id,
            )
        name = run if run is not None else "once-" + secrets.token_hex(8)
        return Caller(
            **common,
            run_id=run_id_for(owner or f"{transport}:{ai}", name),
            run_name=name,
            run_kind="session" if run is not None else "once",
        )

    def scope(self, caller: Caller) -> Scope:
        subtree = self.registry.subtree(caller.space) if caller.space is not None else []
        return scope_for(caller, subtree, self.registry.policies())

    def _visible(self, caller: Caller, id_: str, field: str = "id", scope: Scope | None = None) -> Memory:
        """The memory, if the caller may see it; else the same answer as for a random id. The
        scope is checked on the catalog's row: no partition outside it is opened."""
        check_id(id_, field=field)
        memory = self.book.meta(id_)
        if memory is None or memory.forgotten or not (scope or self.scope(caller)).sees(memory.space):
            raise MemoryNotFound(f"no memory {id_}")
        memory = self.book.with_text(memory)
        if memory.forgotten:
            raise MemoryNotFound(f"no memory {id_}")
        return memory

    def _writable(self, caller: Caller, space: str | None) -> Scope:
        """Refuse a write the caller's scope does not allow; the barrier comes after."""
        scope = self.scope(caller)
        if scope.sees(space):
            return scope
        decision = scope.decision_for(space)
        if decision is not None:
            where = "personal memories" if space is None else f"space {space!r}"
            raise PolicyDenied(f"{caller.ai} may not use {where} ({decision.reason})")
        raise OutOfReach(
            "personal memories are out of this token's reach"
            if space is None
            else f"space {space!r} is not reachable from here"
        )

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
    ) -> Memory:
        """Write a memory into the caller's space (or personal). ``labels`` are origin marks;
        ``ask`` asks a person when the barrier needs one (None: nobody can be asked)."""
        text = check_text(text)
        origins = check_origins(labels)
        now = self.clock()
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
        scope = self._writable(caller, target)
        run = self.gates.enter(caller)
        steps = self.gates.write(caller, run, run.carried, target, "remember", text, ask, policies=scope.policies)
        memory = self._new(caller, run, run.carried, target, text, origins, now, until)
        self.book.write([memory], also=self._trail(run, caller, steps, memory))
        return self._shown(scope, self._loaded(memory.id))

    def recall(
        self, caller: Caller, query: str, *, limit: int = DEFAULT_LIMIT, query_vector: np.ndarray | None = None
    ) -> Recall:
        """The best current memories the caller reaches. ``query_vector``, when given, is the
        query's embedding computed beforehand (benchmarks, batch callers); it skips the model."""
        query = check_text(query, field="query", limit=MAX_QUERY_BYTES)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}", field="limit")
        scope = self.scope(caller)
        run = self.gates.enter(caller)
        now = self.clock()
        vector = None
        if scope.allowed:
            vector = self._embed_query(query) if query_vector is None else self._given_vector(query_vector)
        outcome = run_recall(scope, vector, limit, now, self.store, self.book, query)
        marks = _marks(m.labels for m in outcome.memories)
        step = Step("recall", marks, memory_ids=tuple(m.id for m in outcome.memories))

        def bookkeeping(tx: Tx) -> int:
            delivery_id = self.log.record(
                caller, query, limit, now, list(scope.allowed), outcome.items, outcome.cut, tx
            )
            self.runs.record(tx, run, caller, [step], marks)
            return delivery_id

        # Committed with concurrent recalls' when they meet; returns once this one's rows are in.
        delivery_id = self.commits.run(bookkeeping)
        return Recall([self._shown_recalled(scope, m) for m in outcome.memories], delivery_id)

    def get(self, caller: Caller, id_: str) -> Memory:
        scope = self.scope(caller)
        memory = self._visible(caller, id_, scope=scope)
        run = self.gates.enter(caller)
        if memory.superseded_by is not None:
            try:
                self._visible(caller, memory.superseded_by, scope=scope)
            except MemoryNotFound:
                # The successor lives where this caller cannot see: do not name it.
                memory = dataclasses.replace(memory, superseded_by=None)
        marks = memory.labels.marks()
        self.runs.record_now(run, caller, [Step("get", marks, memory_ids=(memory.id,))], marks)
        return self._shown(scope, memory)

    def replace(
        self, caller: Caller, id_: str, text: str, *, space: str | None = None, ask: Ask | None = None
    ) -> Memory:
        """Supersede a memory; the new one lives in ``space`` if given, else in the old one's.
        What the new memory holds is the old one's data and the run's: the barrier judges both."""
        old = self._visible(caller, id_)
        text = check_text(text)
        if space is not None:
            validate_space_name(space)
            if not self.registry.exists(space):
                raise OutOfReach(f"space {space!r} is not reachable from here")
        target = old.space if space is None else space
        scope = self._writable(caller, target)
        if old.superseded_by is not None:
            raise self._superseded(caller, old)
        run = self.gates.enter(caller)
        carried = run.carried.with_marks(old.labels.marks())
        steps = self.gates.write(caller, run, carried, target, "replace", text, ask, policies=scope.policies)
        now = self.clock()
        memory = self._new(caller, run, carried, target, text, (), now, None)
        try:
            self.book.write(
                [memory],
                supersedes=(old.id, now),
                also=self._trail(run, caller, steps, memory, carry=old.labels.marks(), old=old.id),
            )
        except AlreadySuperseded:
            raise self._superseded(caller, self.book.load(old.id) or old) from None
        return self._shown(scope, self._loaded(memory.id))

    def _superseded(self, caller: Caller, old: Memory) -> AlreadySuperseded:
        successor = old.superseded_by
        if successor is not None:
            try:
                self._visible(caller, successor)
                return AlreadySuperseded(f"memory {old.id} is already superseded by {successor}")
            except MemoryNotFound:
                pass
        return AlreadySuperseded(f"memory {old.id} is already superseded")

    def forget(self, caller: Caller, id_: str, *, ask: Ask | None = None) -> None:
        """Forget for good. A run carrying untrusted content needs a person's approval."""
        memory = self._visible(caller, id_)
        run = self.gates.enter(caller)
        trusted = [t.source for t in self.grant_book.trusted()]
        steps = self.gates.forget(caller, run, trusted, memory.space, memory.text or "", ask)
        step = Step("forget", memory.labels.marks(), target=space_mark(memory.space), memory_ids=(memory.id,))

        def trail(tx) -> None:
            self.runs.record(tx, run, caller, [*steps, step])
            self.contexts.scrub(tx, memory.id)

        self.book.forget(memory, self.clock(), also=trail)

    def _new(
        self,
        caller: Caller,
        run: Run,
        carried: Carried,
        target: str | None,
        text: str,
        origins: tuple[str, ...],
        now: datetime,
        until: datetime | None,
    ) -> NewMemory:
        """A memory as the run writes it: it inherits the origin marks the run carries, and names
        the spaces whose data the run carried besides the target."""
        return NewMemory(
            id=new_id(),
            space=target,
            text=text,
            vector=self._embed_documents([text])[0],
            ai=caller.ai,
            created_at=now,
            valid_from=now,
            valid_until=until,
            labels=tuple(sorted({*origins, *carried.origins})),
            run_id=run.id,
            from_spaces=tuple(sorted(carried.spaces - {target} if target is not None else carried.spaces)),
        )

    def _trail(
        self,
        run: Run,
        caller: Caller,
        steps: list[Step],
        memory: NewMemory,
        *,
        carry: tuple[str, ...] = (),
        old: str | None = None,
    ):
        labels = Labels(memory.space, memory.labels, None, run.id, memory.from_spaces).marks()
        write = Step(
            "write",
            labels,
            target=space_mark(memory.space),
            memory_ids=(memory.id,) if old is None else (memory.id, old),
        )
        return lambda tx: self.runs.record(tx, run, caller, [*steps, write], carry)

    def _loaded(self, id_: str) -> Memory:
        memory = self.book.load(id_)
        assert memory is not None
        return memory

    # -- what agents see of labels ----------------------------------------------------------

    def _shown(self, scope: Scope, memory: Memory) -> Memory:
        """A memory as an agent sees it: a ``from`` space it does not reach is not named."""
        shown = _redact(scope, memory.from_spaces)
        return memory if shown == memory.from_spaces else dataclasses.replace(memory, from_spaces=shown)

    def _shown_recalled(self, scope: Scope, memory: RecalledMemory) -> RecalledMemory:
        shown = _redact(scope, memory.labels.from_)
        if shown == memory.labels.from_:
            return memory
        return dataclasses.replace(memory, labels=dataclasses.replace(memory.labels, from_=shown))

    # -- context by reference ---------------------------------------------------------------

    def share(self, caller: Caller, ids: list[str]) -> Reference:
        """A reference to memories this caller sees: labels, digests and runs, never texts."""
        if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_SHARED:
            raise InvalidInput(f"memory_ids must be a list of 1 to {MAX_SHARED} ids", field="memory_ids")
        scope = self.scope(caller)
        memories = [self._visible(caller, i, "memory_ids", scope=scope) for i in dict.fromkeys(ids)]
        run = self.gates.enter(caller)
        reference = self.contexts.create(run.id, [(m.id, m.labels) for m in memories])
        self.runs.record_now(
            run, caller, [Step("share", _marks(m.labels for m in memories), memory_ids=tuple(m.id for m in memories))]
        )
        return self._shown_reference(scope, reference)

    def open_context(self, caller: Caller, ref: str) -> tuple[Reference, list[OpenedMemory]]:
        """The memories of a reference, when this run reaches every label in it (or a grant
        covers the crossing); opening adds the labels to the run."""
        reference = self.contexts.get(ref)
        scope = self.scope(caller)
        run = self.gates.enter(caller)
        labels = [labels for _, labels in reference.items]
        marks = _marks(labels)
        spaces = [s for l in labels for s in l.spaces()]
        steps = self.gates.open(caller, run, spaces, scope.reaches, marks, policies=scope.policies)
        opened = []
        for memory_id, shared in reference.items:
            memory = self.book.load(memory_id)
            text = None if memory is None or memory.forgotten else memory.text
            opened.append(OpenedMemory(memory_id, text, shared))
        carry = _marks(o.labels for o in opened if o.text is not None)
        step = Step("context_open", marks, memory_ids=tuple(o.id for o in opened))
        self.runs.record_now(run, caller, [*steps, step], carry)
        return self._shown_reference(scope, reference), [
            dataclasses.replace(o, labels=_redact_labels(scope, o.labels)) for o in opened
        ]

    def _shown_reference(self, scope: Scope, reference: Reference) -> Reference:
        items = tuple((i, _redact_labels(scope, l)) for i, l in reference.items)
        return dataclasses.replace(reference, items=items)

    # -- runs ---------------------------------------------------------------------------------

    def open_run(self, token: Token, *, space: str | None = None, ttl: str | int | None = None) -> tuple[Token, str]:
        """A run token for an agent session (``POST /v1/runs``): the harness gives the model
        only this token. Refused for a run token and an operator token."""
        return self.token_book.open_run(token, space=space, ttl=ttl)

    def warm_up(self) -> None:
        """Load the model and the vector engine now, so the first request does not pay for them."""
        try:
            self.embedder.load()
            _ = self.store.session  # imports the vector engine
        except IndexingError as exc:
            raise StoreUnavailable(str(exc)) from exc

    # -- embedding --------------------------------------------------------------------------

    def _embed_documents(self, texts: list[str]):
        try:
            return self.embedder.embed_documents(texts)
        except IndexingError as exc:
            raise StoreUnavailable(str(exc)) from exc

    def _given_vector(self, vector: np.ndarray) -> np.ndarray:
        try:
            return self.store.check_vectors(np.asarray(vector, dtype=np.float32)[None])[0]
        except BadVector as exc:
            raise InvalidInput(str(exc), field="query_vector") from None

    def _embed_query(self, text: str):
        try:
            return self.embedder.embed_query(text)
        except IndexingError as exc:
            raise StoreUnavailable(str(exc)) from exc

    def recover(self) -> None:
        """Finish what killed processes left: orphan rows of their writes purged, their forgets
        finished. A step that fails is logged and left for the next open."""
        for step in (lambda: sweep(self.home / JOURNALS, self.catalog, self.store), self.book.finish_forgets):
            try:
                step()
            except Exception:
                _log.warning("recovery at open did not finish; the next open tries again", exc_info=True)

    def __enter__(self) -> Esfis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing.set()
        if isinstance(self.embedder, BatchingEmbedder):
            _log.info("embedding batches: %s", self.embedder.summary())
        self.journal.close()
        _close_all(self.catalog, self.store.coordination, self.store)


def reindex_store(
    settings: Settings | None = None,
    *,
    embedder: Embedder | None = None,
    batch: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> ReindexReport:
    """Embed every memory again with the configured model (``server.bulk.reindex``): the one door
    that opens the store without the model it was built with."""
    from server.bulk.reindex import BATCH, reindex

    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH):
        raise InvalidInput(f"batch size must be from 1 to {MAX_BATCH}", field="batch_size")  # as an import's
    settings = settings or Settings.from_env()
    if settings.vectors is not None:
        raise InvalidInput(
            "esfis reindex works on a store in ESFIS_HOME; a store on S3 (ESFIS_VECTORS) "
            "has servers on other machines this command cannot see",
            field="ESFIS_VECTORS",
        )
    failpoints.arm(settings.failpoints)
    make_private(settings.home)
    try:
        embedder = embedder or load_embedder(settings.model, settings.embedder, settings.device, settings.cache)
        return reindex(settings.home, embedder, batch=batch or BATCH, progress=progress)
    except IndexingError as exc:  # the model, or a store the reindex cannot open
        raise StoreUnavailable(str(exc)) from exc


def backup_home(
    target: str | os.PathLike[str], settings: Settings | None = None, *, progress: Callable[[int], None] | None = None
) -> BackupReport:
    """``esfis backup``: a consistent copy of the home (``server.bulk.backup``), opened without the
    model (the store says which one its vectors were made with)."""
    from server.bulk.backup import backup

    settings = settings or Settings.from_env()
    failpoints.arm(settings.failpoints)
    catalog, store = _open_without_model(settings)
    try:
        return backup(catalog, store, Path(target).absolute(), clock=system_clock, progress=progress)
    finally:
        _close_all(catalog, store.coordination, store)


def restore_home(
    source: str | os.PathLike[str],
    settings: Settings | None = None,
    *,
    forgets_from: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> RestoreReport:
    """``esfis restore``: a backup into this (empty) home. ``forgets_from`` names the live home
    (a folder, or its catalog's postgresql:// URL) whose forgets are applied after."""
    from server.bulk.restore import restore

    settings = settings or Settings.from_env()
    failpoints.arm(settings.failpoints)
    make_private(settings.home)  # the umask too: every file restored is its owner's only
    live = None
    if forgets_from is not None:
        where = Path(forgets_from).expanduser()
        if not re.match(r"postgres(ql)?://", forgets_from) and not (where / "esfis.db").is_file():
            raise InvalidInput(
                f"--forgets-from {forgets_from}: no catalog there (a home folder or a postgresql:// URL)",
                field="forgets_from",
            )
        live = open_catalog(
            Settings(home=where, model=None)
            if not re.match(r"postgres(ql)?://", forgets_from)
            else Settings(home=settings.home, model=None, catalog=forgets_from)
        )
    try:
        return restore(
            Path(source).absolute(),
            settings.home.absolute(),
            forgets_from=live,
            catalog_url=settings.catalog,
            vectors_uri=settings.vectors,
            progress=progress,
        )
    finally:
        _close_all(live)


def export_home(
    out,
    settings: Settings | None = None,
    *,
    spaces: list[str] | None = None,
    vectors: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ExportReport:
    """``esfis export``: every current memory as JSON Lines into ``out`` (``server.bulk.export``)."""
    from server.bulk.export import export

    settings = settings or Settings.from_env()
    catalog, store = _open_without_model(settings)
    try:
        return export(catalog, store, out, now=system_clock(), spaces=spaces, vectors=vectors, progress=progress)
    finally:
        _close_all(catalog, store.coordination, store)


def _open_without_model(settings: Settings) -> tuple[Catalog, VectorStore]:
    """The catalog and the store for a command that reads vectors but never embeds."""
    from indexing.location import Location, read_manifest

    make_private(settings.home)
    catalog = open_catalog(settings)
    try:
        if settings.vectors is not None:
            recorded = read_manifest(Location.of(settings.vectors, settings.vectors_path))
        else:
            path = settings.vectors_path / "store.json"
            recorded = json.loads(path.read_text()) if path.is_file() else None
        if recorded is None:
            raise InvalidInput(f"there is no vector store in {settings.vectors or settings.vectors_path}", field="home")
        store = VectorStore(
            settings.vectors or settings.vectors_path,
            local=settings.vectors_path,
            model=recorded["model"],
            dimension=int(recorded["dimension"]),
            coordination=open_coordination(settings),
        )
    except IndexingError as exc:  # a reindex under way, say
        catalog.close()
        raise StoreUnavailable(str(exc)) from exc
    except BaseException:
        catalog.close()
        raise
    return catalog, store


_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\x00]*)?$")


def _open_store(settings: Settings, embedder: Embedder, coordination) -> VectorStore:
    if settings.vectors is not None and not _S3_URI.match(settings.vectors):
        raise StoreUnavailable(
            f"ESFIS_VECTORS must be s3://bucket/prefix (unset: the partitions in ESFIS_HOME), "
            f"not {settings.vectors[:200]!r}"
        )
    where = settings.vectors or settings.vectors_path
    if settings.vectors is None:
        from server.bulk.reindex import finish_swap

        finish_swap(settings.home)  # a reindex killed while swapping stores: finished, never opened half-way
    try:
        return VectorStore(
            where,
            local=settings.vectors_path,
            model=embedder.name,
            dimension=embedder.dimension,
            prompts=embedder.prompts,
            coordination=coordination,
        )
    except (OSError, RuntimeError, ValueError) as exc:  # an object store that cannot be reached (Lance's IO errors)
        if settings.vectors is None:
            raise
        raise StoreUnavailable(f"cannot open the vector store at {settings.vectors} (ESFIS_VECTORS): {exc}") from exc


def _close_all(*handles) -> None:
    for handle in handles:
        close = getattr(handle, "close", None)
        if close is not None:
            close()


_RUN_NAME = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def _marks(labels) -> tuple[str, ...]:
    return tuple(sorted({mark for l in labels for mark in l.marks()}))


def _redact(scope: Scope, spaces: tuple[str, ...]) -> tuple[str, ...]:
    """``from`` spaces as an agent may see them: one it does not reach is not named."""
    return tuple(s if scope.reaches(s) else ELSEWHERE for s in spaces)


def _redact_labels(scope: Scope, labels: Labels) -> Labels:
    """Labels of a memory that crossed under a grant: its own space is not named either."""
    space = labels.space if labels.space is None or scope.reaches(labels.space) else ELSEWHERE
    return dataclasses.replace(labels, space=space, from_=_redact(scope, labels.from_))


def open_service(
    settings: Settings | None = None,
    *,
    embedder: Embedder | None = None,
    clock: Clock = system_clock,
    batching: bool = False,
) -> Esfis:
    """The one place a service is built: catalog, vector store, embedder, clock. ``batching``
    (a server's): concurrent requests' texts are embedded together (``settings.batch_window_ms``)."""
    settings = settings or Settings.from_env()
    failpoints.arm(settings.failpoints)
    make_private(settings.home)  # before the store writes a file there
    catalog = open_catalog(settings)  # first: an unreachable catalog is said before a model loads
    coordination = None
    try:
        coordination = open_coordination(settings)
        embedder = embedder or load_embedder(settings.model, settings.embedder, settings.device, settings.cache)
        if batching and settings.batch_window_ms > 0:
            embedder = BatchingEmbedder(embedder, window=settings.batch_window_ms / 1000)
        store = _open_store(settings, embedder, coordination)
    except IndexingError as exc:
        _close_all(catalog, coordination)
        raise StoreUnavailable(str(exc)) from exc
    except BaseException:
        _close_all(catalog, coordination)
        raise
    service = Esfis(catalog, store, embedder, clock, home=settings.home, trail_days=settings.trail_days)
    service.recover()
    return service
