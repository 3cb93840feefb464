"""esfis and one LanceDB table, on the peers' footing: loaded with the same world, asked the same
query vectors, answering with store rows.

- ``esfis-search``: esfis's index alone (``ScopeFirst.search``): the caller's partitions
  picked, each searched, the best merged; no embedding, no bookkeeping. What a peer's search is.
- ``esfis-recall``: the whole recall in process (``Esfis.recall`` with the vector given): the
  gate's reach, validity, lexical fusion, the feedback pass, the delivery log's write. Its
  ranking is its own (feedback moves the query), so its recall@10 is judged against its own
  exact answer.
- ``lancedb-prefilter`` and ``lancedb-post-filter-x4``: every memory in one LanceDB table, the
  prefilter exact with its fastest index on ``space``, the post-filter an exact scan of the
  whole table's top 40, then the space (``benchmarks.arms.SingleTable``, the scope grid's arms;
  the grid measures the post-filter over IVF_PQ too).

esfis over HTTP, with the query's text embedded by the server, is its own test
(``test_peers.py::test_esfis_over_http``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.arms import NOW, ScopeFirst, SingleTable
from benchmarks.peers import Peer, folder_bytes
from benchmarks.synthetic import Store
from server.clock import to_micros


class EsfisInProcess(Peer):
    system = "esfis"
    arms = ("esfis-search", "esfis-recall")

    def __init__(self, root: Path, embedder=None) -> None:
        self.root = root
        self.embedder = embedder
        self.built: ScopeFirst | None = None
        self.label_of: dict[tuple[str, ...], str] = {}

    def load(self, store: Store) -> None:
        self.built = ScopeFirst(store, home=self.root, embedder=self.embedder)
        self.label_of = {tuple(store.spaces[i] for i in idx): label for label, idx in store.scopes.items()}

    def prepare(self, arm: str) -> str:
        assert self.built is not None
        if arm == "esfis-search":
            return "esfis in process, the index alone: the caller's partitions searched, merged; no embedding"
        return "esfis in process, the whole recall (gate, validity, fusion, feedback, delivery log), vector given"

    def search(self, arm: str, spaces: list[str], query: np.ndarray, k: int) -> list[int]:
        assert self.built is not None
        label = self.label_of[tuple(spaces)]
        if arm == "esfis-search":
            return [self.built.row_of[h.id] for h in self.built.search(label, query, k, to_micros(NOW))]
        return self.built.recall(label, query, k).rows

    def disk_bytes(self) -> int:
        return folder_bytes(self.root)

    def close(self) -> None:
        if self.built is not None:
            self.built.service.close()


class LanceTable(Peer):
    system = "LanceDB"
    arms = ("lancedb-prefilter", "lancedb-post-filter-x4")

    def __init__(self, root: Path) -> None:
        import lancedb

        self.version = lancedb.__version__
        self.root = root
        self.table: SingleTable | None = None
        self.label_of: dict[tuple[str, ...], str] = {}

    def load(self, store: Store) -> None:
        # Flat: the post-filter's IVF_PQ build (a minute at 200,000 rows) is the scope grid's to measure.
        self.table = SingleTable(store, root=self.root, ann=False)
        self.label_of = {tuple(store.spaces[i] for i in idx): label for label, idx in store.scopes.items()}

    def prepare(self, arm: str) -> str:
        assert self.table is not None
        config = self.table.prefilter_config if arm == "lancedb-prefilter" else self.table.post_filter_config
        how = "where(space) prefilter" if arm == "lancedb-prefilter" else "top 40, then the space filter"
        return f"LanceDB {self.version}, one table, {how}: {config}"

    def search(self, arm: str, spaces: list[str], query: np.ndarray, k: int) -> list[int]:
        assert self.table is not None
        label = self.label_of[tuple(spaces)]
        if arm == "lancedb-prefilter":
            return self.table.prefilter(label, query, k).rows
        return self.table.post_filter(label, query, k, 4).rows

    def disk_bytes(self) -> int:
        return folder_bytes(self.root)
