"""Recall's filter over data with a query, partition by partition: the search that scores the
rows a filter allows, chosen by how many it allows (issue 69: no filter costs a scan).

- **Read whole** (a partition whose allowed set holds at most ``READ_WHOLE`` memories or
  ``1 / BROAD_SHARE`` of its memories): the catalog's index gives the ids (``filter_reach``) and
  the partition scores every allowed row valid now, exactly (``VectorStore.search(allow=…)``),
  past any IVF probe: a selective filter whose matches lie far from the query still answers.
- **Broad** (a larger set, found by reading its ids up to that bound, no further): handing tens of
  thousands of ids over costs more than the search itself, so the partition's own search runs
  unfiltered, deep, and its ranking is walked best first, a few candidates at a time checked
  against the filter (their data read by id, ``DataFilter.matches`` deciding), until ``depth``
  are allowed. A filter restricts a search's candidates, never its statistics
  (``indexing.partitions.allowed``), so the allowed rows rank as they do unfiltered and the walk
  keeps the best allowed rows of what the unfiltered search scored. In a partition scanned
  exactly (under the IVF threshold) that is the read-whole answer; in one served by its IVF
  image it is the read-whole answer up to what the probe scored, the guarantee an unfiltered
  recall gives (recall@10 calibrated at ≥ 0.97). A walk that runs out of ranked rows short of
  ``depth`` reads the set whole after all, so a filter never answers fewer while allowed rows
  remain.

What the filter left out is counted whole for a partition read whole; for a broad one, as the
filter with no query counts it, the memories it refused on the way (those the walk checked),
since counting them all would read the set.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from indexing.partitions.allowed import ids_of
from indexing.partitions.partition import LivePartition
from indexing.rows import PartitionResult
from server.memories import MemoryBook
from server.memories.data import loaded
from server.memories.data_filter import SMALL_SET, DataFilter, filter_reach, reach_within
from server.memories.data_index import checking_sql

READ_WHOLE = SMALL_SET  # a partition's allowed set read whole when it holds no more ...
BROAD_SHARE = 50  # ... or no more than 1 in this many of the partition's memories
FIRST_CHECK = 2  # the walk checks 2 × depth candidates first, then four times as many each step


@dataclass(frozen=True)
class Narrowing:
    """A filter's reach: the allowed ids of each partition read whole, the partitions too broad
    to read (searched unfiltered, their candidates checked), and the memories of the read ones
    the filter left out."""

    data_filter: DataFilter
    ids: dict[str, list[str]]
    broad: frozenset[str]
    refused: int
    live: dict[str, int]  # each partition's memories


def narrowing(book: MemoryBook, keys: list[str], data_filter: DataFilter, live: dict[str, int]) -> Narrowing:
    """Which of the partitions ``keys`` (``live``: each one's memories) are read whole, and
    their ids: a partition larger than its bound has its set read up to that bound, no further."""
    bounds = {k: max(READ_WHOLE, live.get(k, 0) // BROAD_SHARE) for k in keys}
    ids, broad = reach_within(book, keys, data_filter, {k: b for k, b in bounds.items() if live.get(k, 0) > b})
    read = [k for k in keys if k not in broad]
    refused = sum(live.get(k, 0) for k in read) - sum(len(v) for v in ids.values())
    return Narrowing(data_filter, ids, frozenset(broad), refused, live)


def search_narrowed(
    book: MemoryBook, narrowed: Narrowing, key: str, query: np.ndarray, depth: int, *, now: int, text: str | None
) -> tuple[PartitionResult, int]:
    """The ``depth`` best rows of partition ``key`` that the filter allows, valid at ``now``, and
    how many memories the walk saw the filter refuse (0 for a partition read whole)."""
    store = book.store
    if key not in narrowed.broad:
        return store.search(key, query, depth, now=now, text=text, allow=narrowed.ids.get(key, [])), 0
    allowed: dict[str, bool] = {}  # ids checked, across deeper searches
    k = depth * BROAD_SHARE * 2  # twice depth expected at the least share a broad set has
    while True:
        result = store.search(key, query, k, now=now, text=text)
        part = result.partition
        assert isinstance(part, LivePartition)
        kept: list[int] = []
        checked, step = 0, FIRST_CHECK * depth
        while len(kept) < depth and checked < len(result):
            ids = ids_of(part, result.rows[checked : checked + step])
            fresh = [i for i in ids if i not in allowed]
            if fresh:
                found = allowed_among(book, key, fresh, narrowed.data_filter)
                allowed.update((i, i in found) for i in fresh)
            kept += [checked + j for j, i in enumerate(ids) if allowed[i]]
            checked += len(ids)
            # The next step sized by the share allowed so far (a broad set's least, at worst).
            rate = max(len(kept) / checked, 1 / BROAD_SHARE)
            step = max(depth, math.ceil(1.5 * (depth - len(kept)) / rate))
        exhausted = len(result) < k
        if len(kept) >= depth or (exhausted and part.base is None):  # enough, or every valid row ranked
            kept = kept[:depth]
            # Refused: those checked above the last kept (all checked, when it ran out).
            refused = (kept[-1] + 1 if len(kept) == depth else checked) - len(kept)
            return _kept(result, kept, refused), refused
        if exhausted:  # the IVF probe's rows ran out short: every allowed row scored after all
            ids = filter_reach(book, [key], narrowed.data_filter).get(key, [])
            result = store.search(key, query, depth, now=now, text=text, allow=ids)
            return result, max(narrowed.live.get(key, 0) - len(ids), 0)
        k *= 4


def _kept(result: PartitionResult, kept: list[int], refused: int) -> PartitionResult:
    """``result`` narrowed to its entries ``kept``; its candidates less those the walk refused."""
    at = np.array(kept, dtype=np.int64)
    return PartitionResult(
        result.rows[at],
        result.scores[at],
        result.scored,
        max(result.candidates - refused, len(kept)),
        result.ended,
        result.pending,
        result.postings,
        partition=result.partition,
        cosines=None if result.cosines is None else result.cosines[at],
    )


def allowed_among(book: MemoryBook, key: str, ids: list[str], data_filter: DataFilter) -> set[str]:
    """Of ``ids`` (rows of partition ``key``), those whose data ``data_filter`` matches: probed
    in the index by its key, and where a loose value leaves it undecided, by the filter's own
    ``matches`` on the data (``data_index.checking_sql``). A memory forgotten meanwhile is the
    catalog's check to drop, as for any hit (``server.facade.recall.confirm``)."""
    catalog = book.catalog
    statement, params = checking_sql(data_filter.triples, catalog.sql, key)
    listed = json.dumps(ids)
    rows = catalog.all(statement, tuple(listed if p is None else p for p in params))
    return {r[0] for r in rows if r[1] is None or data_filter.matches(loaded(r[1]))}
