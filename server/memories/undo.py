"""What a refused write leaves behind: nothing, once its outcome is known.

A write goes vectors first, then the catalog (``MemoryBook.write_batch``). When the catalog's
transaction fails, the vectors are purged again: a full disk, an I/O error or a refused check
leaves no text in a partition that no catalog row names. One failure is different: a catalog
that went away under the transaction (PostgreSQL restarting, a connection cut while the COMMIT
was on its way) may have committed it or not, and nobody can tell until it answers again.
Purging then could leave a committed catalog row without its text and vector, the one outcome
esfis must never have. So such a write's vectors stay, its journal line is kept
(``WriteJournal.keep``), and the write is *in doubt*: the next write of this process asks the
catalog which of its ids it holds and purges only the others. A process that dies first leaves
the kept line in its journal, and the next open's sweep does the same (``server.bulk.journal``).
"""

from __future__ import annotations

import json
import logging
import threading

from indexing.partitions.store import VectorStore
from server.catalog import Catalog
from server.errors import CatalogUnavailable
from server.memories.journal import WriteJournal

log = logging.getLogger("esfis.memories")


class Undo:
    """Purges refused writes' vectors, or keeps them in doubt until the catalog answers."""

    def __init__(self, catalog: Catalog, store: VectorStore, journal: WriteJournal | None) -> None:
        self.catalog = catalog
        self.store = store
        self.journal = journal
        self._doubts: list[tuple[str, list[str]]] = []
        self._lock = threading.Lock()

    def refused(self, key: str, ids: list[str], error: BaseException) -> None:
        """The write of ``ids`` into partition ``key`` failed with ``error`` after its vectors
        may have been written: purge them, or keep them while the commit's outcome is unknown."""
        if isinstance(error, CatalogUnavailable) and self.journal is not None:
            self.journal.keep(key, ids)
            with self._lock:
                self._doubts.append((key, ids))
            return
        try:
            self.store.purge(key, ids, only_if_held=True)
        except Exception:  # the first error is the one to report; orphans stay harmless:
            log.warning("a refused write's rows stay in partition %s until a sweep", key, exc_info=True)

    def settle(self) -> None:
        """Before a write: writes left in doubt are settled, now that the catalog may answer
        (those it holds stay, the others' vectors go); any it still cannot answer for wait."""
        if not self._doubts:
            return
        with self._lock:
            doubts, self._doubts = self._doubts, []
        for n, (key, ids) in enumerate(doubts):
            try:
                rows = self.catalog.all(
                    f"SELECT id FROM memories WHERE id IN (SELECT value FROM {self.catalog.sql.values})",
                    (json.dumps(ids),),
                )
                held = {row["id"] for row in rows}
                self.store.purge(key, [id_ for id_ in ids if id_ not in held], only_if_held=True)
            except Exception:
                with self._lock:
                    self._doubts.extend(doubts[n:])
                return
            assert self.journal is not None
            self.journal.release(key, ids)
