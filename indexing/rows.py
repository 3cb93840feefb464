"""What goes into a partition and what comes out of a search of it: rows (one by one, or by
column for a bulk write), hits, a partition's result, and the merge of several results.

Times are microseconds since the epoch, UTC; ``OPEN_END`` is the ``valid_until`` of a row with no
end.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

OPEN_END = np.iinfo(np.int64).max  # valid_until of a row with no end


@dataclass(frozen=True)
class Row:
    """One stored vector and its payload. Times are microseconds since the epoch, UTC."""

    id: str
    text: str
    vector: np.ndarray
    created_at: int
    valid_from: int
    valid_until: int | None = None


@dataclass(frozen=True)
class RowBatch:
    """Rows by column: a bulk write hands the store one of these, not a row object per memory.

    ``valid_until`` holds ``OPEN_END`` for a row with no end.
    """

    ids: list[str]
    texts: list[str]
    vectors: np.ndarray  # (n, dimension) float32
    created_at: np.ndarray  # int64
    valid_from: np.ndarray  # int64
    valid_until: np.ndarray  # int64

    @classmethod
    def of(cls, rows: list[Row]) -> RowBatch:
        return cls(
            ids=[r.id for r in rows],
            texts=[r.text for r in rows],
            vectors=np.stack([np.asarray(r.vector, dtype=np.float32) for r in rows]),
            created_at=np.array([r.created_at for r in rows], dtype=np.int64),
            valid_from=np.array([r.valid_from for r in rows], dtype=np.int64),
            valid_until=np.array([OPEN_END if r.valid_until is None else r.valid_until for r in rows], dtype=np.int64),
        )

    @classmethod
    def of_table(cls, table: pa.Table, dimension: int) -> RowBatch:
        """The rows of an Arrow table of the store's schema (a file's, a table's, a tail's)."""
        n = table.num_rows
        flat = table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        until = table.column("valid_until").fill_null(int(OPEN_END))
        return cls(
            ids=table.column("id").to_pylist(),
            texts=table.column("text").to_pylist(),
            vectors=flat.reshape(n, dimension).astype(np.float32, copy=False),
            created_at=table.column("created_at").to_numpy().astype(np.int64),
            valid_from=table.column("valid_from").to_numpy().astype(np.int64),
            valid_until=until.to_numpy().astype(np.int64),
        )

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    text: str
    created_at: int
    valid_from: int
    valid_until: int | None


class Answered(Protocol):
    """What answered a search (a ``LivePartition``): it reads a row's vector and makes its hit."""

    def vectors_of(self, rows: np.ndarray) -> np.ndarray: ...

    def hit(self, i: int, score: float) -> Hit: ...


@dataclass(frozen=True)
class PartitionResult:
    """The best rows of one partition, best first, and what the search touched.

    The rows are numbers in the partition that answered; a ``Hit`` (id, text, times) is made only
    for a row that is asked for: a merge over several partitions keeps the best of all and drops
    the rest unread.
    """

    rows: np.ndarray  # int64, best first
    scores: np.ndarray  # float, the same order
    scored: int  # vectors whose similarity was computed
    candidates: int  # rows valid now (the candidates of relevance)
    ended: int  # rows excluded because valid_until <= now
    pending: int  # rows excluded because valid_from > now
    postings: int = 0  # lexical postings read
    partition: Answered | None = field(default=None, repr=False, compare=False)
    cosines: np.ndarray | None = None  # each row's plain cosine, when the scores fuse more than it
    units: tuple[float, float] | None = None  # the fusion's units (``Fused.units``), when it fused

    def best(self, k: int) -> PartitionResult:
        """The first ``k`` rows (the best), with what the search touched: the result a search for
        ``k`` would have given (``search`` ranks every candidate before it cuts)."""
        if len(self.rows) <= k:
            return self
        cosines = None if self.cosines is None else self.cosines[:k]
        return replace(self, rows=self.rows[:k], scores=self.scores[:k], cosines=cosines)

    def vectors(self) -> np.ndarray:
        """The rows' vectors, in their order."""
        assert self.partition is not None
        return self.partition.vectors_of(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def hit(self, j: int) -> Hit:
        assert self.partition is not None
        return self.partition.hit(int(self.rows[j]), float(self.scores[j]))

    @property
    def hits(self) -> list[Hit]:
        return [self.hit(j) for j in range(len(self.rows))]


def merge_best(results: list[PartitionResult], k: int) -> list[tuple[int, Hit]]:
    """The ``k`` best hits over several partitions' results, as (index of the result, hit), best
    first; equal scores keep the results' order, then each result's own order."""
    if not results:
        return []
    scores = np.concatenate([r.scores for r in results])
    source = np.repeat(np.arange(len(results)), [len(r) for r in results])
    rank = np.concatenate([np.arange(len(r)) for r in results])
    best = np.argsort(-scores, kind="stable")[:k]
    return [(int(source[b]), results[source[b]].hit(int(rank[b]))) for b in best]
