"""A partition's files in a store, and the append that picks which of them takes a write.

A partition is born a small file (``small_file.py``: every row in one Arrow file, on a local
disk), becomes a LanceDB table in the write that outgrows the file, and a table takes small
writes into its tail (``tail.py``) until the tail folds into it. ``PartitionFiles`` knows which
of these holds a partition now and writes to the right one; it settles what a kill cut short
(a promotion, a fold) before anything else reads or writes them.

The writes here run under the partition's write lock (``VectorStore._writing``); the reads
(``dataset``, ``small``) need none.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from indexing import durable, failpoints
from indexing.partitions import small_file
from indexing.partitions import tail as tail_file
from indexing.partitions.layout import Layout, schema, table_name
from indexing.partitions.location import open_dataset
from indexing.partitions.stats import IndexStats


@dataclass(frozen=True)
class Appended:
    """What an append wrote: ``table``, the LanceDB table when it wrote one (a promotion, a
    fold, a large batch), else None; ``tail_only``: it only added to a table's tail."""

    table: Any
    tail_only: bool


class PartitionFiles:
    """The small file, table and tail of each partition under one store's root."""

    def __init__(self, layout: Layout, *, dimension: int, session: Callable[[], Any], stats: IndexStats) -> None:
        """``session``: the store's Lance session (made on first use); ``stats``: the store's
        counts, of which the files keep ``opened`` and ``appended``."""
        self.layout = layout
        self.location = layout.location
        self.dimension = dimension
        self.session = session
        self.stats = stats
        self._tables: set[str] = set()  # partitions known to be tables (a remote existence check is a listing)
        # Partitions written now and found small: nobody else changes a partition's form while
        # its write lock is held, so a write asks the disk once (``write_ended`` forgets it).
        self._small_in_write: set[str] = set()

    # -- reads ------------------------------------------------------------------------------

    def has_table(self, key: str) -> bool:
        """Whether the partition has a LanceDB table (one stat on a disk, a listing remotely)."""
        return self.location.table_exists(table_name(key))

    def dataset(self, key: str) -> Any:
        """The partition's Lance dataset at its latest version, or None if it has no table."""
        if not self.location.remote and not self.has_table(key):
            return None  # one stat, not Lance's listing
        return open_dataset(self.layout.uri(key), session=self.session())

    def open_table(self, key: str) -> Any:
        """``dataset``, counted as an opening of the partition (``stats.opened``)."""
        self.stats.opened[key] += 1
        return self.dataset(key)

    def small(self, key: str) -> pa.Table | None:
        """A small partition's rows (``small_file.py``), or None if it has no file."""
        small = self.layout.small_path(key)
        return None if small is None else small_file.read(small)

    def small_path(self, key: str) -> Path:
        """The small file's path; only a local store has small partitions."""
        small = self.layout.small_path(key)
        assert small is not None, "a remote store has no small partitions"
        return small

    # -- under the write lock ---------------------------------------------------------------

    def is_table(self, key: str) -> bool:
        """Whether the partition is a LanceDB table (not its small file), settling a promotion
        that a kill cut short (``small_file.py``)."""
        if key in self._tables:
            return True
        if key in self._small_in_write:
            return False
        small = self.layout.small_path(key)
        if small is None:
            found = self.layout.exists(key)
            if found:
                self._tables.add(key)  # on S3, one listing per partition, not one per write
            return found
        if not self.has_table(key):
            self._small_in_write.add(key)
            return False
        if small.exists() or small_file.temp_of(small).exists():
            if open_dataset(self.layout.uri(key), session=self.session()) is None:
                self.location.remove_table(table_name(key))  # killed before its commit: the file holds all
                self._small_in_write.add(key)
                return False
            small_file.remove(small)  # killed after its commit: the table holds every row
        self._tables.add(key)
        return True

    def write_ended(self, key: str) -> None:
        """The partition's write lock is about to be let go: its form may change from now."""
        self._small_in_write.discard(key)

    def created(self, key: str) -> None:
        """The partition's table was just made (a restore's ``create_from``)."""
        self._tables.add(key)

    def dropped(self, key: str) -> None:
        """The partition's table was just removed."""
        self._tables.discard(key)

    def append(self, key: str, table: pa.Table) -> Appended:
        """Append rows: to the small file while the rows fit, else to the table, which the write
        that outgrows the file creates with every row."""
        self.stats.opened[key] += 1
        self.stats.appended[key] += 1
        small = self.layout.small_path(key)
        is_table = self.is_table(key)  # once: nobody else changes the form while the lock is held
        if small is not None and not is_table:
            rows = small_file.joined(small_file.read(small), table)
            data = small_file.encoded(rows)
            if data is not None:
                small_file.write(small, data)
                return Appended(table=None, tail_only=False)
            written = self.write_table(key, rows, mode="create")
            failpoints.hit("promote:after-table")
            small_file.remove(small)  # a kill or a failure before this: the next writer removes it
            self._tables.add(key)  # only now: until then ``is_table`` looks, and settles the file
            return Appended(table=written, tail_only=False)
        if is_table:
            return self._append_to_table(key, table)
        written = self.write_table(key, table, mode="create")
        self._tables.add(key)
        return Appended(table=written, tail_only=False)

    def _append_to_table(self, key: str, table: pa.Table) -> Appended:
        """Rows for a table: into its tail while it has room, else folded in with the tail's
        (``tail.py``); a batch too large for a tail goes straight in."""
        tail = self.layout.tail_path(key)
        if tail is None or table.num_rows > tail_file.TAIL_ROWS:
            return Appended(table=self.write_table(key, table, mode="append"), tail_only=False)
        folded = tail_file.append(tail, table, lambda rows, fold: self.write_table(key, rows, mode="append", fold=fold))
        return Appended(table=folded, tail_only=folded is None)

    def settle_fold(self, key: str) -> None:
        """Before anything else in a write: a fold a kill cut short (``tail.py``). Only a table
        has a tail: a small partition's write (an import's thin spaces) reads no file here."""
        tail = self.layout.tail_path(key)
        if tail is not None and self.is_table(key):
            tail_file.settle(tail, lambda: self.dataset(key))

    def write_table(self, key: str, table: pa.Table, *, mode: str, fold: str | None = None) -> Any:
        """Write rows into the partition's table (``mode``: ``create`` or ``append``); a fold's
        commit carries the tail's id (``tail.FOLD_ID``), which ``tail.settle`` looks for. On a
        local disk, what the commit wrote is fsynced before this returns (``durable.sync_tree``)."""
        import lance

        table_schema = schema(self.dimension, secrets.token_hex(8) if mode == "create" else None)
        since = time.time_ns() - durable.CLOCK_SLACK_NS
        failpoints.hit("lance:commit")
        written = lance.write_dataset(
            table.replace_schema_metadata(table_schema.metadata),
            self.layout.uri(key),
            schema=table_schema,
            mode=mode,
            session=self.session(),
            transaction_properties={tail_file.FOLD_ID: fold} if fold else None,
        )
        if not self.location.remote:  # an object store's put is durable when it answers
            failpoints.hit("lance:sync")
            durable.sync_tree(Path(self.layout.uri(key)), since)
        return written
