"""``esfis restore DIR``: a backup (``server.bulk.backup``) into an empty home, every digest checked.

On a disk the home is built in a folder beside the target (``.NAME.restoring``) and renamed
into place last, in one step: a restore killed half way leaves the target empty, and the next
one starts over. With the live catalog (``forgets_from``), every memory it forgot is forgotten
in the restored home before it is put in place, so a restored machine never brings a forgotten
text back. A backup of a PostgreSQL catalog goes into an empty database and an empty store
(``_restore_postgres``). The backup folder is only read: it may lie on read-only media.

Its manifest is verified with the backup's key first (``server.bulk.backup_manifest``), then
every part against it. **A refused restore leaves nothing behind**: a damaged part is one
``BackupDamaged`` naming it, the staging folder (which holds texts) is removed on every way out
but a kill, and on the PostgreSQL layout the partitions it wrote are dropped again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa

from indexing import failpoints
from indexing.partitions.location import open_dataset
from indexing.partitions.store import VectorStore, table_name
from server.bulk.backup import BATCH, Progress, file_digest, forget, fsync_dir, fsync_tree, row_digest
from server.bulk.backup_folder import CATALOG, DUMP, VECTORS
from server.bulk.backup_manifest import BackupKey, read_manifest
from server.catalog import Catalog
from server.catalog.sqlite import SqliteCatalog
from server.clock import from_micros
from server.errors import BackupDamaged, InvalidInput


@dataclass(frozen=True)
class RestoreReport:
    home: Path
    taken_at: datetime
    memories: int
    partitions: int
    forgets_applied: int
    seconds: float


def restore(
    source: Path,
    home: Path,
    *,
    key: BackupKey | None,
    no_key: bool = False,
    forgets_from: Catalog | None = None,
    catalog_url: str | None = None,
    vectors_uri: str | None = None,
    progress: Progress | None = None,
) -> RestoreReport:
    """Restore the backup in ``source`` into ``home`` (absent or empty), its manifest verified
    with ``key`` (``no_key``: taken on trust) and every digest checked. With ``forgets_from``
    (the live catalog), every memory it forgot is forgotten here too. A backup of a PostgreSQL
    catalog goes into the empty database ``catalog_url`` (and the partitions into
    ``vectors_uri``, an S3 prefix, else the home); a SQLite one, into the home."""
    started = time.monotonic()
    source, home = Path(source), Path(home)
    manifest = read_manifest(source, key=key, no_key=no_key)
    kind = manifest["catalog"].get("kind", "sqlite")
    if (kind == "pg_dump") != (catalog_url is not None):
        raise InvalidInput(
            f"this backup's catalog is {'PostgreSQL' if kind == 'pg_dump' else 'SQLite'}: it "
            f"restores into {'an empty PostgreSQL database (ESFIS_CATALOG)' if kind == 'pg_dump' else 'a home of its own, without ESFIS_CATALOG'}",
            field="ESFIS_CATALOG",
        )
    if kind == "pg_dump":
        return _restore_postgres(
            source,
            home,
            manifest=manifest,
            url=catalog_url,  # type: ignore[arg-type]
            vectors_uri=vectors_uri,
            forgets_from=forgets_from,
            progress=progress,
            started=started,
        )
    if vectors_uri is not None:
        raise InvalidInput(
            "a backup of a SQLite home restores its partitions into the home, without ESFIS_VECTORS",
            field="ESFIS_VECTORS",
        )
    if home.exists() and (not home.is_dir() or any(home.iterdir())):
        raise InvalidInput(f"{home} is not empty: restore goes into an empty ESFIS_HOME", field="home")
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = home.parent / f".{home.name}.restoring"
    shutil.rmtree(staging, ignore_errors=True)  # a killed restore's
    staging.mkdir(mode=0o700)
    try:
        memories, applied = _build(source, staging, manifest=manifest, forgets_from=forgets_from, progress=progress)
        fsync_tree(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # it holds texts: a refused restore leaves none
        raise
    failpoints.hit("restore:before-rename")
    os.rename(staging, home)  # over an empty folder, in one step
    fsync_dir(home.parent)
    return RestoreReport(
        home,
        from_micros(manifest["taken_at_micros"]),
        memories,
        len(manifest["partitions"]),
        applied,
        time.monotonic() - started,
    )


def _build(
    source: Path, staging: Path, *, manifest: dict, forgets_from: Catalog | None, progress: Progress | None
) -> tuple[int, int]:
    """The home, in ``staging``: the catalog, every partition, the forgets. Returns (memories
    not forgotten, forgets applied)."""
    catalog_path = staging / CATALOG
    try:
        shutil.copyfile(source / CATALOG, catalog_path)
    except OSError as exc:
        raise BackupDamaged(
            f"the catalog ({CATALOG}) of the backup in {source} cannot be read ({exc.strerror}): damaged", field="path"
        ) from None
    if file_digest(catalog_path) != manifest["catalog"]["sha256"]:
        raise BackupDamaged(f"the catalog of the backup in {source} does not match its manifest: damaged", field="path")
    failpoints.hit("restore:after-catalog")
    vectors = VectorStore(staging / VECTORS, model=manifest["model"], dimension=int(manifest["dimension"]))
    catalog = SqliteCatalog(catalog_path)
    applied = 0
    try:
        for part in manifest["partitions"]:
            digest = hashlib.sha256()
            rows = vectors.create_from(part["key"], _digested(_backed_up(source, part["key"]), digest, progress))
            if rows != part["rows"] or digest.hexdigest() != part["sha256"]:
                raise _mismatch(source, part["key"])
            vectors.settle(part["key"])  # a large partition's image, built now rather than at first recall
            failpoints.hit("restore:after-partition")
        if forgets_from is not None:
            gone = {
                r["id"]: r["forgotten_at"]
                for r in forgets_from.all("SELECT id, forgotten_at FROM memories WHERE forgotten_at IS NOT NULL")
            }
            named = {r["id"] for r in catalog.all("SELECT id FROM memories WHERE forgotten_at IS NULL")}
            applied = forget(catalog, vectors, {i: at for i, at in gone.items() if i in named})
            failpoints.hit("restore:after-forgets")
        counted = catalog.one("SELECT count(*) AS n FROM memories WHERE forgotten_at IS NULL")
    finally:
        catalog.close()
        vectors.close()
    if applied:
        # SQLite's secure_delete zeroes what a forget deletes, but a B-tree page rebalanced
        # meanwhile can keep an old index cell in its unallocated gap (a forgotten memory's
        # digest prefix was found there once): the restored catalog is rebuilt whole.
        _vacuum(catalog_path)
    return (0 if counted is None else int(counted["n"])), applied


def _vacuum(path: Path) -> None:
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _restore_postgres(
    source: Path,
    home: Path,
    *,
    manifest: dict,
    url: str,
    vectors_uri: str | None,
    forgets_from: Catalog | None,
    progress: Progress | None,
    started: float,
) -> RestoreReport:
    """The dump checked first, then the partitions (without the rows of memories forgotten
    since), then the dump in one transaction, then the forgets marked in the catalog. A damaged
    part drops the partitions written so far; a restore killed half way, though, leaves a target
    to drop and restore again (docs/backup.md): this is not one atomic step as on a disk."""
    from server.bulk import backup_postgres
    from server.catalog.postgres import PostgresCatalog

    backup_postgres.require_empty(url)
    dump = source / DUMP
    try:
        dumped = file_digest(dump)
    except OSError as exc:
        raise BackupDamaged(
            f"the catalog ({DUMP}) of the backup in {source} cannot be read ({exc.strerror}): damaged", field="path"
        ) from None
    if dumped != manifest["catalog"]["sha256"]:
        raise BackupDamaged(f"the catalog of the backup in {source} does not match its manifest: damaged", field="path")
    gone = dict(manifest.get("forget_after_load") or {})
    if forgets_from is not None:
        gone.update(
            {
                r["id"]: r["forgotten_at"]
                for r in forgets_from.all("SELECT id, forgotten_at FROM memories WHERE forgotten_at IS NOT NULL")
            }
        )
    model, dimension = manifest["model"], int(manifest["dimension"])
    vectors = VectorStore(vectors_uri or home / VECTORS, local=home / VECTORS, model=model, dimension=dimension)
    written: list[str] = []
    try:
        if vectors.partitions():
            raise InvalidInput(
                f"the store at {vectors_uri or home / VECTORS} holds partitions: restore goes into an empty one",
                field="ESFIS_VECTORS",
            )
        try:
            for part in manifest["partitions"]:
                digest = hashlib.sha256()
                batches = _digested(_backed_up(source, part["key"]), digest, progress)
                written.append(part["key"])
                vectors.create_from(part["key"], _without(batches, gone))
                if digest.hexdigest() != part["sha256"]:
                    raise _mismatch(source, part["key"])
                vectors.settle(part["key"])
                failpoints.hit("restore:after-partition")
        except BackupDamaged:
            for key in written:  # the store was empty: what is in it now, this restore wrote
                vectors.drop(key)
            raise
        backup_postgres.restore_dump(url, dump)
        failpoints.hit("restore:after-catalog")
        catalog = PostgresCatalog(url)
        try:
            applied = forget(catalog, vectors, gone)
            failpoints.hit("restore:after-forgets")
            memories = catalog.one("SELECT count(*) AS n FROM memories WHERE forgotten_at IS NULL")["n"]
        finally:
            catalog.close()
    finally:
        vectors.close()
    return RestoreReport(
        home,
        from_micros(manifest["taken_at_micros"]),
        int(memories),
        len(manifest["partitions"]),
        applied,
        time.monotonic() - started,
    )


def _mismatch(source: Path, key: str) -> BackupDamaged:
    return BackupDamaged(
        f"partition {key} of the backup in {source} does not match its manifest: damaged", field="path"
    )


def _without(batches: Iterator[pa.RecordBatch], gone: dict[str, int]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        keep = [i for i, id_ in enumerate(batch.column("id").to_pylist()) if id_ not in gone]
        yield batch if len(keep) == batch.num_rows else batch.take(pa.array(keep, type=pa.int64()))


def _digested(batches: Iterator[pa.RecordBatch], digest, progress: Progress | None) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        vectors = batch.column("vector").values.to_numpy(zero_copy_only=False)
        width = len(vectors) // max(batch.num_rows, 1)
        for n, (i, text) in enumerate(
            zip(batch.column("id").to_pylist(), batch.column("text").to_pylist(), strict=True)
        ):
            digest.update(row_digest(i, text, vectors[n * width : (n + 1) * width].tobytes()))
        if progress is not None:
            progress(batch.num_rows)
        yield batch


def _backed_up(source: Path, key: str) -> Iterator[pa.RecordBatch]:
    """A partition of the backup, read in batches, opening nothing for writing; a part that
    cannot be read is ``BackupDamaged`` (Lance says which file, the error says which partition)."""
    try:
        dataset = open_dataset(str(source / VECTORS / f"{table_name(key)}.lance"))
        if dataset is None:
            raise BackupDamaged(f"partition {key} is missing from the backup in {source}: damaged", field="path")
        yield from dataset.to_batches(
            columns=["id", "text", "vector", "created_at", "valid_from", "valid_until"], batch_size=BATCH
        )
    except (OSError, RuntimeError, ValueError) as exc:  # Lance's IO errors: a file missing or cut short
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise BackupDamaged(
            f"partition {key} of the backup in {source} cannot be read ({reason}): damaged", field="path"
        ) from None
