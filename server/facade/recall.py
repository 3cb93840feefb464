"""Recall, read top to bottom in the order that is the policy:

    ask → reach → permissions → validity → filter → relevance → fold → limit → deliver

- **ask**: the question checked once (query, limit, ``as_of``, the filter over data).
- **reach** (space): the partitions the caller stands in reach of (``server.facade.reach``);
  nothing else is opened, and what other spaces hold is only counted, as cut by ``space``.
- **permissions**: of those, the ones a policy lets this AI read; a denied partition is never
  scored (cut by ``policy``).
- **validity**: the time whose valid memories answer, now or ``as_of``; the partitions' search
  takes only rows valid then, and the catalog has the last word on each hit (``confirm``).
- **filter**: with a filter over data, how each partition's search is narrowed to the rows it
  allows (``server.memories.filter_search``: the ids from the catalog's index, or a broad set's
  candidates checked); with no query, the newest that match.
- **relevance**: the query embedded (``embedding``, timed apart), then cosine fused with BM25 inside each partition, scored
  again against the query moved towards the best two, and one merge by score.
- **fold**: of two candidates that are the same fact, the later wins (cut by ``copy``).
- **limit**: the best ``limit`` go out; the next ``RUNNERS_UP`` are recorded as cut by ``limit``.
- **deliver**: ids, scores and reasons (never texts) in the delivery log, and the run's step with
  the marks it now carries, committed before the answer leaves.

When folded copies leave fewer than ``limit`` while more candidates remained, the pool widens:
relevance, the catalog's check and the fold again, four times as deep (``widened``, the one loop
that does so). Each stage's time goes to ``/metrics`` under its name (``esfis_recall_stage_seconds``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from indexing.relevance.feedback import with_feedback
from indexing.rows import Hit, PartitionResult, merge_best
from server.barrier.runs import Step
from server.catalog import Tx
from server.clock import as_of_time, from_micros, to_micros
from server.errors import InvalidInput
from server.facade.reach import scope_of
from server.facade.shown import marks_of, shown_recalled
from server.labels import Labels
from server.memories import MemoryBook
from server.memories.data import Data
from server.memories.data_filter import DataFilter, parse_filter
from server.memories.duplicates import fold_candidates
from server.memories.filter_search import Narrowing, narrowing, search_narrowed
from server.memories.input import MAX_QUERY_BYTES, check_text
from server.memories.newest import newest_matching
from server.metrics import time_stage
from server.models import DEFAULT_LIMIT, MAX_LIMIT, Caller, DeliveryItem, Memory, Recall, RecalledMemory
from server.records import Run
from server.spaces import partition_key
from server.spaces.scope import Scope

if TYPE_CHECKING:
    from server.facade.parts import Parts

RUNNERS_UP = 10  # candidates past the limit recorded by id, reason "limit"
MAX_DEPTH = 4096  # the most candidates a recall takes when copies fold
WIDEN = 4  # each widening takes this many times the candidates

Searched = dict[str, tuple[int, PartitionResult]]  # a partition's search this recall: its depth, its rows
Pool = list[tuple[Hit, str | None]]  # candidates, best first, with the space each came from


@dataclass(frozen=True)
class Asked:
    """A recall's question, checked: ``query`` is empty when a filter with no query lists."""

    query: str
    limit: int
    now: datetime  # the recall's own time
    at: datetime  # the time whose valid memories answer: now, or as_of
    as_of: bool
    data_filter: DataFilter | None

    @property
    def listing(self) -> bool:
        return not self.query


@dataclass(frozen=True)
class Answer:
    """What a recall found: the memories going out, every candidate's delivery item (delivered
    and cut by limit), and the counts cut by each reason."""

    memories: list[RecalledMemory]
    items: list[DeliveryItem]
    cut: dict[str, int]


@dataclass
class _Cut:
    """The counts by reason, kept as the stages find them."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, reason: str, n: int) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + n

    def final(self) -> dict[str, int]:
        return {k: v for k, v in self.counts.items() if v or k in ("space", "policy")}


def recall(
    parts: Parts,
    caller: Caller,
    query: str | None,
    *,
    limit: int = DEFAULT_LIMIT,
    query_vector: np.ndarray | None = None,
    as_of: str | datetime | None = None,
    where: object = None,
) -> Recall:
    """The best memories ``caller`` may read for ``query`` (``Esfis.recall``), delivered."""
    asked = ask(parts.clock(), query, limit=limit, as_of=as_of, where=where)
    with _stage("reach"):
        scope = scope_of(parts, caller)
    run = parts.gates.enter(caller)  # an ended or sealed run takes no step: refused before any work
    found = answer(parts.memories, scope, asked, lambda: embedding(parts, scope, asked, query_vector))
    delivery_id = deliver(parts, caller, run, scope, asked, found)
    return Recall([shown_recalled(scope, m) for m in found.memories], delivery_id)


def ask(now: datetime, query: str | None, *, limit: int, as_of: str | datetime | None, where: object) -> Asked:
    """The question checked: a clear error naming what is wrong, before anything is read."""
    data_filter = parse_filter(where)
    listing = data_filter is not None and (query is None or (isinstance(query, str) and not query.strip()))
    text = "" if listing else check_text(query, field="query", limit=MAX_QUERY_BYTES)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}", field="limit")
    at = now if as_of is None else as_of_time(as_of, now=now)
    return Asked(text, limit, now, at, as_of is not None, data_filter)


def embedding(parts: Parts, scope: Scope, asked: Asked, given: np.ndarray | None = None) -> np.ndarray | None:
    """The query's vector (``given``: computed beforehand, checked), or None when nothing is to be
    scored: no partition is readable, or a filter lists with no query."""
    if not scope.allowed or asked.listing:
        return None
    with _stage("embedding"):
        return parts.embed_query(asked.query) if given is None else parts.given_vector(given)


def answer(book: MemoryBook, scope: Scope, asked: Asked, query_vector: Callable[[], np.ndarray | None]) -> Answer:
    """Every stage between reach and deliver, over the partitions ``scope`` reaches (the
    operator's search calls it with a scope of its own); ``query_vector`` embeds the query when
    relevance needs it (``embedding``)."""
    cut = _Cut()
    with _stage("permissions"):
        live = permissions(book, scope, cut)
    with _stage("filter"):
        allowed = narrowed(book, scope, asked, live, cut)
    vector = query_vector()
    searched: Searched = {}
    for depth in widened(asked.limit):
        with _stage("relevance"):
            pool, scored = relevance(book, scope, asked, vector, depth, allowed, live, cut, searched)
        with _stage("validity"):
            pool, current, data = confirm(book, pool, asked)
        with _stage("fold"):
            ranked, copies = fold(book, pool, data)
        if not (copies and len(ranked) < asked.limit and len(pool) >= depth):
            break
    cut.counts["copy"] = copies
    return limit_(ranked, current, data, asked.limit, scored, cut)


def permissions(book: MemoryBook, scope: Scope, cut: _Cut) -> dict[str, tuple[int, int]]:
    """The live memories (and of them the superseded) of each partition reached, in one read;
    what the caller does not reach is counted as cut by ``space``, what a policy denies by ``policy``."""
    counts, total = book.counts([partition_key(s) for s in scope.reached])
    cut.add("space", total - sum(live for live, _ in counts.values()))
    cut.add("policy", sum(counts.get(partition_key(s), (0, 0))[0] for s, _ in scope.denied))
    return counts


def narrowed(
    book: MemoryBook, scope: Scope, asked: Asked, live: dict[str, tuple[int, int]], cut: _Cut
) -> Narrowing | None:
    """With a filter and a query: how each readable partition's search is narrowed to the rows
    the filter allows (``server.memories.filter_search``; None: not narrowed)."""
    if asked.data_filter is None or asked.listing or not scope.allowed:
        return None
    keys = [partition_key(s) for s in scope.allowed]
    allowed = narrowing(book, keys, asked.data_filter, {k: live.get(k, (0, 0))[0] for k in keys})
    cut.add("filter", allowed.refused)
    return allowed


def widened(limit: int) -> Iterator[int]:
    """The depths a recall takes candidates at: ``limit + RUNNERS_UP``, then four times as many
    while folded copies took places it owes other memories (rare: a write refuses copies)."""
    depth = limit + RUNNERS_UP
    yield depth
    while depth < MAX_DEPTH:
        depth *= WIDEN
        yield depth


def ahead(depth: int) -> int:
    """How deep a partition is searched for ``depth``: the next widening's depth, whose rows
    cost no more to rank than ``depth``'s (the scan scores every candidate either way)."""
    return min(depth * WIDEN, MAX_DEPTH)


def relevance(
    book: MemoryBook,
    scope: Scope,
    asked: Asked,
    vector: np.ndarray | None,
    depth: int,
    allowed: Narrowing | None,
    live: dict[str, tuple[int, int]],
    cut: _Cut,
    searched: Searched,
) -> tuple[Pool, int]:
    """The ``depth`` best candidates of the readable partitions, valid at the asked time, and how
    many were scored. Counts what validity left out (superseded, expired, not yet valid), and
    what a broad filter refused on the way, each depth afresh.

    An unfiltered partition is searched deep enough for the next widening (``ahead``) and kept
    in ``searched``: when folded copies widen the recall, its next depth is cut from the same
    ranking instead of a second search. The rows each depth sees are the ones a search for
    that depth gives (a search ranks every candidate before it cuts), so feedback and the
    merge see exactly what they saw before."""
    for reason in ("superseded", "expired", "not_yet_valid"):
        cut.counts[reason] = 0
    if allowed is not None:
        cut.counts["filter"] = allowed.refused
    if vector is None:
        if asked.data_filter is None or not scope.allowed:
            return [], 0
        pool, left_out = newest_matching(
            book, book.store, scope.allowed, asked.data_filter, at=asked.at, as_of=asked.as_of, count=depth
        )
        cut.counts["filter"] = left_out
        return pool, 0
    micros = to_micros(asked.at)
    results: list[PartitionResult] = []
    scored = 0
    for space in scope.allowed:
        key = partition_key(space)
        if allowed is None:
            deep, result = searched.get(key, (0, None))
            if result is None or deep < depth:
                deep = ahead(depth)
                result = book.store.search(key, vector, deep, now=micros, text=asked.query or None)
                searched[key] = (deep, result)
            result = result.best(depth)
        else:
            result, refused = search_narrowed(book, allowed, key, vector, depth, now=micros, text=asked.query or None)
            cut.add("filter", refused)
        superseded = live.get(key, (0, 0))[1]
        cut.add("superseded", min(superseded, result.ended))
        cut.add("expired", max(result.ended - superseded, 0))
        cut.add("not_yet_valid", result.pending)
        scored += result.candidates
        results.append(result)
    if asked.query:
        results = with_feedback(results, vector)
    # One merge by score; only the rows that made it are read out of their partitions.
    return [(hit, scope.allowed[i]) for i, hit in merge_best(results, depth)], scored


def confirm(book: MemoryBook, pool: Pool, asked: Asked) -> tuple[Pool, dict[str, Labels], dict[str, Data]]:
    """Validity's last word: of the candidates, those the catalog holds as valid at the asked time
    (current, unless ``as_of``; never forgotten), with their labels and data, in one read."""
    current, data = book.current_with_data([hit.id for hit, _ in pool], asked.at, as_of=asked.as_of)
    return [pair for pair in pool if pair[0].id in current], current, data


def fold(book: MemoryBook, pool: Pool, data: dict[str, Data]) -> tuple[Pool, int]:
    """Copies folded: of two candidates that are the same fact, the later wins; and how many were."""
    return fold_candidates(pool, book.store, data)


def limit_(
    ranked: Pool, current: dict[str, Labels], data: dict[str, Data], limit: int, scored: int, cut: _Cut
) -> Answer:
    """The best ``limit`` out; the runners-up recorded as cut by ``limit``, the rest by relevance."""
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
    cut.counts["limit"] = len(items) - len(memories)
    cut.counts["relevance"] = max(scored - len(items), 0)
    return Answer(memories, items, cut.final())


def deliver(parts: Parts, caller: Caller, run: Run, scope: Scope, asked: Asked, found: Answer) -> int:
    """The recall's delivery and the run's step, committed before the answer leaves (``delivered``)."""
    with _stage("deliver"):
        return delivered(
            parts,
            caller,
            run,
            found.memories,
            query=asked.query,
            limit=asked.limit,
            at=asked.now,
            searched=list(scope.allowed),
            items=found.items,
            cut=found.cut,
        )


def delivered(
    parts: Parts,
    caller: Caller,
    run: Run,
    memories: Sequence[Memory | RecalledMemory],
    *,
    query: str,
    limit: int,
    at: datetime,
    searched: list[str | None],
    items: list[DeliveryItem],
    cut: dict[str, int],
) -> int:
    """What a caller read (a recall's memories, a listed page), recorded as delivered: the
    delivery (ids, scores, reasons; never texts) and the run's step with the marks it now
    carries, in one transaction committed with concurrent recalls' when they meet; the
    delivery's id once this one's rows are in. Flushed to the disk first only when the run opens
    or its marks grow (the barrier's memory); otherwise a power cut may lose the record, never a
    killed process (docs/guarantees.md, "What a power cut may take")."""
    marks = marks_of(m.labels for m in memories)
    step = Step("recall", marks, memory_ids=tuple(m.id for m in memories))

    def bookkeeping(tx: Tx) -> int:
        delivery_id = parts.deliveries.record(
            tx, caller, query=query, limit=limit, at=at, searched=searched, items=items, cut=cut
        )
        parts.runs.record(tx, run, caller, steps=[step], carry=marks)
        return delivery_id

    durable = not run.opened or not set(marks) <= set(run.carried.marks())
    return parts.commits.run(bookkeeping, durable=durable)


@contextmanager
def _stage(name: str) -> Iterator[None]:
    began = time.perf_counter()
    try:
        yield
    finally:
        time_stage(name, time.perf_counter() - began)
