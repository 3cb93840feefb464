"""A partition's one numbering: the rows of its image first, then the rows held in memory
(``LivePartition``), as the lexical index numbers them, fusion reads their vectors and a
search's result names its rows.

Fusion asks for the vectors of a few rows the lexical signal adds to an IVF probe's candidates,
and for an even sample of the valid rows to measure the cosine's spread; a result asks for a
row as a hit. ``NumberedRows`` answers all three across the two places the rows live, without
copying either.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from indexing.partitions.image import Image
from indexing.relevance.fusion import SPREAD_SAMPLE
from indexing.rows import OPEN_END, Hit


@dataclass(frozen=True)
class NumberedRows:
    """A partition's rows in its one numbering: ``base``'s below ``offset``, the held ones from
    it. Its vectors are fusion's ``RowVectors`` (``indexing.relevance.fusion``). The held arrays
    are the partition's own, which may be longer than the rows they hold."""

    base: Image | None
    held: np.ndarray  # the held rows' vectors
    ids: list[str]
    texts: list[str | None]
    created_at: np.ndarray
    valid_from: np.ndarray
    valid_until: np.ndarray
    offset: int  # the image's rows: where the held ones start
    dimension: int

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows)
        out = np.empty((len(rows), self.dimension), dtype=np.float32)
        inside = rows < self.offset
        if self.base is not None and inside.any():  # rows below the offset are the image's
            out[inside] = self.base.vectors[rows[inside]]
        out[~inside] = self.held[rows[~inside] - self.offset]
        return out

    def spread_sample(self, valid: np.ndarray) -> np.ndarray:
        """Vectors of an even sample of the valid rows: the image's own contiguous sample (a
        stride through its mapped vectors would page most of the file in), then the held rows'."""
        parts = []
        if self.base is not None:
            keep = valid[self.base.spread_rows]
            parts.append(np.asarray(self.base.spread_vectors)[keep])
        held = np.flatnonzero(valid[self.offset :])
        if len(held):
            parts.append(self.held[held[:: max(1, len(held) // SPREAD_SAMPLE)]])
        return np.concatenate(parts) if parts else np.zeros((0, self.dimension), dtype=np.float32)

    def hit(self, i: int, score: float) -> Hit:
        """Row ``i`` as a hit."""
        if i < self.offset:
            b = self.base
            assert b is not None
            id_, text = b.id(i), b.text(i)
            created, start, until = int(b.created_at[i]), int(b.valid_from[i]), int(b.valid_until[i])
        else:
            i -= self.offset
            id_, text = self.ids[i], self.texts[i] or ""
            created, start, until = int(self.created_at[i]), int(self.valid_from[i]), int(self.valid_until[i])
        return Hit(
            id=id_,
            score=score,
            text=text,
            created_at=created,
            valid_from=start,
            valid_until=None if until == OPEN_END else until,
        )
