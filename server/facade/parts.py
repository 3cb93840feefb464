"""What the façade is made of: the catalog, the vector store, the model, the clock, and the books
that keep their rows. ``Esfis`` and its ``Operator`` hold one ``Parts`` each, privately; no
interface reaches a book but through them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from indexing.embedding.embedder import Embedder
from indexing.errors import BadVector, IndexingError
from indexing.partitions.store import VectorStore
from server.barrier.approvals import ApprovalBook
from server.barrier.contexts import ContextBook
from server.barrier.gates import Gates
from server.barrier.grants import GrantBook
from server.barrier.runs import RunBook
from server.catalog import Catalog
from server.catalog.access import AccessCache
from server.clock import Clock
from server.errors import InvalidInput, StoreUnavailable
from server.faults import DiskRoom
from server.memories import MemoryBook
from server.memories.deliveries import DeliveryLog
from server.memories.group_commit import GroupCommit
from server.memories.journal import JOURNALS, WriteJournal
from server.settings import APPROVAL_HOURS, DISK_RESERVE_MB, TRAIL_DAYS
from server.spaces.connections import ACCESS_S, ConnectionBook
from server.spaces.rates import RateBook
from server.spaces.registry import Registry
from server.spaces.tokens import TokenBook


@dataclass(frozen=True)
class Parts:
    """One service's parts. ``home`` is ESFIS_HOME (the vectors, the write journals, the keys; the
    catalog may lie elsewhere); runs that are over are pruned after ``trail_days``; backups are
    keyed with ``backup_key`` when given, else the home's ``backup.key``."""

    home: Path
    trail_days: int
    catalog: Catalog
    store: VectorStore
    embedder: Embedder
    clock: Clock
    registry: Registry
    journal: WriteJournal
    memories: MemoryBook
    deliveries: DeliveryLog
    commits: GroupCommit
    runs: RunBook
    grants: GrantBook
    contexts: ContextBook
    gates: Gates
    tokens: TokenBook
    approvals: ApprovalBook
    connections: ConnectionBook
    rates: RateBook
    room: DiskRoom  # whether the volume under home has room for a write (server.faults)
    backup_key: str | None = field(default=None, repr=False)  # ESFIS_BACKUP_KEY: what backups are keyed with

    @classmethod
    def over(
        cls,
        *,
        catalog: Catalog,
        store: VectorStore,
        embedder: Embedder,
        clock: Clock,
        home: Path,
        trail_days: int = TRAIL_DAYS,
        approval_hours: float = APPROVAL_HOURS,
        backup_key: str | None = None,
        oauth_token_s: int = ACCESS_S,
        disk_reserve_mb: int = DISK_RESERVE_MB,
    ) -> Parts:
        """The books over one catalog and one store."""
        journal = WriteJournal(home / JOURNALS)
        room = DiskRoom(home, reserve_mb=disk_reserve_mb)
        runs = RunBook(catalog, clock)
        grants = GrantBook(catalog, clock)
        approvals = ApprovalBook(catalog, clock, hours=approval_hours)
        access = AccessCache(catalog)  # one per service: its registry and tokens share it
        tokens = TokenBook(catalog, clock, access)
        return cls(
            home=home,
            trail_days=trail_days,
            catalog=catalog,
            store=store,
            embedder=embedder,
            clock=clock,
            registry=Registry(catalog, clock, access),
            journal=journal,
            memories=MemoryBook(catalog, store, journal, room=room),
            deliveries=DeliveryLog(catalog),
            commits=GroupCommit(catalog),
            runs=runs,
            grants=grants,
            contexts=ContextBook(catalog, clock),
            gates=Gates(runs, grants, approvals, clock),
            approvals=approvals,
            tokens=tokens,
            connections=ConnectionBook(catalog, tokens, clock, access_s=oauth_token_s),
            rates=RateBook(catalog, clock),
            room=room,
            backup_key=backup_key,
        )

    # The model's failures are the store's unavailability to a caller, whichever verb embeds.

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        try:
            return self.embedder.embed_documents(texts)
        except IndexingError as exc:
            raise StoreUnavailable(str(exc)) from exc

    def embed_query(self, text: str) -> np.ndarray:
        try:
            return self.embedder.embed_query(text)
        except IndexingError as exc:
            raise StoreUnavailable(str(exc)) from exc

    def given_vector(self, vector: np.ndarray) -> np.ndarray:
        """A query's embedding computed beforehand, checked as the store checks its own."""
        try:
            return self.store.check_vectors(np.asarray(vector, dtype=np.float32)[None])[0]
        except BadVector as exc:
            raise InvalidInput(str(exc), field="query_vector") from None
