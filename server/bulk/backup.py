"""Backups you can restore: ``esfis backup DIR`` while servers and agents keep working
(``esfis restore DIR`` into an empty home is ``server.bulk.restore``).

A backup folder holds::

    esfis.db        the catalog, copied by SQLite's online backup API (one read transaction:
                    one moment, whatever the writers do meanwhile)
    vectors/        one Lance table per partition, holding exactly the memories that catalog
                    names as not forgotten: their text and vector, at the validity it records
    manifest.json   written last: the time, the counts and the sha256 of every part, keyed
                    (``server.bulk.backup_manifest``)
    INCOMPLETE      written first, removed after the manifest: the folder is a backup under way
    .esfis-backup   the marker: this folder is a backup's (``server.bulk.backup_folder``)

**The order.** Writes put their vectors down before their catalog rows commit
(``server.memories``), so every memory the catalog copy names is in its partition's table by
the time the table is read after the copy, unless a forget came in between. So: (1) the
catalog is copied; (2) each partition is read at its latest version and its rows filtered to
the ids the copy names as not forgotten (rows of writes in flight, orphans and forgets since
are left out: no text outside the catalog), with the copy's validity (a replace after the copy
closed the row in the table, not in the copy); (3) a memory the copy names but the table no
longer holds was forgotten since: it is marked forgotten in the copy as the live forget did,
so every memory the backup names has its text. A forget purges old versions, so a read
without a lock may lose its files: the partition is then read again holding its lock shared
(no writer on this machine meanwhile), as ``VectorStore.live_partition`` does.

**Killed half way**, a folder has no manifest: restore refuses it and a new backup into it
starts over. A backup writes only into a folder that was absent or empty, or is such a killed
backup's, and one backup at a time (``server.bulk.backup_folder``).

**Forgets.** A backup made before a forget holds the forgotten text. ``restore`` given the live
catalog (``forgets_from``) forgets in the restored home every memory the live one forgot.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from indexing import failpoints
from indexing.partitions.store import VectorStore, table_name
from server.barrier.contexts import ContextBook
from server.bulk.backup_folder import CATALOG, DUMP, INCOMPLETE, MANIFEST, VECTORS, Folder, claimed
from server.bulk.backup_manifest import FORMAT, BackupKey, home_key, sealed
from server.catalog import Catalog
from server.catalog.shared import SCHEMA_VERSION
from server.catalog.sqlite import SqliteCatalog
from server.clock import Clock, from_micros, iso, system_clock, to_micros
from server.errors import StoreUnavailable
from server.memories import MemoryBook
from server.memories.input import digest_of

BATCH = 8192
Progress = Callable[[int], None]


@dataclass(frozen=True)
class BackupReport:
    path: Path
    taken_at: datetime  # the moment of the catalog copy: the backup answers as the store did then
    memories: int
    partitions: int
    forgotten_since: int  # named by the copy, forgotten before their partition was read
    seconds: float
    key: BackupKey  # the manifest's: a restore needs it (or --no-key)

    @property
    def rate(self) -> float:
        return self.memories / self.seconds if self.seconds else 0.0


# -- backup ----------------------------------------------------------------------------------


def backup(
    catalog: Catalog,
    store: VectorStore,
    target: Path,
    *,
    home: Path,
    key: BackupKey | None,
    clock: Clock,
    progress: Progress | None = None,
) -> BackupReport:
    """A consistent copy of a home into ``target`` (absent, empty, or a killed backup's folder)
    while others write, its manifest keyed with ``key`` (None: the home's ``backup.key``, made
    once the target is taken, so a refused backup makes nothing)."""
    with claimed(target, home=home, vectors=store.root) as folder:
        keyed_with = key or home_key(home)
        return _take(catalog, store, folder, keyed_with=keyed_with, clock=clock, progress=progress)


def _take(
    catalog: Catalog,
    store: VectorStore,
    folder: Folder,
    *,
    keyed_with: BackupKey,
    clock: Clock,
    progress: Progress | None,
) -> BackupReport:
    started = time.monotonic()
    target = folder.path
    (target / INCOMPLETE).write_text("a backup under way or killed: not restorable\n")
    taken_at = clock()
    copy: Any
    if isinstance(catalog, SqliteCatalog):
        copy_path = target / CATALOG
        _copy_catalog(catalog.path, copy_path)
        copy = SqliteCatalog(copy_path)
    else:  # PostgreSQL: pg_dump and the reads below share one snapshot
        from server.bulk import backup_postgres

        copy_path = target / DUMP
        copy = backup_postgres.Snapshot(catalog.url)  # type: ignore[attr-defined]
        backup_postgres.dump(catalog.url, copy, copy_path)  # type: ignore[attr-defined]
    failpoints.hit("backup:after-catalog")
    vectors = VectorStore(target / VECTORS, model=store.model, dimension=store.dimension)
    try:
        partitions, forgotten, reread = [], {}, []
        for key in [
            r["partition"]
            for r in copy.all("SELECT DISTINCT partition FROM memories WHERE forgotten_at IS NULL ORDER BY partition")
        ]:
            rows, digest, missing, held = _copy_partition(copy, store, vectors=vectors, key=key, progress=progress)
            reread += [key] if held else []
            forgotten.update(_forgotten_since(catalog, missing))
            if rows:
                partitions.append({"key": key, "table": table_name(key), "rows": rows, "sha256": digest})
            failpoints.hit("backup:after-partition")
        if isinstance(copy, SqliteCatalog):
            forget(copy, vectors, forgotten)  # the copy says what its partitions hold
            MemoryBook(copy, vectors).finish_forgets()  # the copy's forgets under way: their texts are not here
    finally:
        copy.close()
        vectors.close()
    if isinstance(copy, SqliteCatalog):
        _seal_catalog(copy_path)
        described = {"kind": "sqlite", "file": CATALOG, "schema": _schema_of(copy_path)}
        forgotten_in_dump = {}
    else:  # a dump cannot be edited: restore forgets these after loading it
        described = {"kind": "pg_dump", "file": DUMP, "schema": SCHEMA_VERSION, "pg_schema": copy.schema}
        forgotten_in_dump = forgotten
    for leftover in (target / VECTORS).glob("*"):
        if not leftover.name.endswith(".lance") and leftover.name != "store.json":
            _remove(leftover)  # locks and tokens belong to a live home, not to a backup
    memories = sum(p["rows"] for p in partitions)
    manifest = {
        "format": FORMAT,
        "id": folder.id,
        "schema": described["schema"],
        "taken_at": iso(taken_at),
        "taken_at_micros": to_micros(taken_at),
        "model": store.model,
        "dimension": store.dimension,
        "memories": memories,
        "forgotten_since": len(forgotten),
        "reread": reread,
        "catalog": {**described, "bytes": copy_path.stat().st_size, "sha256": file_digest(copy_path)},
        "forget_after_load": forgotten_in_dump,
        "partitions": partitions,
    }
    fsync_tree(target)
    failpoints.hit("backup:before-manifest")
    _write_atomically(target / MANIFEST, json.dumps(sealed(manifest, keyed_with), indent=2) + "\n")
    (target / INCOMPLETE).unlink()
    fsync_dir(target)
    return BackupReport(
        target, taken_at, memories, len(partitions), len(forgotten), time.monotonic() - started, keyed_with
    )


def _copy_catalog(source: Path, destination: Path) -> None:
    """SQLite's online backup in one step: one read transaction, so one moment of the catalog,
    while the writers go on in the WAL."""
    src = sqlite3.connect(str(source), timeout=30.0)
    dst = sqlite3.connect(str(destination))
    try:
        src.execute("PRAGMA busy_timeout=30000")
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def _copy_partition(
    copy: Catalog, store: VectorStore, *, vectors: VectorStore, key: str, progress: Progress | None
) -> tuple[int, str, list[str], bool]:
    """The partition's rows that the copy names as not forgotten, into the backup's table.
    Returns (rows, their digest, the ids the copy names that the table no longer holds, whether
    it was read again under the lock)."""
    for held in (False, True):
        digest = hashlib.sha256()
        seen: set[str] = set()
        try:
            with store.held_still(key) if held else nullcontext():
                rows = vectors.create_from(
                    key,
                    _named_rows(
                        copy, store.stream(key, batch_size=BATCH), key=key, seen=seen, digest=digest, progress=progress
                    ),
                )
            break
        except (OSError, RuntimeError, ValueError):
            # A purge deleted files under the read: read again with writers held off.
            vectors.drop(key)
            if held:
                raise
    wanted = copy.all("SELECT id FROM memories WHERE partition = ? AND forgotten_at IS NULL", (key,))
    missing = [r["id"] for r in wanted if r["id"] not in seen]
    return rows, digest.hexdigest(), missing, held


def _named_rows(
    copy: Catalog, batches: Iterator[pa.RecordBatch], *, key: str, seen: set[str], digest, progress: Progress | None
) -> Iterator[pa.RecordBatch]:
    """Each batch filtered to the rows the copy names (once each), with the copy's times."""
    for batch in batches:
        ids = batch.column("id").to_pylist()
        # By id alone: with "partition = ?" beside it, SQLite reads the whole partition by its
        # digest index for every batch (300k memories over 30 spaces: 36 s against 16 s).
        named = {
            r["id"]: r
            for r in copy.all(
                "SELECT id, partition, created_at, valid_from, valid_until, digest FROM memories WHERE id IN "
                f"(SELECT value FROM {copy.sql.values}) AND forgotten_at IS NULL",
                (json.dumps(ids),),
            )
            if r["partition"] == key
        }
        keep = [i for i, id_ in enumerate(ids) if id_ in named and id_ not in seen]
        if not keep:
            continue
        rows = batch.take(pa.array(keep, type=pa.int64()))
        texts = rows.column("text").to_pylist()
        vectors = rows.column("vector").values.to_numpy(zero_copy_only=False)
        width = len(vectors) // len(keep)
        kept = []
        for n, (i, text) in enumerate(zip(rows.column("id").to_pylist(), texts, strict=True)):
            if named[i]["digest"] != digest_of(text):
                raise StoreUnavailable(
                    f"partition {key}: memory {i} holds another text than its catalog "
                    "entry's digest: the store is damaged"
                )
            seen.add(i)
            kept.append(named[i])
            digest.update(row_digest(i, text, vectors[n * width : (n + 1) * width].tobytes()))
        yield pa.RecordBatch.from_arrays(
            [
                rows.column("id"),
                rows.column("text"),
                rows.column("vector"),
                pa.array([r["created_at"] for r in kept], type=pa.int64()),
                pa.array([r["valid_from"] for r in kept], type=pa.int64()),
                pa.array([r["valid_until"] for r in kept], type=pa.int64()),
            ],
            names=["id", "text", "vector", "created_at", "valid_from", "valid_until"],
        )
        if progress is not None:
            progress(len(kept))
        failpoints.hit("backup:mid-partition")


def _forgotten_since(live: Catalog, missing: list[str]) -> dict[str, int]:
    """Of the ids the copy names that the table no longer holds, each with the time the live
    catalog forgot it (after the copy was taken: its text is not in the backup either)."""
    if not missing:
        return {}
    forgotten = {
        r["id"]: r["forgotten_at"]
        for r in live.all(
            f"SELECT id, forgotten_at FROM memories WHERE id IN (SELECT value FROM {live.sql.values}) "
            "AND forgotten_at IS NOT NULL",
            (json.dumps(missing),),
        )
    }
    lost = [i for i in missing if i not in forgotten]
    if lost:
        raise StoreUnavailable(
            f"{len(lost)} memories the catalog names are in no partition (first: {lost[0]}): "
            "the store is damaged; nothing was backed up"
        )
    return forgotten


def forget(catalog: Catalog, store: VectorStore, forgotten: dict[str, int]) -> int:
    """Forget these memories (id → the live forget's time, microseconds) as a live forget does:
    catalog row cleared, references scrubbed, rows purged. Returns how many were forgotten."""
    book, contexts = MemoryBook(catalog, store), ContextBook(catalog, system_clock)
    done = 0
    for id_, at in forgotten.items():
        memory = book.meta(id_)
        if memory is None or memory.forgotten:
            continue
        book.forget(memory, from_micros(at), also=lambda tx, i=id_: contexts.scrub(tx, i))  # type: ignore[misc]
        done += 1
    return done


def _seal_catalog(path: Path) -> None:
    """The copy as one closed file: no WAL beside it, no free page keeping what it cleared."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("DELETE FROM forgetting")
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("VACUUM")
    finally:
        conn.close()


# -- files -----------------------------------------------------------------------------------


def row_digest(id_: str, text: str, vector: bytes) -> bytes:
    return b"%d:%s\x00%d:%s\x00" % (len(id_), id_.encode(), len(text.encode()), text.encode()) + vector


def _schema_of(path: Path) -> int:
    conn = sqlite3.connect(str(path))
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        return int(row[0]) if row else 0
    finally:
        conn.close()


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.rename(temporary, path)


def fsync_tree(root: Path) -> None:
    """Every file and folder on disk before the manifest says the backup is whole."""
    for folder, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(folder))


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
