"""Compaction: keeping a partition's files few, and a forget's rows out of every file.

Every write to a Lance table adds a version and a fragment; tiny writes would pile them up
without end. So a partition is compacted on a schedule, every ``COMPACT_EVERY`` writes this
process made to it (``Compaction.due``), merging only the small fragments, and its versions older
than ten minutes are removed (a reader may still be on one of them).

A purge is stricter (``rewrite``): a delete only marks rows, and the text stays in its data file
and in old versions, so every fragment with a deletion is rewritten and every old version
removed at once. A reader that loses its version to it retries under the partition's lock
(``LivePartitions.current``).

The caller holds the partition's write lock for both.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from indexing import failpoints
from indexing.errors import ImageBuildFailed

log = logging.getLogger("esfis.indexing")

COMPACT_EVERY = 64  # writes between routine compactions of a partition
COMPACT_TARGET_ROWS = 65_536  # routine compaction leaves fragments this large alone


class Compaction:
    """The routine compaction's schedule: this process's writes per partition."""

    def __init__(self) -> None:
        self._writes: Counter[str] = Counter()

    def wrote(self, key: str) -> None:
        self._writes[key] += 1

    def due(self, key: str) -> bool:
        """Whether the partition's last write was its ``COMPACT_EVERY``-th since the last
        compaction."""
        return self._writes[key] > 0 and self._writes[key] % COMPACT_EVERY == 0


def compact(dataset: Any) -> None:
    """Compact on a schedule (every ``COMPACT_EVERY`` writes): tiny writes otherwise pile up
    versions and files.

    Only fragments under ``COMPACT_TARGET_ROWS`` are merged, so a compaction costs the recent
    writes, not the whole table (``table.optimize`` rewrote every fragment under 1M rows each
    time: a 1M-row import spent 180 s and 1.2 GB of RSS in it, growing with the table).
    """
    dataset.optimize.compact_files(target_rows_per_fragment=COMPACT_TARGET_ROWS)
    dataset.cleanup_old_versions(older_than=timedelta(minutes=10))


def compact_in_write(key: str, dataset: Any, *, refresh: Callable[[], None]) -> None:
    """A write's routine compaction (``compact``), then ``refresh`` of the image. Upkeep, not the
    write: one that a full or failing disk refuses committed nothing, an image not built leaves
    the old one serving (the rows since scanned exactly), the write they followed is whole, and a
    later one does them."""
    try:
        failpoints.hit("compact:run")
        compact(dataset)
        refresh()
    except (OSError, ImageBuildFailed):
        log.warning("partition %s: compaction or image build put off", key, exc_info=True)


def rewrite(latest: Callable[[], Any]) -> None:
    """After a purge's delete: rewrite every fragment with a deletion, whatever its size, and
    remove every old version, so no file keeps a deleted row. ``latest`` opens the table at its
    latest version (once before the rewrite, once after it)."""
    dataset = latest()
    # Small fragments are merged only up to COMPACT_TARGET_ROWS, so a forget does not rewrite
    # the whole table.
    dataset.optimize.compact_files(materialize_deletions_threshold=0.0, target_rows_per_fragment=COMPACT_TARGET_ROWS)
    latest().cleanup_old_versions(older_than=timedelta(0), delete_unverified=True)
