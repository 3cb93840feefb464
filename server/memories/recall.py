"""Recall, in the order that is the policy: space → permissions → validity → filter → relevance → limit.

1. space: ``scope_for`` picks the partitions the caller reaches; nothing else is opened.
2. permissions: partitions a policy denies are dropped before anything is scored.
3. validity, then the filter: inside each partition, only rows current now are candidates
   (``LivePartition.search``), and with a filter over the memories' data only those whose data
   matches (``server.memories.data_filter``: the ids it allows, handed to the search, which scores
   every one of them; with no query, the newest that match),
   and the catalog has the last word on each hit. With ``as_of``, rows valid at that time instead:
   a memory superseded since was valid until it was superseded; a forgotten one is gone from the
   partition and marked in the catalog, at every time.
4. relevance: cosine similarity fused with BM25 of the query text inside each partition
   (``indexing.relevance.fusion``); the candidates scored again against the query moved towards the
   best two of them (``indexing.relevance.feedback``); then one merge by score.
5. limit: the best ``limit`` go out; the next ``RUNNERS_UP`` are recorded as cut by limit. Before
   the cut, copies fold (``server.memories.duplicates.fold_copies``): of two that are the same
   fact, the later one wins; the delivery counts the folded under the reason ``copy``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from indexing.partitions.store import VectorStore
from indexing.relevance.feedback import with_feedback
from indexing.rows import Hit, PartitionResult, merge_best
from server.clock import from_micros, to_micros
from server.memories import MemoryBook
from server.memories.data import Data, compact
from server.memories.data_filter import DataFilter, filter_reach, newest_matching
from server.memories.duplicates import fold_copies
from server.metrics import time_stage
from server.models import DeliveryItem, RecalledMemory
from server.spaces import partition_key
from server.spaces.scope import Scope

RUNNERS_UP = 10  # candidates past the limit recorded by id, reason "limit"
MAX_DEPTH = 4096  # the most candidates a recall takes when copies fold


@dataclass(frozen=True)
class RecallOutcome:
    memories: list[RecalledMemory]
    items: list[DeliveryItem]  # delivered and cut-by-limit, by id
    cut: dict[str, int]  # counts by reason


def run_recall(
    scope: Scope,
    query_vector: np.ndarray | None,
    *,
    limit: int,
    now: datetime,
    store: VectorStore,
    book: MemoryBook,
    query_text: str | None = None,
    as_of: datetime | None = None,
    data_filter: DataFilter | None = None,
    depth: int | None = None,
) -> RecallOutcome:
    """``now`` is the recall's time; ``as_of``, when given, the time whose valid memories answer.
    ``depth``: the candidates taken (``limit + RUNNERS_UP``; more when folded copies left fewer
    than ``limit`` while more remained)."""
    at = now if as_of is None else as_of
    depth = limit + RUNNERS_UP if depth is None else depth
    reached_keys = [partition_key(s) for s in scope.reached]
    reading = time.perf_counter()
    counts, total = book.counts(reached_keys)
    catalog_s = time.perf_counter() - reading
    cut = {
        "space": total - sum(live for live, _ in counts.values()),
        "policy": sum(counts.get(partition_key(s), (0, 0))[0] for s, _ in scope.denied),
        "superseded": 0,
        "expired": 0,
        "not_yet_valid": 0,
        "relevance": 0,
    }
    pool: list[tuple[Hit, str | None]] = []
    candidates = 0
    if query_vector is not None:
        micros = to_micros(at)
        results: list[PartitionResult] = []
        searching = time.perf_counter()
        allowed = (
            None if data_filter is None else filter_reach(book, [partition_key(s) for s in scope.allowed], data_filter)
        )
        if allowed is not None:
            cut["filter"] = sum(counts.get(partition_key(s), (0, 0))[0] for s in scope.allowed) - sum(
                len(ids) for ids in allowed.values()
            )
        for space in scope.allowed:
            key = partition_key(space)
            allow = None if allowed is None else allowed.get(key, [])
            result = store.search(key, query_vector, depth, now=micros, text=query_text, allow=allow)
            superseded = counts.get(key, (0, 0))[1]
            cut["superseded"] += min(superseded, result.ended)
            cut["expired"] += max(result.ended - superseded, 0)
            cut["not_yet_valid"] += result.pending
            candidates += result.candidates
            results.append(result)
        fusing = time.perf_counter()
        time_stage("search", fusing - searching)
        if query_text is not None:
            results = with_feedback(results, query_vector)
        # One merge by score; only the rows that made it are read out of their partitions.
        pool = [(hit, scope.allowed[i]) for i, hit in merge_best(results, depth)]
        time_stage("fusion", time.perf_counter() - fusing)
    elif data_filter is not None:  # no query: the newest that match
        pool, cut["filter"] = newest_matching(
            book, store, scope.allowed, data_filter, at=at, as_of=as_of is not None, count=depth
        )
    reading = time.perf_counter()
    current, data = book.current_with_data([hit.id for hit, _ in pool], at, as_of=as_of is not None)
    ranked = [pair for pair in pool if pair[0].id in current]
    folding = time.perf_counter()
    time_stage("catalog", catalog_s + folding - reading)  # validity's last word, labels, data, counts
    ranked, cut["copy"] = _folded(ranked, store, data)
    time_stage("fold", time.perf_counter() - folding)
    if cut["copy"] and len(ranked) < limit and len(pool) >= depth and depth < MAX_DEPTH:
        # Copies took places a recall owes other memories: look deeper (rare: a write refuses copies).
        return run_recall(
            scope,
            query_vector,
            limit=limit,
            now=now,
            store=store,
            book=book,
            query_text=query_text,
            as_of=as_of,
            data_filter=data_filter,
            depth=depth * 4,
        )
    memories = [
        RecalledMemory(
            id=hit.id,
            text=hit.text,
            space=space,
            score=round(hit.score, 6),
            created_at=from_micros(hit.created_at),
            valid_until=from_micros(hit.valid_until),
            labels=current[hit.id],
            data=data.get(hit.id, {}),
        )
        for hit, space in ranked[:limit]
    ]
    items = [
        DeliveryItem(hit.id, rank, round(hit.score, 6), "delivered" if rank <= limit else "limit")
        for rank, (hit, _) in enumerate(ranked, start=1)
    ]
    cut["limit"] = len(items) - len(memories)
    cut["relevance"] = max(candidates - len(items), 0)
    return RecallOutcome(memories, items, {k: v for k, v in cut.items() if v or k in ("space", "policy")})


def _folded(
    ranked: list[tuple[Hit, str | None]], store: VectorStore, data: dict[str, Data]
) -> tuple[list[tuple[Hit, str | None]], int]:
    """``ranked`` with copies folded (the later wins), and how many were. Memories whose data
    differ are never copies of each other (a filter over data may want either)."""
    if len(ranked) < 2:
        return ranked, 0
    rows_of: dict[str | None, list[int]] = {}
    for i, (_, space) in enumerate(ranked):
        rows_of.setdefault(space, []).append(i)
    vectors: list[np.ndarray | None] = [None] * len(ranked)
    for space, rows in rows_of.items():  # one look at each partition's version, not one a row
        for i, vector in zip(rows, store.vectors(partition_key(space), [ranked[i][0].id for i in rows])):
            vectors[i] = vector
    if any(v is None for v in vectors):  # forgotten meanwhile: the catalog's check already ran
        return ranked, 0
    alike: dict[str, list[int]] = {}
    for i, (hit, _) in enumerate(ranked):
        held = data.get(hit.id)
        alike.setdefault(compact(held) if held else "", []).append(i)
    kept: list[int] = []
    for group in alike.values():
        found = fold_copies([ranked[i][0] for i in group], np.stack([vectors[i] for i in group]))  # type: ignore[misc]
        kept += [group[j] for j in found]
    return [ranked[i] for i in sorted(kept)], len(ranked) - len(kept)
