"""The service façade: the one core that the CLI, HTTP and MCP interfaces all call.

Every verb takes a ``Caller`` (who, from where, over what) and runs the same checks: the scope
(space → permissions) decides what a caller can see and touch, and an id outside it answers
exactly like an id that never existed.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime

import numpy as np

from indexing.embedder import Embedder, load_embedder
from indexing.errors import BadVector, IndexingError
from indexing.store import VectorStore
from server.catalog import Catalog
from server.clock import Clock, parse_time, system_clock
from server.deliveries import DeliveryLog, explain
from server.errors import (
    AlreadySuperseded,
    InvalidInput,
    MemoryNotFound,
    OutOfReach,
    PolicyDenied,
    RuleNotFound,
    SpaceNotEmpty,
    StoreUnavailable,
)
from server.home import make_private
from server.memories import MAX_QUERY_BYTES, MemoryBook, NewMemory, check_id, check_labels, check_text, new_id
from server.models import Caller, Delivery, Memory, Recall, Space, Why
from server.policies import Effect, Rule, validate_ai
from server.recall import DEFAULT_LIMIT, MAX_LIMIT, run_recall
from server.registry import Registry
from server.scope import Scope, scope_for
from server.settings import Settings
from server.spaces import contains, validate_space_name


class Esfis:
    def __init__(self, catalog: Catalog, store: VectorStore, embedder: Embedder, clock: Clock) -> None:
        self.catalog = catalog
        self.store = store
        self.embedder = embedder
        self.clock = clock
        self.registry = Registry(catalog, clock)
        self.book = MemoryBook(catalog, store)
        self.log = DeliveryLog(catalog)

    # -- callers and scope ------------------------------------------------------------------

    def caller(
        self,
        ai: str,
        *,
        space: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        transport: str = "cli",
        run_id: str | None = None,
        scope: str | None = None,
    ) -> Caller:
        """A caller standing in ``space`` if named, else where ``cwd`` lies, else nowhere."""
        validate_ai(ai)
        if space is not None:
            validate_space_name(space)
            if scope is not None and not contains(scope, space):
                # Before looking the space up: a scoped caller learns nothing about other spaces.
                raise OutOfReach(f"this token acts only inside space {scope!r}")
            self.registry.require(space)
            where: str | None = space
        elif cwd is not None:
            where = self.registry.space_at(cwd)
        else:
            where = None
        return Caller(ai=ai, space=where, transport=transport, run_id=run_id, scope=scope)  # type: ignore[arg-type]

    def scope(self, caller: Caller) -> Scope:
        subtree = self.registry.subtree(caller.space) if caller.space is not None else []
        return scope_for(caller, subtree, self.registry.policies())

    def _visible(self, caller: Caller, id_: str, field: str = "id") -> Memory:
        """The memory, if the caller may see it; else the same answer as for a random id."""
        check_id(id_, field=field)
        memory = self.book.load(id_)
        if memory is None or memory.forgotten or not self.scope(caller).sees(memory.space):
            raise MemoryNotFound(f"no memory {id_}")
        return memory

    def _writable(self, caller: Caller, space: str | None) -> None:
        """Refuse a write the caller's scope does not allow (the data barrier joins here)."""
        scope = self.scope(caller)
        if scope.sees(space):
            return
        decision = scope.decision_for(space)
        if decision is not None:
            where = "personal memories" if space is None else f"space {space!r}"
            raise PolicyDenied(f"{caller.ai} may not use {where} ({decision.reason})")
        raise OutOfReach(
            "personal memories are out of this token's reach" if space is None
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
    ) -> Memory:
        text = check_text(text)
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
        self._writable(caller, target)
        memory = NewMemory(
            id=new_id(),
            space=target,
            text=text,
            vector=self._embed_documents([text])[0],
            ai=caller.ai,
            created_at=now,
            valid_from=now,
            valid_until=until,
            labels=check_labels(labels),
            run_id=caller.run_id,
        )
        self.book.write([memory])
        return self._loaded(memory.id)

    def recall(
        self, caller: Caller, query: str, *, limit: int = DEFAULT_LIMIT, query_vector: np.ndarray | None = None
    ) -> Recall:
        """The best current memories the caller reaches. ``query_vector``, when given, is the
        query's embedding computed beforehand (benchmarks, batch callers); it skips the model."""
        query = check_text(query, field="query", limit=MAX_QUERY_BYTES)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}", field="limit")
        scope = self.scope(caller)
        now = self.clock()
        vector = None
        if scope.allowed:
            vector = self._embed_query(query) if query_vector is None else self._given_vector(query_vector)
        outcome = run_recall(scope, vector, limit, now, self.store, self.book)
        delivery_id = self.log.record(caller, query, limit, now, list(scope.allowed), outcome.items, outcome.cut)
        return Recall(outcome.memories, delivery_id)

    def get(self, caller: Caller, id_: str) -> Memory:
        memory = self._visible(caller, id_)
        if memory.superseded_by is not None:
            try:
                self._visible(caller, memory.superseded_by)
            except MemoryNotFound:
                # The successor lives where this caller cannot see: do not name it.
                memory = dataclasses.replace(memory, superseded_by=None)
        return memory

    def replace(self, caller: Caller, id_: str, text: str, *, space: str | None = None) -> Memory:
        old = self._visible(caller, id_)
        text = check_text(text)
        if space is not None:
            validate_space_name(space)
            if not self.registry.exists(space):
                raise OutOfReach(f"space {space!r} is not reachable from here")
        target = old.space if space is None else space
        self._writable(caller, target)
        if old.superseded_by is not None:
            raise self._superseded(caller, old)
        now = self.clock()
        memory = NewMemory(
            id=new_id(),
            space=target,
            text=text,
            vector=self._embed_documents([text])[0],
            ai=caller.ai,
            created_at=now,
            valid_from=now,
            valid_until=None,
            labels=old.labels,
            run_id=caller.run_id,
        )
        try:
            self.book.write([memory], supersedes=(old.id, now))
        except AlreadySuperseded:
            raise self._superseded(caller, self.book.load(old.id) or old) from None
        return self._loaded(memory.id)

    def _superseded(self, caller: Caller, old: Memory) -> AlreadySuperseded:
        successor = old.superseded_by
        if successor is not None:
            try:
                self._visible(caller, successor)
                return AlreadySuperseded(f"memory {old.id} is already superseded by {successor}")
            except MemoryNotFound:
                pass
        return AlreadySuperseded(f"memory {old.id} is already superseded")

    def forget(self, caller: Caller, id_: str) -> None:
        memory = self._visible(caller, id_)
        self.book.forget(memory, self.clock())

    def _loaded(self, id_: str) -> Memory:
        memory = self.book.load(id_)
        assert memory is not None
        return memory

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

    def close(self) -> None:
        self.catalog.close()


def open_service(
    settings: Settings | None = None,
    *,
    embedder: Embedder | None = None,
    clock: Clock = system_clock,
) -> Esfis:
    """The one place a service is built: catalog, vector store, embedder, clock."""
    settings = settings or Settings.from_env()
    make_private(settings.home)  # before the store writes a file there
    try:
        embedder = embedder or load_embedder(settings.model)
        store = VectorStore(settings.vectors_path, model=embedder.name, dimension=embedder.dimension)
    except IndexingError as exc:
        raise StoreUnavailable(str(exc)) from exc
    catalog = Catalog(settings.catalog_path)
    return Esfis(catalog, store, embedder, clock)

