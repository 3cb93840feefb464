"""The arms of the comparison, over the same data and the same queries.

1. scope-first — esfis itself: the service picks the caller's partitions, then searches inside
   them (``ScopeFirst.recall``: the whole recall, delivery log included; ``ScopeFirst.search``:
   the index only). A partition of ``ANN_THRESHOLD`` rows or more (expired rows included) is
   served by its persisted IVF image, a smaller one by an exact scan.
2. post-filter — every memory in one LanceDB table; vector search for k×f, then drop what the
   caller does not reach (space, validity). Flat below ``ANN_ROWS`` rows, IVF_PQ above (nprobes
   50, refine ×10), as a post-filtering store would run.
3. single-table prefilter — the same table, ``where(..., prefilter=True)``, flat (exact), with
   the scalar index on ``space`` that is fastest at this size (none, BTREE or BITMAP, timed when
   the table is built) and a BITMAP on the boolean ``expired``.
4. in-memory scope mask — the whole store as one numpy matrix; each query builds the caller's
   mask over every row, gathers the rows it keeps and scans them.
5. in-memory post-filter — the same matrix scanned whole, top k×f, then the mask.
6. floor — an exact numpy scan of exactly the caller's in-scope vectors, gathered beforehand.

Arms 4 and 5 separate what partitions first buys from what holding vectors in numpy buys over
LanceDB's query engine. Every arm counts what it scored (``Answer.scored``): the service's own
per-partition counters, LanceDB's plan metrics, or the rows a numpy product evaluated.
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.synthetic import DIM, Store, Truth, recall_truth
from indexing.embedding.testing import HashingEmbedder
from indexing.relevance.feedback import FEEDBACK_ROWS, FEEDBACK_WEIGHT
from indexing.rows import merge_best
from server.facade import Esfis, open_service
from server.facade.recall import RUNNERS_UP
from server.memories.input import NewMemory, new_id
from server.settings import Settings
from server.spaces import partition_key

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def scratch(prefix: str) -> Path:
    """A temporary folder removed when the benchmark process ends."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


ANN_ROWS = 50_000  # the single table's IVF_PQ threshold, the same as esfis's own
COUNTED = "counted"
AT_LEAST = "at least"  # LanceDB's IVF lists are not known row by row: scored less the scope's rows


@dataclass(frozen=True)
class Answer:
    rows: list[int]  # store rows, best first
    out_of_scope_scored: int = 0
    scored: int | None = None  # vectors scored for this query, as counted; None where not counted
    out_of_scope_kind: str = COUNTED  # COUNTED, or AT_LEAST (a lower bound from a counted total)


def partition_rows(store: Store, label: str) -> int:
    """Rows in the caller's partitions, expired ones included (what an index over them holds)."""
    return int(np.isin(store.space_of, store.scopes[label]).sum())


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    k = min(k, len(scores))
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.argsort(-scores[top])]


class ScopeFirst:
    name = "scope-first"

    def __init__(self, store: Store, home: Path | None = None, embedder=None, settings: Settings | None = None) -> None:
        """``settings``: another catalog or vector store than the embedded default in ``home``."""
        self.home = settings.home if settings is not None else home or scratch("esfis-bench-")
        self.service: Esfis = open_service(
            settings or Settings(home=self.home, model=None),
            embedder=embedder or HashingEmbedder(dimension=DIM, name="synthetic-384"),
            clock=lambda: NOW,
        )
        self.row_of: dict[str, int] = {}
        self._load(store)
        self.callers = {
            label: self.service.caller("bench", space=store.spaces[idx[0]]) for label, idx in store.scopes.items()
        }
        self.keys = {
            label: [partition_key(None)] + [partition_key(store.spaces[i]) for i in idx]
            for label, idx in store.scopes.items()
        }

    def _load(self, store: Store) -> None:
        svc = self.service
        for name in sorted(store.spaces):
            svc._parts.registry.add_named(name) if not svc._parts.registry.exists(name) else None
        order = np.argsort(store.space_of, kind="stable")
        bounds = np.flatnonzero(np.diff(store.space_of[order])) + 1
        for rows in np.split(order, bounds):
            space = store.spaces[int(store.space_of[rows[0]])]
            memories = []
            for r in rows:
                id_ = new_id()
                self.row_of[id_] = int(r)
                ended = bool(store.expired[r])
                memories.append(
                    NewMemory(
                        id=id_,
                        space=space,
                        text=f"row{r}",
                        vector=store.vectors[r],
                        ai="bench",
                        created_at=NOW - timedelta(days=2),
                        valid_from=NOW - timedelta(days=2),
                        valid_until=NOW - timedelta(days=1) if ended else None,
                    )
                )
            svc._parts.memories.write(memories)
            svc._parts.store.settle(partition_key(space))  # as an import does: a large space's index now

    def _counted(self, label: str, rows: list[int]) -> Answer:
        scored = self.service._parts.store.stats.scored
        outside = sum(n for key, n in scored.items() if key not in self.keys[label])
        return Answer(rows, outside, sum(scored.values()))

    def truth(self, store: Store, label: str, query: np.ndarray, k: int) -> Truth:
        """The exact answer of ``recall`` for this query (synthetic texts match no query term)."""
        return recall_truth(
            store.vectors,
            store.space_of,
            store.in_scope(label),
            query,
            k,
            k + RUNNERS_UP,
            FEEDBACK_ROWS,
            FEEDBACK_WEIGHT,
        )

    def recall(self, label: str, query: np.ndarray | None, k: int, text: str = "q") -> Answer:
        """esfis recall; with ``query`` None the service embeds ``text`` itself."""
        self.service._parts.store.stats.reset()
        result = self.service.recall(self.callers[label], text, limit=k, query_vector=query)
        return self._counted(label, [self.row_of[m.id] for m in result.memories])

    def search(self, label: str, query: np.ndarray, k: int, now: int) -> list:
        """The index alone: search each reached partition, merge."""
        results = [self.service._parts.store.search(key, query, k, now=now) for key in self.keys[label]]
        return [hit for _, hit in merge_best(results, k)]

    def search_counted(self, label: str, query: np.ndarray, k: int, now: int) -> Answer:
        self.service._parts.store.stats.reset()
        return self._counted(label, [self.row_of[h.id] for h in self.search(label, query, k, now)])

    def served_by(self, label: str) -> dict:
        """What served the caller's partitions: the exact scan or the persisted IVF image
        (``live_partition(key).base`` is the image), read from the store itself."""
        lists, exact = [], 0
        for key in self.keys[label]:
            if not self.service._parts.store.exists(key):
                continue  # the caller's personal partition, searched and empty
            base = self.service._parts.store.live_partition(key).base
            if base is not None:
                lists.append((len(base.lists.centroids), int(base.lists.nprobe)))
            else:
                exact += 1
        kind = "IVF image" if lists and not exact else "exact scan" if not lists else "IVF image + exact scan"
        detail = ", ".join(f"IVF {n} lists, nprobe {p}" for n, p in lists)
        return {
            "served_by": kind,
            "ivf_partitions": len(lists),
            "exact_partitions": exact,
            "config": f"esfis, {len(self.keys[label])} partitions searched" + (f" ({detail})" if detail else ""),
        }


_PLAN_NODE = re.compile(r"(KNNVectorDistance|ANNSubIndex):.*?metrics=\[(.*?)\]")
_SCALE = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9}


def _plan_figure(text: str) -> tuple[float, float]:
    """A figure as LanceDB prints it (``60.00 K``): its value and half its last printed digit."""
    number, _, scale = text.strip().partition(" ")
    decimals = len(number.partition(".")[2])
    unit = _SCALE.get(scale.strip(), 1)
    return float(number) * unit, 0.5 * 10**-decimals * unit if scale or decimals else 0.0


def plan_scored(plan: str) -> dict[str, tuple[float, float]]:
    """Vectors scored by each node of an analysed LanceDB plan: exact distances (KNN) and PQ
    codes compared (ANN), summed per kind."""
    found: dict[str, tuple[float, float]] = {}
    for node, metrics in _PLAN_NODE.findall(plan):
        field_name = "output_rows" if node == "KNNVectorDistance" else "index_comparisons"
        for item in metrics.split(", "):
            name, _, value = item.partition("=")
            if name == field_name:
                v, err = _plan_figure(value)
                old = found.get(node, (0.0, 0.0))
                found[node] = (old[0] + v, old[1] + err)
    return found


class SingleTable:
    """One LanceDB table with every memory: the post-filter and prefilter arms."""

    def __init__(self, store: Store, root: Path | None = None, *, ann: bool = True) -> None:
        """``ann=False``: no IVF_PQ index at any size (the post-filter arm scans flat)."""
        import lancedb
        from lancedb.index import Bitmap

        self.store = store
        self.root = root or scratch("esfis-bench-single-")
        db = lancedb.connect(str(self.root))
        n = store.size
        schema = pa.schema(
            [
                pa.field("row", pa.int64()),
                pa.field("space", pa.string()),
                pa.field("expired", pa.bool_()),
                pa.field("vector", pa.list_(pa.float32(), DIM)),
            ]
        )
        self.table = db.create_table("all", schema=schema)
        names = np.array(store.spaces, dtype=object)
        for start in range(0, n, 100_000):
            end = min(n, start + 100_000)
            self.table.add(
                pa.table(
                    {
                        "row": np.arange(start, end),
                        "space": names[store.space_of[start:end]],
                        "expired": store.expired[start:end],
                        "vector": pa.FixedSizeListArray.from_arrays(
                            pa.array(store.vectors[start:end].reshape(-1)), DIM
                        ),
                    },
                    schema=schema,
                )
            )
        self.table.create_index("expired", config=Bitmap())  # a boolean: what a bitmap is for
        self.indexed = ann and n >= ANN_ROWS
        if self.indexed:
            self.table.create_index(
                metric="cosine", index_type="IVF_PQ", num_partitions=int(np.sqrt(n)), num_sub_vectors=48
            )
        self.partitions = int(np.sqrt(n))
        self.prefilter_config = self._calibrate_prefilter()

    def _space_index(self, kind: str) -> None:
        from lancedb.index import Bitmap, BTree

        if any(i.name == "space_idx" for i in self.table.list_indices()):
            self.table.drop_index("space_idx")
        if kind != "none":
            self.table.create_index("space", config=Bitmap() if kind == "BITMAP" else BTree(), name="space_idx")

    def _calibrate_prefilter(self, per_scope: int = 2) -> str:
        """The prefilter's best configuration at this size: each candidate index on ``space``
        timed on a few queries (in-scope rows, not the benchmark's queries); the fastest kept."""
        labels = list(self.store.scopes)[:6]
        probes = [
            (label, self.store.vectors[r])
            for label in labels
            for r in np.flatnonzero(self.store.in_scope(label))[:per_scope]
        ]
        timings: dict[str, float] = {}
        for kind in ("none", "BTREE", "BITMAP"):
            self._space_index(kind)
            self.prefilter(*probes[0], 10)  # open the index
            took = []
            for label, q in probes:
                started = time.perf_counter()
                self.prefilter(label, q, 10)
                took.append(time.perf_counter() - started)
            timings[kind] = float(np.median(took) * 1000)
        best = min(timings, key=timings.__getitem__)
        if best != "BITMAP":
            self._space_index(best)
        shown = ", ".join(f"{k} {v:.2f} ms" for k, v in timings.items())
        index = "no index on space" if best == "none" else f"{best} on space"
        return f"LanceDB flat (exact), {index}, BITMAP on expired (calibrated p50: {shown})"

    @property
    def post_filter_config(self) -> str:
        return "LanceDB IVF_PQ (nprobes 50, refine ×10)" if self.indexed else "LanceDB flat (exact)"

    def in_scope_names(self, label: str) -> list[str]:
        return [self.store.spaces[i] for i in self.store.scopes[label]]

    def _post_query(self, query: np.ndarray, limit: int):
        q = self.table.search(query).distance_type("cosine").limit(limit).select(["row", "space", "expired"])
        return q.nprobes(50).refine_factor(10) if self.indexed else q

    def post_filter(self, label: str, query: np.ndarray, k: int, fetch: int) -> Answer:
        found = self._post_query(query, k * fetch).to_arrow()
        allowed = set(self.in_scope_names(label))
        rows = [
            r
            for r, s, e in zip(found["row"].to_pylist(), found["space"].to_pylist(), found["expired"].to_pylist())
            if s in allowed and not e
        ]
        return Answer(rows[:k], 0, None)

    def count_post_filter(self, label: str, query: np.ndarray, k: int, fetch: int) -> Answer:
        """What the post-filter query scored, from LanceDB's own plan metrics. Flat: every row
        gets a distance, so the out-of-scope count is exact. IVF_PQ: codes compared are counted,
        but not which rows they were, so out of scope is at least that count less the scope."""
        nodes = plan_scored(self._post_query(query, k * fetch).analyze_plan())
        in_scope = partition_rows(self.store, label)
        if "ANNSubIndex" in nodes:
            compared, err = nodes["ANNSubIndex"]
            scored = compared + nodes.get("KNNVectorDistance", (0.0, 0.0))[0]
            return Answer([], max(0, int(compared - err) - in_scope), int(scored), AT_LEAST)
        knn, err = nodes["KNNVectorDistance"]
        if knn + err >= self.store.size:  # every row scored
            return Answer([], self.store.size - in_scope, self.store.size, COUNTED)
        return Answer([], max(0, int(knn - err) - in_scope), int(knn), AT_LEAST)

    def _pre_query(self, label: str, query: np.ndarray, k: int):
        names = ", ".join(f"'{n}'" for n in self.in_scope_names(label))
        return (
            self.table.search(query)
            .distance_type("cosine")
            .where(f"space IN ({names}) AND NOT expired", prefilter=True)
            .bypass_vector_index()
            .limit(k)
            .select(["row"])
        )

    def prefilter(self, label: str, query: np.ndarray, k: int) -> Answer:
        return Answer(self._pre_query(label, query, k).to_arrow()["row"].to_pylist(), 0, None)

    def count_prefilter(self, label: str, query: np.ndarray, k: int) -> Answer:
        """Distances the prefiltered scan computed (LanceDB's plan). The filter admits only the
        caller's valid rows, so a count within them is 0 out of scope; beyond them (past LanceDB's
        printed precision), the excess is a lower bound."""
        knn, err = plan_scored(self._pre_query(label, query, k).analyze_plan()).get("KNNVectorDistance", (0.0, 0.0))
        excess = int(knn - err) - int(self.store.in_scope(label).sum())
        return Answer([], max(0, excess), int(knn), AT_LEAST if excess > 0 else COUNTED)


class InMemory:
    """The whole store as one in-memory numpy matrix (the benchmark's own, not copied): the
    in-memory scope-mask and post-filter arms."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.valid = ~store.expired

    def _allowed(self, label: str) -> np.ndarray:
        allowed = np.zeros(len(self.store.spaces), dtype=bool)
        allowed[self.store.scopes[label]] = True
        return allowed

    def scope_mask(self, label: str, query: np.ndarray, k: int) -> Answer:
        """The caller's mask over every row, built per query as a query would; then only the
        rows it keeps are gathered and scored (cheaper than scoring all and masking)."""
        rows = np.flatnonzero(self._allowed(label)[self.store.space_of] & self.valid)
        scores = self.store.vectors[rows] @ query
        return Answer(rows[top_k(scores, k)].tolist(), 0, len(rows))

    def post_filter(self, label: str, query: np.ndarray, k: int, fetch: int) -> Answer:
        scores = self.store.vectors @ query
        top = top_k(scores, k * fetch)
        keep = self._allowed(label)[self.store.space_of[top]] & self.valid[top]
        n = len(scores)
        return Answer(top[keep][:k].tolist(), n - partition_rows(self.store, label), n)


class Floor:
    """Exactly the caller's in-scope, valid vectors, gathered once; a numpy scan per query."""

    name = "floor"

    def __init__(self, store: Store) -> None:
        self.rows = {label: np.flatnonzero(store.in_scope(label)) for label in store.scopes}
        self.matrix = {label: np.ascontiguousarray(store.vectors[rows]) for label, rows in self.rows.items()}

    def search(self, label: str, query: np.ndarray, k: int) -> Answer:
        scores = self.matrix[label] @ query
        return Answer(self.rows[label][top_k(scores, k)].tolist(), 0, len(scores))
