"""Group commit: the bookkeeping of concurrent recalls (the delivery and the run's step), written
in one catalog transaction, and each recall answered only once its own rows are committed.

A recall's bookkeeping is a few small inserts; the transaction around them (the write lock, the
commit, on PostgreSQL a round trip and a WAL flush) costs more than they do, and recalls of one
process take turns at the write lock anyway. So the committer batches only when there is
company: a recall that finds it idle commits alone at once; recalls that arrive while a commit
is in flight queue, and the first of them, once that commit is done, writes every queued one
(up to ``max_group``) in one transaction.

``run`` returns only after the transaction holding its work has committed: every answer sent is
in the delivery log before it is sent (tests/http/test_delivery_log_kill.py kills a server mid-load
and finds every delivered answer's query there). A piece of work that raises fails only its own
caller: the group is rolled back and each piece committed again alone, in its own transaction,
so one refused step (a run ended meanwhile) leaves the others' rows whole.

A piece says whether its commit must reach the disk before it returns (``durable``): a group is
durable when any of its pieces is (``Catalog.transaction``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from server.catalog import Catalog, Tx

T = TypeVar("T")
DEFAULT_MAX_GROUP = 64


@dataclass(eq=False)
class _Work(Generic[T]):
    work: Callable[[Tx], T]
    durable: bool = True
    result: Any = None
    error: BaseException | None = None
    done: bool = False


class GroupCommit:
    """Commits pieces of catalog work from concurrent threads, together when they meet."""

    def __init__(self, catalog: Catalog, *, max_group: int = DEFAULT_MAX_GROUP) -> None:
        self.catalog = catalog
        self.max_group = max_group
        self.groups: dict[int, int] = {}  # transactions by how many pieces they committed
        self._cond = threading.Condition()
        self._queue: list[_Work] = []
        self._busy = False

    def run(self, work: Callable[[Tx], T], *, durable: bool = True) -> T:
        """Run ``work`` in a write transaction (maybe shared with others'), once it has committed
        (``durable=False``: committed, maybe not yet flushed to the disk)."""
        piece: _Work[T] = _Work(work, durable)
        with self._cond:
            if self._busy or self._queue:
                self._queue.append(piece)
                while not piece.done and not (self._queue and self._queue[0] is piece and not self._busy):
                    self._cond.wait()
                if piece.done:
                    return self._outcome(piece)
                group = self._queue[: self.max_group]
                del self._queue[: self.max_group]
            else:
                group = [piece]
            self._busy = True
        try:
            self._commit(group)
        finally:
            with self._cond:
                self._busy = False
                self.groups[len(group)] = self.groups.get(len(group), 0) + 1
                self._cond.notify_all()
        return self._outcome(piece)

    def _commit(self, group: list[_Work]) -> None:
        try:
            with self.catalog.transaction(durable=any(p.durable for p in group)) as tx:
                results = [p.work(tx) for p in group]
        except BaseException as exc:
            if len(group) == 1:
                group[0].error = exc
            else:
                self._one_by_one(group)
        else:
            for p, result in zip(group, results):
                p.result = result
        for p in group:
            p.done = True  # read by the waiters under the condition, after notify_all

    def _one_by_one(self, group: list[_Work]) -> None:
        for p in group:
            try:
                with self.catalog.transaction(durable=p.durable) as tx:
                    p.result = p.work(tx)
            except BaseException as exc:
                p.error = exc

    @staticmethod
    def _outcome(piece: _Work[T]) -> T:
        if piece.error is not None:
            raise piece.error
        return piece.result
