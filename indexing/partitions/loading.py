"""This process's partitions in memory: each loaded once, kept current by the writes.

A read is served from the partition's ``LivePartition`` (``partition.py``). This process's own
writes edit it in place (the store calls ``after_write``); a write by another process moves the
partition's version (``coordination.py``), and the next read either takes what that write
appended to the tail (``tail.refresh``) or loads the partition whole: from its mapped image when
it is large (``image_cache.py``), else from its table or small file, its tail's rows on top.

A partition let go (another process wrote; a write here failed and was undone) leaves its lexical
index behind, with the ids and texts it was built over: a partition without an image that loads
again with the same rows first (its rows in memory, numbered as before) starts from a copy of it
and indexes only the rows after them. Building it again stemmed every text: on a full disk, each
refused write's reload of a space of long texts took seconds of a core.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from indexing.partitions import image
from indexing.partitions import tail as tail_file
from indexing.partitions.coordination import Coordination, same_table
from indexing.partitions.files import PartitionFiles
from indexing.partitions.image_cache import ImageCache
from indexing.partitions.locks import PartitionLocks, Write
from indexing.partitions.partition import LivePartition
from indexing.partitions.stats import IndexStats
from indexing.relevance.lexical import LexicalIndex


class LivePartitions:
    """The partitions this process holds in memory, by key."""

    def __init__(
        self,
        files: PartitionFiles,
        images: ImageCache,
        *,
        coordination: Coordination,
        locks: PartitionLocks,
        stats: IndexStats,
    ) -> None:
        self.files = files
        self.layout = files.layout
        self.images = images
        self.coordination = coordination
        self.locks = locks
        self.stats = stats
        self._held: dict[str, LivePartition] = {}  # an entry guarded by locks.thread(its key)
        self._left: dict[str, _LeftIndex] = {}  # the lexical index of a partition let go, by key

    def current(self, key: str) -> LivePartition:
        """The partition in memory, brought up to date if another process wrote since.

        The load takes no lock: a purge in another process may then delete the files of the
        version it opened (a reload happens right after another process wrote, so that is
        just when the next purge may run). A failed load is tried once more holding the
        partition's lock shared: the write under way finishes first, and none starts until
        the load is done. A second failure is a real one and is raised. Readers take the lock
        only then, so a stream of loads never keeps a writer waiting.
        """
        with self.locks.thread(key):
            token = self.coordination.version(key)
            part = self._held.get(key)
            if part is not None and (part.token == token or self._refreshed(key, part, token)):
                return part
            self._let_go(key)  # stale: its lexical index may start the new one
            try:
                part = self._load(key, token)
            except Exception:
                # Under the shared lock, no image is built: a build takes the lock exclusive,
                # which this thread could never have while it holds it shared (a failed build,
                # on a full disk say, once hung the reader here for good). A missing image is
                # then served from the table's rows in memory, exactly.
                with self.locks.reading(key):
                    part = self._load(key, self.coordination.version(key), build=False)
            self._reuse_lexicon(key, part)
            self._held[key] = part
            return part

    def held(self, key: str) -> LivePartition | None:
        """The partition if this process holds it (a write edits it in place), else None."""
        return self._held.get(key)

    def drop(self, key: str) -> None:
        """Let the partition go: the next read loads it again."""
        self._let_go(key)

    def forgotten(self, key: str) -> None:
        """Rows of the partition were forgotten: an index left behind may hold their texts."""
        self._left.pop(key, None)

    def removed(self, key: str) -> None:
        """The partition is gone from disk: nothing of it stays, its texts' index included."""
        self._held.pop(key, None)
        self._left.pop(key, None)

    def after_write(self, key: str, write: Write) -> None:
        """Still under the write lock: a partition held at the version the write started from
        already holds the change (the writer edited it) and takes the new version; one held at
        another version missed someone else's write and is loaded again by the next read."""
        part = self._held.get(key)
        if part is None:
            return
        if part.token == write.before:
            part.token = write.after
        else:
            self._let_go(key)

    def _let_go(self, key: str) -> None:
        part = self._held.pop(key, None)
        if part is not None and part.base is None and part.lexical is not None:
            self._left[key] = _LeftIndex(part.ids[: part.rows], part.texts[: part.rows], part.lexical)

    def _reuse_lexicon(self, key: str, part: LivePartition) -> None:
        """A copy of the lexical index the partition had when let go, when it loads again with
        the same rows first; only the rows after them are indexed (the module says why)."""
        left = self._left.pop(key, None)
        if left is None or part.base is not None or part.lexical is not None:
            return
        n = len(left.ids)
        if n > part.rows or part.ids[:n] != left.ids or part.texts[:n] != left.texts:
            return
        index = left.lexical.copy()  # a search still on the old partition may read the old one
        if part.rows > n:
            index.append(n, part.texts[n : part.rows])
        part.lexical = index

    def _refreshed(self, key: str, part: LivePartition, token: str) -> bool:
        """Whether the partition held is brought up to ``token`` by its tail alone: every write
        since only appended to the tail (``same_table``, ``tail.refresh``)."""
        tail = self.layout.tail_path(key)
        if tail is None or not same_table(part.token, token):
            return False
        if not tail_file.refresh(tail, part, lambda: self.coordination.version(key) == token):
            return False
        part.token = token
        self.stats.refreshed[key] += 1
        return True

    def _load(self, key: str, token: str, *, build: bool = True) -> LivePartition:
        # Never written: on a disk, one stat says so; remotely that is a listing, and a
        # partition without a version was never written (or holds only a dead write's rows).
        if (not token) if self.layout.location.remote else not self.files.has_table(key):
            return self._load_small(key, token)
        tail = self.layout.tail_path(key)
        newest, tail_id = (None, None) if tail is None else tail_file.seen(tail)  # read before the table
        part = self._load_table(key, token, build=build)
        if newest is not None:
            kept = [not part.holds(id_) for id_ in newest.column("id").to_pylist()]
            part.append_arrow(newest.filter(pa.array(kept, type=pa.bool_())))
        part.tail_id = tail_id
        return part

    def _load_table(self, key: str, token: str, *, build: bool = True) -> LivePartition:
        dimension = self.files.dimension
        mapped = self.images.current(key)
        if mapped is None:
            table = self.files.open_table(key)
            self.stats.loaded[key] += 1
            if table is None:  # a promotion under way: the small file still holds every row
                return self._load_small(key, token)
            arrow = table.to_table()
            if not build or not self.images.large(arrow.num_rows):
                return LivePartition.from_arrow(arrow, dimension, token)
            del arrow
            mapped = self.images.build_missing(key)
        self.stats.opened[key] += 1
        self.stats.loaded[key] += 1
        gone, since = image.changes(mapped, self.images.latest(key))
        if build and self.images.rebuild_if_purged(key, mapped=mapped, gone=gone, since=since):
            del mapped
            return self._load_table(key, token)
        return LivePartition.over(mapped, gone=gone, since=since, dimension=dimension, token=token)

    def _load_small(self, key: str, token: str) -> LivePartition:
        """A small partition (every row in memory), or an empty one if never written."""
        self.stats.opened[key] += 1
        self.stats.loaded[key] += 1
        held = self.files.small(key)
        if held is None:
            return LivePartition(dimension=self.files.dimension, token=token)
        return LivePartition.from_arrow(held, self.files.dimension, token)


@dataclass(frozen=True)
class _LeftIndex:
    """A let-go partition's lexical index and the rows it was built over, in their numbering."""

    ids: list[str]
    texts: list[str | None]
    lexical: LexicalIndex
