"""The in-memory image of one partition, and search inside it.

LanceDB is the store of record; a query is served from this image: a float32 matrix, the
validity interval of each row, and the texts. Validity is applied inside the partition before
ranking, so an expired or superseded row never takes a place in the top k. Past
``ANN_THRESHOLD`` rows an IVF index narrows the rows scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from indexing.ann import ANN_THRESHOLD, IvfIndex
from indexing.fusion import fuse_lexical
from indexing.lexical import LexicalIndex

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
    def of(cls, rows: list[Row]) -> "RowBatch":
        return cls(
            ids=[r.id for r in rows],
            texts=[r.text for r in rows],
            vectors=np.stack([np.asarray(r.vector, dtype=np.float32) for r in rows]),
            created_at=np.array([r.created_at for r in rows], dtype=np.int64),
            valid_from=np.array([r.valid_from for r in rows], dtype=np.int64),
            valid_until=np.array([OPEN_END if r.valid_until is None else r.valid_until for r in rows], dtype=np.int64),
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


@dataclass(frozen=True)
class PartitionResult:
    """The best hits of one partition, and what the search touched."""

    hits: list[Hit]
    scored: int  # vectors whose similarity was computed
    candidates: int  # rows valid now (the candidates of relevance)
    ended: int  # rows excluded because valid_until <= now
    pending: int  # rows excluded because valid_from > now
    postings: int = 0  # lexical postings read


@dataclass
class Snapshot:
    dimension: int
    token: str = ""
    rows: int = 0
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    valid_from: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    valid_until: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    created_at: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    live: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    ids: list[str] = field(default_factory=list)
    texts: list[str | None] = field(default_factory=list)
    row_of: dict[str, int] = field(default_factory=dict)
    ivf: IvfIndex | None = None
    lexical: LexicalIndex | None = None  # built from the texts on the first search with a text

    def __post_init__(self) -> None:
        if self.vectors.shape[1:] != (self.dimension,):
            self.vectors = np.zeros((0, self.dimension), dtype=np.float32)

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def from_arrow(cls, table: pa.Table, dimension: int, token: str) -> "Snapshot":
        snap = cls(dimension=dimension, token=token)
        n = table.num_rows
        if n:
            flat = table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
            snap.vectors = np.ascontiguousarray(flat.reshape(n, dimension), dtype=np.float32)
            snap.valid_from = table.column("valid_from").to_numpy().astype(np.int64)
            until = table.column("valid_until").fill_null(int(OPEN_END))
            snap.valid_until = until.to_numpy().astype(np.int64)
            snap.created_at = table.column("created_at").to_numpy().astype(np.int64)
            snap.live = np.ones(n, dtype=bool)
            snap.ids = table.column("id").to_pylist()
            snap.texts = table.column("text").to_pylist()
            snap.row_of = {id_: i for i, id_ in enumerate(snap.ids)}
            snap.rows = n
        snap.reindex()
        return snap

    def reindex(self) -> None:
        """Build the IVF index when the partition is large enough to need one."""
        if self.rows >= ANN_THRESHOLD:
            self.ivf = IvfIndex.build(self.vectors[: self.rows])
        else:
            self.ivf = None

    def append(self, batch: RowBatch) -> None:
        n = len(batch)
        if not n:
            return
        need = self.rows + n
        if need > self.vectors.shape[0]:
            capacity = max(need, 2 * self.vectors.shape[0], 64)
            self.vectors = _grow(self.vectors, capacity)
            self.valid_from = _grow(self.valid_from, capacity)
            self.valid_until = _grow(self.valid_until, capacity)
            self.created_at = _grow(self.created_at, capacity)
            self.live = _grow(self.live, capacity)
        start = self.rows
        self.vectors[start:need] = batch.vectors
        self.valid_from[start:need] = batch.valid_from
        self.valid_until[start:need] = batch.valid_until
        self.created_at[start:need] = batch.created_at
        self.live[start:need] = True
        self.ids.extend(batch.ids)
        self.texts.extend(batch.texts)
        self.row_of.update(zip(batch.ids, range(start, need)))
        self.rows = need
        if self.lexical is not None:
            self.lexical.append(start, batch.texts)
        if self.ivf is None and self.rows >= ANN_THRESHOLD:
            self.reindex()
        elif self.ivf is not None and self.rows > 2 * self.ivf.built_rows:
            self.reindex()

    def end(self, id_: str, valid_until: int) -> None:
        i = self.row_of.get(id_)
        if i is not None:
            self.valid_until[i] = valid_until

    def remove(self, ids: list[str]) -> None:
        gone = []
        for id_ in ids:
            i = self.row_of.pop(id_, None)
            if i is not None:
                self.live[i] = False
                self.texts[i] = None
                gone.append(i)
        if self.lexical is not None:
            self.lexical.remove(gone)  # the forgotten text's terms leave the index too

    def lexicon(self) -> LexicalIndex:
        if self.lexical is None:
            self.lexical = LexicalIndex.build(self.texts[: self.rows])
        return self.lexical

    def text_of(self, id_: str) -> str | None:
        i = self.row_of.get(id_)
        return None if i is None else self.texts[i]

    def vector_of(self, id_: str) -> np.ndarray | None:
        i = self.row_of.get(id_)
        return None if i is None else self.vectors[i]

    # -- search -----------------------------------------------------------------------------

    def search(self, query: np.ndarray, k: int, now: int, text: str | None = None) -> PartitionResult:
        """The ``k`` best rows valid at ``now``; validity decides before similarity does. With a
        query ``text``, relevance is cosine fused with BM25 over the same valid rows."""
        n = self.rows
        if n == 0:
            return PartitionResult([], 0, 0, 0, 0)
        live = self.live[:n]
        ended_mask = live & (self.valid_until[:n] <= now)
        pending_mask = live & (self.valid_from[:n] > now)
        ended = int(ended_mask.sum())
        pending = int((pending_mask & ~ended_mask).sum())
        valid = live & ~ended_mask & ~pending_mask
        candidates = int(valid.sum())
        if self.ivf is None:
            scores = self.vectors[:n] @ query
            scored = n
            rows = np.flatnonzero(valid)
            scores = scores[rows]
        else:
            rows, scores = self.ivf.candidates(query)
            tail = np.arange(self.ivf.built_rows, n)
            if len(tail):
                rows = np.concatenate([rows, tail])
                scores = np.concatenate([scores, self.vectors[tail] @ query])
            scored = len(rows)
            keep = valid[rows]
            rows, scores = rows[keep], scores[keep]
        postings = 0
        if text is not None:
            fused = fuse_lexical(self.lexicon(), self.vectors, query, text, rows, scores, valid)
            rows, scores, postings = fused.rows, fused.scores, fused.postings
            scored += fused.extra_scored
        if len(rows) > k:
            top = np.argpartition(-scores, k - 1)[:k]
            rows, scores = rows[top], scores[top]
        best = np.argsort(-scores, kind="stable")
        hits = []
        for j in best:
            i = int(rows[j])
            until = int(self.valid_until[i])
            hits.append(
                Hit(
                    id=self.ids[i],
                    score=float(scores[j]),
                    text=self.texts[i] or "",
                    created_at=int(self.created_at[i]),
                    valid_from=int(self.valid_from[i]),
                    valid_until=None if until == OPEN_END else until,
                )
            )
        return PartitionResult(hits, scored, candidates, ended, pending, postings)


def _grow(array: np.ndarray, capacity: int) -> np.ndarray:
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[: array.shape[0]] = array
    return grown
