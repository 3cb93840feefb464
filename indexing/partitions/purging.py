"""A purge: rows deleted so that no file under the store holds them any more.

Forgetting is a promise about files, not about reads: the rows leave whichever of the
partition's files holds them (``files.py``) and every copy of them. A small partition's file is
rewritten without them and renamed over (the rename frees the old one). A table's rows are
purged from its tail first (``tail.purge``); what is left is deleted in the table, every
fragment with a deletion rewritten and every old version removed (``compaction.rewrite``), and
the image, which holds texts too, rebuilt. The partition in memory loses them as well.

The caller (``VectorStore.purge``) holds the partition's write lock.
"""

from __future__ import annotations

from indexing import failpoints
from indexing.partitions import compaction, small_file
from indexing.partitions import tail as tail_file
from indexing.partitions.files import PartitionFiles
from indexing.partitions.image_cache import ImageCache
from indexing.partitions.loading import LivePartitions


def purge(
    key: str,
    ids: list[str],
    *,
    files: PartitionFiles,
    images: ImageCache,
    live: LivePartitions,
    only_if_held: bool = False,
) -> None:
    """Delete ``ids`` from the partition and rewrite it so no file under the store holds them.
    ``only_if_held``: a refused write's undo, whose rows may never have reached the table: the
    table is rewritten only when it holds one of them (a forget always rewrites it: a forget
    retried after a kill finds its rows deleted already, their texts still in the data files).

    The table's predicate names ids only, because LanceDB writes it verbatim into its
    transaction files."""
    if not files.is_table(key):
        if files.layout.small_path(key) is not None:  # on S3 a partition without a table holds nothing
            _purge_small(key, ids, files=files, live=live)
        return
    ids = _purge_tail(key, ids, files=files, live=live)
    table = files.open_table(key) if ids else None
    if table is None:
        return
    quoted = ", ".join(f"'{i}'" for i in ids)
    if only_if_held and not table.count_rows(filter=f"id IN ({quoted})"):
        # A refused write's rows that never reached the table (a full disk cut its tail frame,
        # or its fold): nothing to rewrite, and a rewrite on a full disk would fail anyway.
        return
    table.delete(f"id IN ({quoted})")
    failpoints.hit("purge:after-delete")
    compaction.rewrite(lambda: images.latest(key))  # opens it in the store's session
    # The image holds texts too: rebuilt before the forget returns, every time (a retried
    # forget finds the rows already deleted and still rebuilds it).
    images.refresh(key, force=True)
    failpoints.hit("purge:after-image")
    part = live.held(key)
    if part is not None:
        part.remove(ids)
        if part.base is not None:
            live.drop(key)  # map the rebuilt image on the next search


def _purge_small(key: str, ids: list[str], *, files: PartitionFiles, live: LivePartitions) -> None:
    """A small partition's purge: the file rewritten without the rows (the rename frees the
    old one), and a killed write's temporary file removed."""
    small = files.small_path(key)
    small_file.remove_temp(small)  # a refused write's temporary file may hold its rows, whole or cut
    held = small_file.read(small)
    if held is not None and len(small_file.without(held, ids)) < held.num_rows:
        # A kill before the rename leaves the rows in the old file: rewritten only when it holds
        # them (a refused write's rows never reached it; a full disk has no room for a copy).
        small_file.write(small, small_file.without(held, ids), failpoint="purge:after-delete")
    small_file.remove_temp(small)
    part = live.held(key)
    if part is not None:
        part.remove(ids)


def _purge_tail(key: str, ids: list[str], *, files: PartitionFiles, live: LivePartitions) -> list[str]:
    """A table's purge, first in its tail (``tail.purge``); the ids left for the table."""
    tail = files.layout.tail_path(key)
    if tail is None:
        return ids
    here = tail_file.purge(tail, ids)
    part = live.held(key)
    if here and part is not None:
        part.remove(here)
    purged = set(here)
    return [id_ for id_ in ids if id_ not in purged]
