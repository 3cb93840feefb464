"""A partition's search narrowed to an allow-set of ids (a caller's narrowing, decided outside:
``indexing`` knows ids, not why they were chosen), and the ids of a result's rows, which such a
caller checks when it narrows an unfiltered search instead (``server.memories.filter_search``).

A narrowing restricts the candidates, never the statistics: the allowed rows are fused in the
unfiltered search's units (BM25 with the valid rows' corpus statistics, the cosine's spread over
the valid rows, BM25's over that search's candidates: ``Fused.narrowed``). So an allowed row
scores what the unfiltered search scores it, the allowed rows rank among themselves as they rank
there, and the unfiltered search's result less the rows not allowed is this search's answer over
the rows that search scored.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

import numpy as np

from indexing.partitions.image import Image
from indexing.partitions.numbering import NumberedRows
from indexing.partitions.validity import Validity
from indexing.relevance.fusion import Fused
from indexing.relevance.top import largest
from indexing.rows import Answered, PartitionResult

_NO_ROWS = np.zeros(0, dtype=np.int64)


class Narrowable(Answered, Protocol):
    """What of a partition (``LivePartition``) a narrowed search reads."""

    base: Image | None
    base_live: np.ndarray
    rows: int
    vectors: np.ndarray
    ids: list[str]
    row_of: dict[str, int]

    def numbered(self) -> NumberedRows: ...

    def unfiltered(
        self, query: np.ndarray, *, now: int, text: str | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, Fused | None] | None: ...


def search_allowed(
    part: Narrowable,
    query: np.ndarray,
    k: int,
    *,
    now: int,
    text: str | None,
    allow: Collection[str],
    validity: Validity,
) -> PartitionResult:
    """The ``k`` best of the rows valid at ``now`` whose ids are in ``allow``. Every such row is
    scored exactly: an IVF probe could hold none of them, and the top ``k`` would then come back
    short while allowed rows remain. ``candidates`` counts the allowed valid rows; ``ended`` and
    ``pending`` stay the partition's, as without ``allow``."""
    b = part.base
    offset = b.rows if b is not None else 0
    n = part.rows
    wanted = list(allow)
    held = np.array([part.row_of.get(i, -1) for i in wanted], dtype=np.int64)
    held = np.unique(held[held >= 0])
    held = held[validity.held_valid[held]]
    based = _NO_ROWS
    if b is not None and b.rows:
        based = np.unique(b.rows_of(wanted))
        based = based[based >= 0]
        based = based[part.base_live[based] & (b.valid_until[based] > now) & (b.valid_from[based] <= now)]
    rows = np.concatenate([based, held + offset])
    allowed = len(rows)
    ended, pending = (x + y for x, y in zip(validity.base_counts[:2], validity.held_counts[:2]))
    if not allowed:
        return PartitionResult(_NO_ROWS, np.zeros(0, dtype=np.float32), 0, 0, ended, pending, partition=part)
    numbered = part.numbered()
    # The held rows' cosines from one product over them all, as the unfiltered search takes
    # them (a product over a gathered few may differ in the last bit, and ties would turn).
    held_scores = part.vectors[:n] @ query if len(held) else None
    image_scores = numbered[based] @ query if len(based) else np.zeros(0, dtype=np.float32)
    scores = np.concatenate([image_scores, held_scores[held]]) if held_scores is not None else image_scores
    scored = len(based) + (n if held_scores is not None else 0)
    cosines, postings = scores, 0
    if text is not None:
        # Scored in the unfiltered search's units and BM25 (one search's cost: its probe and
        # its BM25), so an allowed row scores here what it scores there.
        found = part.unfiltered(query, now=now, text=text)
        fused = None if found is None else found[4]
        if fused is not None:
            scores, postings = fused.narrowed(rows, scores), fused.postings
    if len(rows) > k:
        top = largest(scores, k)
        rows, scores, cosines = rows[top], scores[top], cosines[top]
    best = np.argsort(-scores, kind="stable")
    return PartitionResult(
        rows[best], scores[best], scored, allowed, ended, pending, postings, partition=part, cosines=cosines[best]
    )


def ids_of(part: Narrowable, rows: np.ndarray) -> list[str]:
    """The ids of ``rows`` (the partition's one numbering), in their order: the image's read from
    its mapped ids at once, the held ones from the list."""
    b = part.base
    offset = b.rows if b is not None else 0
    out: list[str] = [""] * len(rows)
    inside = np.flatnonzero(rows < offset)
    if b is not None and len(inside):
        for j, raw in zip(inside.tolist(), np.asarray(b.ids)[rows[inside]].tolist()):
            out[j] = raw.decode()
    for j in np.flatnonzero(rows >= offset).tolist():
        out[j] = part.ids[int(rows[j]) - offset]
    return out
