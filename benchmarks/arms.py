"""The four arms of the comparison, over the same data and the same queries.

1. scope-first — esfis itself: the service picks the caller's partitions, then searches inside
   them (``ScopeFirst.recall``: the whole recall, delivery log included; ``ScopeFirst.search``:
   the index only).
2. post-filter — every memory in one LanceDB table; vector search for k×f, then drop what the
   caller does not reach (space, validity). Flat below 50k rows, IVF_PQ above (nprobes 50,
   refine ×10), as a post-filtering store would run.
3. single-table prefilter — the same table with a BTREE index on ``space`` and
   ``where(..., prefilter=True)``, flat (exact).
4. floor — an exact numpy scan of exactly the caller's in-scope vectors, gathered beforehand.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.synthetic import DIM, Store
from indexing.testing import HashingEmbedder
from server.memory_input import NewMemory, new_id
from server.service import Esfis, open_service
from server.settings import Settings
from server.spaces import partition_key

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)


def scratch(prefix: str) -> Path:
    """A temporary folder removed when the benchmark process ends."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
ANN_ROWS = 50_000


@dataclass(frozen=True)
class Answer:
    rows: list[int]  # store rows, best first
    out_of_scope_scored: int


class ScopeFirst:
    name = "scope-first"

    def __init__(self, store: Store, home: Path | None = None, embedder=None) -> None:
        self.home = home or scratch("esfis-bench-")
        self.service: Esfis = open_service(
            Settings(home=self.home, model=None),
            embedder=embedder or HashingEmbedder(dimension=DIM, name="synthetic-384"),
            clock=lambda: NOW,
        )
        self.row_of: dict[str, int] = {}
        self._load(store)
        self.callers = {label: self.service.caller("bench", space=store.spaces[idx[0]]) for label, idx in store.scopes.items()}
        self.keys = {
            label: [partition_key(None)] + [partition_key(store.spaces[i]) for i in idx]
            for label, idx in store.scopes.items()
        }

    def _load(self, store: Store) -> None:
        svc = self.service
        for name in sorted(store.spaces):
            svc.registry.add_named(name) if not svc.registry.exists(name) else None
        order = np.argsort(store.space_of, kind="stable")
        bounds = np.flatnonzero(np.diff(store.space_of[order])) + 1
        for rows in np.split(order, bounds):
            space = store.spaces[int(store.space_of[rows[0]])]
            memories = []
            for r in rows:
                id_ = new_id()
                self.row_of[id_] = int(r)
                ended = bool(store.expired[r])
                memories.append(NewMemory(
                    id=id_, space=space, text=f"row{r}", vector=store.vectors[r], ai="bench",
                    created_at=NOW - timedelta(days=2), valid_from=NOW - timedelta(days=2),
                    valid_until=NOW - timedelta(days=1) if ended else None,
                ))
            svc.book.write(memories)

    def recall(self, label: str, query: np.ndarray | None, k: int, text: str = "q") -> Answer:
        """esfis recall; with ``query`` None the service embeds ``text`` itself."""
        stats = self.service.store.stats
        stats.reset()
        result = self.service.recall(self.callers[label], text, limit=k, query_vector=query)
        outside = sum(n for key, n in stats.scored.items() if key not in self.keys[label])
        return Answer([self.row_of[m.id] for m in result.memories], outside)

    def search(self, label: str, query: np.ndarray, k: int, now: int) -> list:
        """The index alone: search each reached partition, merge."""
        hits = []
        for key in self.keys[label]:
            hits.extend(self.service.store.search(key, query, k, now).hits)
        hits.sort(key=lambda h: h.score, reverse=True)
        return hits[:k]


class SingleTable:
    """One LanceDB table with every memory: the post-filter and prefilter arms."""

    def __init__(self, store: Store, root: Path | None = None) -> None:
        import lancedb
        from lancedb.index import BTree

        self.store = store
        self.root = root or scratch("esfis-bench-single-")
        db = lancedb.connect(str(self.root))
        n = store.size
        schema = pa.schema([
            pa.field("row", pa.int64()), pa.field("space", pa.string()), pa.field("expired", pa.bool_()),
            pa.field("vector", pa.list_(pa.float32(), DIM)),
        ])
        self.table = db.create_table("all", schema=schema)
        names = np.array(store.spaces, dtype=object)
        for start in range(0, n, 100_000):
            end = min(n, start + 100_000)
            self.table.add(pa.table({
                "row": np.arange(start, end), "space": names[store.space_of[start:end]],
                "expired": store.expired[start:end],
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(store.vectors[start:end].reshape(-1)), DIM),
            }, schema=schema))
        self.table.create_index("space", config=BTree())
        self.indexed = n >= ANN_ROWS
        if self.indexed:
            self.table.create_index(metric="cosine", index_type="IVF_PQ",
                                    num_partitions=int(np.sqrt(n)), num_sub_vectors=48)
        self.partitions = int(np.sqrt(n))

    def in_scope_names(self, label: str) -> list[str]:
        return [self.store.spaces[i] for i in self.store.scopes[label]]

    def post_filter(self, label: str, query: np.ndarray, k: int, fetch: int) -> Answer:
        q = self.table.search(query).distance_type("cosine").limit(k * fetch).select(["row", "space", "expired"])
        if self.indexed:
            q = q.nprobes(50).refine_factor(10)
        found = q.to_arrow()
        allowed = set(self.in_scope_names(label))
        rows = [r for r, s, e in zip(found["row"].to_pylist(), found["space"].to_pylist(), found["expired"].to_pylist())
                if s in allowed and not e]
        in_scope = int(np.isin(self.store.space_of, self.store.scopes[label]).sum())
        probed = self.store.size if not self.indexed else int(self.store.size * min(1.0, 50 / self.partitions))
        return Answer(rows[:k], max(probed - in_scope, 0))

    def prefilter(self, label: str, query: np.ndarray, k: int) -> Answer:
        names = ", ".join(f"'{n}'" for n in self.in_scope_names(label))
        found = (
            self.table.search(query).distance_type("cosine")
            .where(f"space IN ({names}) AND NOT expired", prefilter=True)
            .bypass_vector_index().limit(k).select(["row"]).to_arrow()
        )
        return Answer(found["row"].to_pylist(), 0)


class Floor:
    """Exactly the caller's in-scope, valid vectors, gathered once; a numpy scan per query."""

    name = "floor"

    def __init__(self, store: Store) -> None:
        self.rows = {label: np.flatnonzero(store.in_scope(label)) for label in store.scopes}
        self.matrix = {label: np.ascontiguousarray(store.vectors[rows]) for label, rows in self.rows.items()}

    def search(self, label: str, query: np.ndarray, k: int) -> Answer:
        scores = self.matrix[label] @ query
        top = np.argpartition(-scores, min(k, len(scores)) - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return Answer(self.rows[label][top].tolist(), 0)
