"""The operator's verbs in bulk, over ``server.bulk``: import (JSON Lines, Parquet), restore an
export's rows, back up the home, sweep orphan rows, check the home whole.

Each imports its ``server.bulk`` module when it is called: a command that moves nothing in bulk
never loads the importer, the backup, or the columnar readers behind them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from server.clock import to_micros
from server.errors import InvalidInput
from server.inputs import DEFAULT_BATCH

if TYPE_CHECKING:
    from server.bulk.backup import BackupReport
    from server.bulk.check import CheckReport
    from server.bulk.export import RestoreImportReport
    from server.bulk.importer import ImportReport
    from server.facade.parts import Parts

MIN_SWEEP_AGE = timedelta(minutes=5)  # past any write's turn and catalog transaction, and clock skew


def sweep_orphans(parts: Parts, older_than: timedelta) -> tuple[int, int]:
    """Purge every partition's rows older than ``older_than`` that no catalog entry names;
    (rows purged, partitions read)."""
    from server.bulk.journal import sweep_every_partition

    if older_than < MIN_SWEEP_AGE:
        raise InvalidInput(
            f"older_than must be at least {MIN_SWEEP_AGE}: a younger row may be a write "
            "still in flight (on any machine, by its own clock)",
            field="older_than",
        )
    return sweep_every_partition(parts.catalog, parts.store, to_micros(parts.clock() - older_than))


def check(parts: Parts, *, repair: bool) -> CheckReport:
    """Whether the home is whole; with ``repair``, mend what can be (``server.bulk.check``)."""
    from server.bulk.check import check_home

    return check_home(parts, repair=repair)


def backup(parts: Parts, path: str | os.PathLike[str]) -> BackupReport:
    """A consistent backup of the home into ``path``, an absolute folder (``server.bulk.backup``)."""
    from server.bulk.backup import backup as back_up
    from server.bulk.backup_manifest import key_for_backup

    if not Path(path).is_absolute():
        raise InvalidInput("a backup's path must be absolute (a folder on the server's machine)", field="path")
    key = key_for_backup(key_file=None, given=parts.backup_key)
    return back_up(parts.catalog, parts.store, Path(path), home=parts.home, key=key, clock=parts.clock)


def import_jsonl(
    parts: Parts,
    stream: BinaryIO,
    *,
    ai: str,
    batch_size: int | None,
    progress: Callable[[int], None] | None,
    create_spaces: bool,
) -> ImportReport:
    """Import JSON Lines from a binary stream (``server.bulk.importer``)."""
    from server.bulk.importer import import_stream
    from server.bulk.rows import read_lines

    return import_stream(
        parts,
        read_lines(stream),
        ai=ai,
        batch_size=DEFAULT_BATCH if batch_size is None else batch_size,
        progress=progress,
        create_spaces=create_spaces,
    )


def import_parquet(
    parts: Parts,
    path: str | os.PathLike[str],
    *,
    ai: str,
    batch_size: int | None,
    progress: Callable[[int], None] | None,
    sized: Callable[[int], None] | None,
    create_spaces: bool,
) -> ImportReport:
    """Import a Parquet file; ``sized(rows)`` is told its row count before the first batch."""
    from server.bulk.importer import check_batch_size, import_records
    from server.bulk.rows import parquet_rows

    batch = check_batch_size(DEFAULT_BATCH if batch_size is None else batch_size)
    total, records = parquet_rows(Path(path), batch_size=batch)
    if sized is not None:
        sized(total)
    return import_records(parts, records, ai=ai, batch_size=batch, progress=progress, create_spaces=create_spaces)


def import_restore(parts: Parts, stream: BinaryIO, *, progress: Callable[[int], None] | None) -> RestoreImportReport:
    """Restore the rows of an ``esfis export`` (``server.bulk.export``)."""
    from server.bulk.export import import_restore as restore_rows

    return restore_rows(
        stream,
        catalog=parts.catalog,
        store=parts.store,
        book=parts.memories,
        embed=parts.embed_documents,
        now=parts.clock(),
        journals=parts.home / "imports",
        progress=progress,
    )
