"""A lexical index's vocabulary: term ids, those of a large partition's mapped image (its terms
sorted, found by binary search over the mapped file) and, after them, the terms first seen since.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


class SortedTerms:
    """Terms sorted by code point in one Arrow string array (a large partition's image maps it
    from its file), found by binary search over the raw UTF-8 bytes, whose order is the code
    points'. A million-term vocabulary stays in the page cache, shared by every process, instead
    of becoming a Python dict in each."""

    def __init__(self, array: pa.Array) -> None:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        array = array.cast(pa.large_string())
        self._array = array
        _, offsets, data = array.buffers()
        self._offsets = np.frombuffer(offsets, dtype=np.int64)[array.offset : array.offset + len(array) + 1]
        self._data = memoryview(data) if data is not None else memoryview(b"")

    def __len__(self) -> int:
        return len(self._array)

    def _bytes(self, i: int) -> bytes:
        return bytes(self._data[self._offsets[i] : self._offsets[i + 1]])

    def find(self, term: str) -> int:
        """The term's position, or -1."""
        key, lo, hi = term.encode(), 0, len(self._array)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._bytes(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(self._array) and self._bytes(lo) == key else -1

    def to_list(self) -> list[str]:
        return self._array.to_pylist()


class Vocabulary:
    """Term ids: those of a mapped image (``SortedTerms``, ids in sorted order), then the terms
    first seen since, in a dict of their own."""

    def __init__(self, base: SortedTerms | None = None) -> None:
        self.base = base
        self._base_len = len(base) if base is not None else 0
        self.extra: list[str] = []
        self.extra_id: dict[str, int] = {}

    def __len__(self) -> int:
        return self._base_len + len(self.extra)

    def __contains__(self, term: str) -> bool:
        return self.get(term) is not None

    def get(self, term: str) -> int | None:
        i = self.extra_id.get(term)
        if i is not None:
            return i
        if self.base is not None:
            j = self.base.find(term)
            if j >= 0:
                return j
        return None

    def add(self, term: str) -> int:
        i = self.get(term)
        if i is None:
            i = self.extra_id[term] = len(self)
            self.extra.append(term)
        return i

    def copy(self) -> Vocabulary:
        other = Vocabulary(self.base)
        other.extra, other.extra_id = list(self.extra), dict(self.extra_id)
        return other

    def to_list(self) -> list[str]:
        return (self.base.to_list() if self.base is not None else []) + self.extra

    @classmethod
    def of(cls, terms: list[str]) -> Vocabulary:
        vocabulary = cls()
        vocabulary.extra, vocabulary.extra_id = list(terms), {t: i for i, t in enumerate(terms)}
        return vocabulary
