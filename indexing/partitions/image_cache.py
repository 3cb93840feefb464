"""This machine's mapped images of a store's large partitions: when each is built, rebuilt,
put off and removed.

A partition of ``ANN_THRESHOLD`` rows or more is served from its image (``image.py``) plus the rows
written since; a smaller one from its table alone. An image is built when data is written: at the
end of an import (``VectorStore.settle``), when the rows written since the last build pile up (at a
routine compaction), and after every forget, since the image holds texts too; and on the first read
of a large partition that has none (a store from before images, or a build that was killed).

On a shared store (tables in S3) each machine keeps its own images, and another machine's writes
reach them only through the table: an image of a table that was dropped, or dropped and made
again, is removed and never served, and one that still holds rows another machine forgot is
rebuilt before anything is served from it. A build of a large partition takes long, so during a
write it waits until the turn among machines is given back (``deferring``).

Every build and removal runs under the partition's write lock on this machine
(``PartitionLocks.exclusive``, or the write's own).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa

from indexing.partitions import image, image_build
from indexing.partitions.layout import Layout
from indexing.partitions.location import open_dataset
from indexing.partitions.locks import PartitionLocks
from indexing.relevance.ann import ANN_THRESHOLD


class ImageCache:
    """The images of one store's partitions on this machine.

    ``session``: the store's Lance session, every dataset opens in it; ``built``: counts the
    builds per partition (the store's ``stats.built``)."""

    def __init__(
        self,
        layout: Layout,
        locks: PartitionLocks,
        *,
        dimension: int,
        session: Callable[[], Any],
        built: Counter[str],
    ) -> None:
        self.layout = layout
        self.locks = locks
        self.dimension = dimension
        self.session = session
        self.built = built
        self._deferred: dict[str, bool] = {}  # builds put off until the turn is free: key → force

    @staticmethod
    def large(rows: int) -> bool:
        """Whether a partition of ``rows`` rows is served from an image."""
        return rows >= ANN_THRESHOLD

    def current(self, key: str) -> image.Image | None:
        """The partition's image on this machine, if it is one of the table as it is now: on a
        shared store, an image of another table (dropped by another machine, perhaps made
        again) is this machine's stale copy, removed here."""
        mapped = image.open_image(self.layout.image_folder(key))
        if mapped is not None and self.layout.location.remote:
            dataset = open_dataset(self.layout.uri(key), session=self.session())
            if dataset is None or image.table_id(dataset) != mapped.table_id:
                with self.locks.exclusive(key):
                    image.remove(self.layout.image_folder(key))
                return None
        return mapped

    def build_missing(self, key: str) -> image.Image:
        """Build a large partition's image that is missing, once, under the write lock (it
        persists), and map it."""
        with self.locks.exclusive(key):
            self.build(key, previous=None)
            mapped = image.open_image(self.layout.image_folder(key))
        if mapped is None:
            raise RuntimeError(f"the image of partition {key} could not be built")
        return mapped

    def rebuild_if_purged(self, key: str, *, mapped: image.Image, gone: np.ndarray, since: pa.Table) -> bool:
        """On a shared store, rebuild an image that holds rows another machine forgot (a forget
        rebuilds only its own machine's image); whether it was rebuilt, and must be mapped again."""
        if not (self.layout.location.remote and _holds_purged(mapped, gone, since)):
            return False
        with self.locks.exclusive(key):
            self.build(key, previous=mapped)
        return True

    def latest(self, key: str) -> Any:
        """The partition's Lance dataset at its latest version (its table exists)."""
        import lance

        return lance.dataset(self.layout.uri(key), session=self.session())

    def build(self, key: str, previous: image.Image | None) -> None:
        """Build and publish the partition's image (the caller holds the write lock), or remove
        it when the partition shrank below the threshold."""
        folder = self.layout.image_folder(key)
        dataset = self.latest(key)
        if not self.large(dataset.count_rows()):
            image.remove(folder)
            return
        reuse = previous is not None
        del dataset, previous  # the child maps the previous image itself
        image_build.build_in_child(
            folder, self.layout.uri(key), self.dimension, reuse=reuse, lock_fd=self.locks.fd(key)
        )
        self.built[key] += 1

    def refresh(self, key: str, *, force: bool) -> None:
        """(Re)build the image when the partition is past the threshold and the rows written
        since the last build are many; with ``force`` (a forget), whenever an image exists.

        On a shared store a build waits until the write has given the turn among machines back
        (still under this machine's lock, before the write returns), so no other machine's
        writer waits for it."""
        if self.locks.in_turn(key) and self.layout.location.remote:
            self._deferred[key] = force or self._deferred.get(key, False)
            return
        folder = self.layout.image_folder(key)
        current = image.open_image(folder)
        if current is None:
            if force:
                image.remove(folder)  # a half-built or other-format image holds texts too
                return
            if self.large(self.latest(key).count_rows()):
                self.build(key, previous=None)
            return
        if not force and image.rows_since(current, self.latest(key)) <= max(ANN_THRESHOLD // 5, current.rows // 10):
            return
        self.build(key, previous=current)

    @contextmanager
    def deferring(self, key: str) -> Iterator[None]:
        """The span of one write, inside its write lock: a build put off in it and not run by
        ``build_deferred`` (the write failed) is dropped at its end."""
        try:
            yield
        finally:
            self._deferred.pop(key, None)

    def build_deferred(self, key: str) -> bool:
        """Run the build put off during the write that just gave its turn back; whether it ran
        (the in-memory partition then maps the new image)."""
        force = self._deferred.pop(key, None)
        if force is None:
            return False
        self.refresh(key, force=force)
        return True

    def remove(self, key: str) -> None:
        """Remove the partition's image (the caller holds its write lock)."""
        image.remove(self.layout.image_folder(key))

    def remove_stale(self) -> list[str]:
        """Remove the images of tables that no longer exist (dropped by another machine of a
        shared store); the partitions whose image went."""
        tables = set(self.layout.partitions())
        removed = []
        for key, folder in self.layout.images():
            if key not in tables:
                with self.locks.exclusive(key):
                    image.remove(folder)
                removed.append(key)
        return removed


def _holds_purged(mapped: image.Image, gone: np.ndarray, since: pa.Table) -> bool:
    """Whether the image holds rows the table no longer has at all: gone, and not written again
    since (a compaction or a closed validity rewrites a row; a purge deletes it)."""
    if not gone.any():
        return False
    if not since.num_rows:
        return True
    rewritten = np.array([i.encode() for i in since.column("id").to_pylist()])
    return not np.isin(mapped.ids[gone], rewritten).all()
