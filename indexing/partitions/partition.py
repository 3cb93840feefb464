"""A partition as a search sees it, kept in memory and current (``LivePartition``); the rows
and results that go in and out of it are ``indexing.rows``.

LanceDB is the store of record; a query is served from the partition's ``LivePartition``: a float32
matrix, the validity interval of each row, and the texts. Validity is applied inside the partition
before ranking, so an expired or superseded row never takes a place in the top k. A large partition
is served from its persisted image (``image.py``), mapped, whose IVF lists narrow the rows scored,
and the rows written since its build, held here and scanned exactly.

Named ``LivePartition``, not a snapshot: it is not a copy frozen at a version but the one
in-memory copy that the store's writers edit in place (``append``, ``end``, ``remove``) as they
write the table, so that a write never costs a reload; the store throws it away only when
another process wrote (its ``token`` is behind) or a rewrite changed the image under it.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from indexing.partitions.allowed import search_allowed
from indexing.partitions.image import Image
from indexing.partitions.numbering import NumberedRows
from indexing.partitions.validity import Validity, ValidityCounts, validity_window
from indexing.relevance.fusion import Fused, fuse_lexical
from indexing.relevance.lexical import LexicalIndex
from indexing.relevance.top import largest
from indexing.rows import Hit, PartitionResult, RowBatch

_NO_ROWS = np.zeros(0, dtype=np.int64)


@dataclass
class LivePartition:
    """A partition as a search sees it: the rows held in memory (every row of a small partition)
    and, for a large one, its mapped ``base`` image, with the rows written since in memory.
    ``base_live`` marks the image's rows still current in the table (a row written since, or
    forgotten, is gone from the image's view).

    Mutable, and not safe to share unguarded: ``append``, ``end`` and ``remove`` change it in
    place (``changes`` counts them, so cached validity masks know they are stale), and a search
    grows its lexical index on first use. Only ``VectorStore`` mutates it, and only holding its
    thread lock (``PartitionLocks.thread``): a writer between writing the table and giving the
    partition's write lock back, a search while it reads. Anyone else reads it, never edits it.
    """

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
    base: Image | None = None
    base_live: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    base_counts: ValidityCounts | None = None
    lexical: LexicalIndex | None = None  # the image's (mapped) and the rest's, on the first search with a text
    changes: int = 0  # bumped by every change to the rows: what a cached validity is checked against
    # The tail (``tail.py``) its rows were read with: its id, "" for none, None when not known
    # (a fold was under way): ``tail.refresh`` takes only that tail, or any when there was none.
    tail_id: str | None = None
    _validity: Validity | None = field(default=None, repr=False)
    _base_valid: tuple[int, int, np.ndarray] | None = field(default=None, repr=False)  # (changes, lo, mask), for BM25

    def __post_init__(self) -> None:
        if self.vectors.shape[1:] != (self.dimension,):
            self.vectors = np.zeros((0, self.dimension), dtype=np.float32)

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def from_arrow(cls, table: pa.Table, dimension: int, token: str) -> LivePartition:
        part = cls(dimension=dimension, token=token)
        part.append_arrow(table)
        return part

    @classmethod
    def over(cls, image: Image, *, gone: np.ndarray, since: pa.Table, dimension: int, token: str) -> LivePartition:
        """A large partition: its image, less the rows ``gone``, and the rows written ``since``."""
        part = cls(dimension=dimension, token=token, base=image, base_live=~gone)
        part.base_counts = ValidityCounts(part.base_live, image.valid_from, image.valid_until)
        part.append_arrow(since)
        return part

    def append_arrow(self, table: pa.Table) -> None:
        if table.num_rows:
            self.append(RowBatch.of_table(table, self.dimension))

    def append(self, batch: RowBatch) -> None:
        n = len(batch)
        if not n:
            return
        need = self.rows + n
        if need > self.vectors.shape[0]:
            # Room past the first rows too: a table's load is followed by its tail's rows, and
            # a grown copy of a large partition's vectors costs as much as loading them.
            capacity = max(need + need // 8, 2 * self.vectors.shape[0], 64)
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
        self.changes += 1
        if self.lexical is not None:
            self.lexical.append(self._image_rows + start, batch.texts)

    @property
    def _image_rows(self) -> int:
        """Rows numbered before the held ones in the lexical index: the image's."""
        return self.base.rows if self.base is not None else 0

    def lexicon(self) -> LexicalIndex:
        """The partition's lexical index over one numbering: the image's rows, then the held ones."""
        if self.lexical is None:
            if self.base is not None:
                index = self.base.lexical.copy()
                index.append(self.base.rows, self.texts[: self.rows])
            else:
                index = LexicalIndex.build(self.texts[: self.rows])
            self.lexical = index
        return self.lexical

    def _base_row(self, id_: str) -> int:
        if self.base is None:
            return -1
        row = int(self.base.rows_of([id_])[0])
        return row if row >= 0 and self.base_live[row] else -1

    def end(self, id_: str, valid_until: int) -> None:
        self.changes += 1
        i = self.row_of.get(id_)
        if i is not None:
            self.valid_until[i] = valid_until
        elif (row := self._base_row(id_)) >= 0:
            assert self.base is not None and self.base_counts is not None
            self.base_counts.change(int(self.base.valid_from[row]), int(self.base.valid_until[row]), None)
            self.base.valid_until[row] = valid_until
            self.base_counts.change(None, None, (int(self.base.valid_from[row]), valid_until))

    def remove(self, ids: list[str]) -> None:
        self.changes += 1
        gone = []
        for id_ in ids:
            i = self.row_of.pop(id_, None)
            if i is not None:
                self.live[i] = False
                self.texts[i] = None
                gone.append(self._image_rows + i)
            elif (row := self._base_row(id_)) >= 0:
                assert self.base is not None and self.base_counts is not None
                self.base_counts.change(int(self.base.valid_from[row]), int(self.base.valid_until[row]), None)
                self.base_live[row] = False
        if self.lexical is not None and gone:
            self.lexical.remove(gone)  # the forgotten texts' terms leave it too, in one rebuild

    def holds(self, id_: str) -> bool:
        """Whether the row ``id_`` is here and not forgotten (held or in the image)."""
        return id_ in self.row_of or self._base_row(id_) >= 0

    def text_of(self, id_: str) -> str | None:
        i = self.row_of.get(id_)
        if i is not None:
            return self.texts[i]
        row = self._base_row(id_)
        return None if row < 0 or self.base is None else self.base.text(row)

    def vector_of(self, id_: str) -> np.ndarray | None:
        i = self.row_of.get(id_)
        if i is not None:
            return self.vectors[i]
        row = self._base_row(id_)
        return None if row < 0 or self.base is None else np.array(self.base.vectors[row])

    def live_ids(self) -> list[str]:
        held = [i for i, alive in zip(self.ids, self.live[: self.rows]) if alive]
        if self.base is None:
            return held
        return [self.base.id(int(r)) for r in np.flatnonzero(self.base_live)] + held

    # -- search -----------------------------------------------------------------------------

    def search(
        self, query: np.ndarray, k: int, *, now: int, text: str | None = None, allow: Collection[str] | None = None
    ) -> PartitionResult:
        """The ``k`` best rows valid at ``now``; validity decides before similarity does. With a
        query ``text``, relevance is cosine fused with BM25 over the same valid rows. With
        ``allow``, only rows of those ids are candidates (``allowed.search_allowed``).

        Rows are numbered the image's first, then the held ones (the lexical index's numbering).
        """
        validity = self._validity_at(now)
        if allow is not None:
            return search_allowed(self, query, k, now=now, text=text, allow=allow, validity=validity)
        ended, pending, candidates = (a + b for a, b in zip(validity.base_counts, validity.held_counts))
        found = self.unfiltered(query, now=now, text=text)
        if found is None:
            return PartitionResult(_NO_ROWS, np.zeros(0, dtype=np.float32), 0, 0, 0, 0, partition=self)
        rows, scores, cosines, scored, fused = found
        if len(rows) > k:
            top = largest(scores, k)
            rows, scores, cosines = rows[top], scores[top], cosines[top]
        best = np.argsort(-scores, kind="stable")
        return PartitionResult(
            rows[best],
            scores[best],
            scored,
            candidates,
            ended,
            pending,
            0 if fused is None else fused.postings,
            partition=self,
            cosines=cosines[best],
            units=None if fused is None else fused.units,
        )

    def unfiltered(
        self, query: np.ndarray, *, now: int, text: str | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, Fused | None] | None:
        """Every candidate of the search at ``now`` (the IVF probe's valid rows and the held
        ones), in no order: rows, scores, plain cosines, the vectors scored, and with ``text``
        the fusion, whose units and BM25 a narrowed search scores its rows in; None for no rows."""
        offset = self._image_rows
        validity = self._validity_at(now)
        found_rows: list[np.ndarray] = []
        found_scores: list[np.ndarray] = []
        valid_parts: list[np.ndarray] = []
        scored = 0
        if self.base is not None and self.base.rows:
            b = self.base
            rows, scores = b.lists.candidates(b.vectors, query)
            scored += len(rows)
            keep = self.base_live[rows] & (b.valid_until[rows] > now) & (b.valid_from[rows] <= now)
            found_rows.append(rows[keep])
            found_scores.append(scores[keep])
            if text is not None:
                valid_parts.append(self.base_valid_at(now))
        n = self.rows
        if n:
            scores = self.vectors[:n] @ query
            scored += n
            found_rows.append(validity.held_rows + offset)
            found_scores.append(scores[validity.held_rows])
            valid_parts.append(validity.held_valid)
        if not found_rows:
            return None
        rows = np.concatenate(found_rows) if len(found_rows) > 1 else found_rows[0]
        scores = np.concatenate(found_scores) if len(found_scores) > 1 else found_scores[0]
        if text is None:
            return rows, scores, scores, scored, None
        fused = fuse_lexical(
            self.lexicon(), self.numbered(), query, text=text, rows=rows, cos=scores, valid=np.concatenate(valid_parts)
        )
        cosines = fused.cosines if fused.cosines is not None else fused.scores
        return fused.rows, fused.scores, cosines, scored + fused.extra_scored, fused

    def search_sharing(
        self, query: np.ndarray, k: int, *, now: int, text: str, share: float, most: int
    ) -> PartitionResult:
        """The ``k`` best by plain cosine among the rows valid at ``now`` whose texts hold at least
        ``share`` of ``text``'s terms (of those, the ``most`` that hold the most): a look for rows
        that say what ``text`` says, which share its words, read from the lexical postings
        instead of a pass over every vector. ``candidates`` counts the rows scored."""
        lexicon = self.lexicon()
        terms = lexicon.query_terms(text)
        offset = self._image_rows
        rows, counts = lexicon.rows_sharing(terms, offset + self.rows, at_least=max(1, math.ceil(share * len(terms))))
        validity = self._validity_at(now)
        valid = np.zeros(len(rows), dtype=bool)
        held = rows >= offset
        valid[held] = validity.held_valid[rows[held] - offset]
        if self.base is not None and self.base.rows:
            b, based = self.base, rows[~held]
            valid[~held] = self.base_live[based] & (b.valid_until[based] > now) & (b.valid_from[based] <= now)
        rows, counts = rows[valid], counts[valid]
        if len(rows) > most:
            rows = rows[np.argsort(-counts, kind="stable")[:most]]
        if not len(rows):
            return PartitionResult(_NO_ROWS, np.zeros(0, dtype=np.float32), 0, 0, 0, 0, partition=self)
        scores = self.numbered()[rows] @ query
        if len(rows) > k:
            top = largest(scores, k)
            rows, scores = rows[top], scores[top]
        best = np.argsort(-scores, kind="stable")
        return PartitionResult(rows[best], scores[best], len(rows), len(rows), 0, 0, partition=self)

    def _validity_at(self, now: int) -> Validity:
        """Which held rows are valid at ``now`` and the cut counts, computed once for as long as
        they hold: a recall's clock moves every call, but rarely past a row's start or end."""
        cached = self._validity
        if cached is not None and cached.changes == self.changes and cached.lo <= now < cached.hi:
            return cached
        n = self.rows
        self._validity = validity_window(
            self.changes,
            self.live[:n],
            valid_from=self.valid_from[:n],
            valid_until=self.valid_until[:n],
            now=now,
            base=self.base_counts if self.base is not None else None,
        )
        return self._validity

    def base_valid_at(self, now: int) -> np.ndarray:
        """The image's rows valid at ``now`` (BM25 scores them all), kept with the held rows' mask."""
        validity = self._validity_at(now)
        cached = self._base_valid
        if cached is not None and cached[0] == validity.changes and cached[1] == validity.lo:
            return cached[2]
        b = self.base
        assert b is not None
        mask = self.base_live & (b.valid_until > now) & (b.valid_from <= now)
        self._base_valid = (validity.changes, validity.lo, mask)
        return mask

    def numbered(self) -> NumberedRows:
        """Its rows in the one numbering (``indexing.partitions.numbering``), as they are now."""
        return NumberedRows(
            self.base,
            self.vectors,
            self.ids,
            self.texts,
            self.created_at,
            self.valid_from,
            self.valid_until,
            self._image_rows,
            self.dimension,
        )

    def vectors_of(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of ``rows`` in the partition's one numbering (the image's, then the held ones)."""
        return self.numbered()[rows]

    def hit(self, i: int, score: float) -> Hit:
        """Row ``i`` (in the one numbering) as a hit."""
        return self.numbered().hit(i, score)


def _grow(array: np.ndarray, capacity: int) -> np.ndarray:
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[: array.shape[0]] = array
    return grown
