"""The edge where a service is built from settings: ``open_service`` for every interface, and the
commands that open a home without the model (reindex, backup, restore, export).

Settings are read once, by the interface (``Settings.from_env()`` in the CLI, the server, the MCP
process), and handed in: nothing below here reads the environment.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from indexing import failpoints
from indexing.embedding.batching import BatchingEmbedder
from indexing.embedding.embedder import Embedder, load_embedder
from indexing.errors import IndexingError
from indexing.partitions.store import VectorStore
from server.catalog import Catalog, open_catalog, open_coordination
from server.clock import Clock, system_clock
from server.errors import InvalidInput, StoreUnavailable
from server.facade.parts import Parts
from server.facade.service import Esfis, close_all
from server.home import make_private
from server.settings import Settings, torch_defaults

if TYPE_CHECKING:
    from server.bulk.backup import BackupReport
    from server.bulk.check import CheckReport
    from server.bulk.export import ExportReport
    from server.bulk.reindex import ReindexReport
    from server.bulk.restore import RestoreReport


def reindex_store(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    batch: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> ReindexReport:
    """Embed every memory again with the configured model (``server.bulk.reindex``): the one door
    that opens the store without the model it was built with."""
    from server.bulk.importer import check_batch_size
    from server.bulk.reindex import BATCH, reindex

    if batch is not None:
        check_batch_size(batch)  # as an import's

    if settings.vectors is not None:
        raise InvalidInput(
            "esfis reindex works on a store in ESFIS_HOME; a store on S3 (ESFIS_VECTORS) "
            "has servers on other machines this command cannot see",
            field="ESFIS_VECTORS",
        )
    failpoints.arm(settings.failpoints)
    make_private(settings.home)
    try:
        embedder = embedder or load_embedder(
            settings.model,
            backend=settings.embedder,
            device=settings.device,
            cache=settings.cache,
            query_precision=settings.query_precision,
            before_torch=torch_defaults,
        )
        return reindex(settings.home, embedder, batch=batch or BATCH, progress=progress)
    except IndexingError as exc:  # the model, or a store the reindex cannot open
        raise StoreUnavailable(str(exc)) from exc


def backup_home(
    target: str | os.PathLike[str],
    settings: Settings,
    *,
    key_file: str | os.PathLike[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> BackupReport:
    """``esfis backup``: a consistent copy of the home (``server.bulk.backup``), opened without the
    model (the store says which one its vectors were made with). Its manifest is keyed with
    ``key_file``'s key, else ``ESFIS_BACKUP_KEY``, else the home's ``backup.key``."""
    from server.bulk.backup import backup
    from server.bulk.backup_manifest import key_for_backup

    failpoints.arm(settings.failpoints)
    catalog, store = _open_without_model(settings)
    try:
        key = key_for_backup(key_file=key_file, given=settings.backup_key)
        return backup(
            catalog, store, Path(target).absolute(), home=settings.home, key=key, clock=system_clock, progress=progress
        )
    finally:
        close_all(catalog, store.coordination, store)


def restore_home(
    source: str | os.PathLike[str],
    settings: Settings,
    *,
    forgets_from: str | None = None,
    key_file: str | os.PathLike[str] | None = None,
    no_key: bool = False,
    progress: Callable[[int], None] | None = None,
) -> RestoreReport:
    """``esfis restore``: a backup into this (empty) home. ``forgets_from`` names the live home
    (a folder, or its catalog's postgresql:// URL) whose forgets are applied after. The
    manifest is verified with ``key_file``'s key, else ``ESFIS_BACKUP_KEY``, else the
    ``backup.key`` of the ``forgets_from`` home; ``no_key`` takes the folder on trust."""
    from server.bulk.backup_manifest import key_for_restore
    from server.bulk.restore import restore

    if no_key and key_file is not None:
        raise InvalidInput(
            "--no-key restores without checking a key: give --key-file or --no-key, not both", field="no_key"
        )
    failpoints.arm(settings.failpoints)
    make_private(settings.home)  # the umask too: every file restored is its owner's only
    source_home = None  # the live home, when --forgets-from names a folder
    if forgets_from is not None and not re.match(r"postgres(ql)?://", forgets_from):
        source_home = Path(forgets_from).expanduser()
        if not (source_home / "esfis.db").is_file():
            raise InvalidInput(
                f"--forgets-from {forgets_from}: no catalog there (a home folder or a postgresql:// URL)",
                field="forgets_from",
            )
    key = None if no_key else key_for_restore(key_file=key_file, given=settings.backup_key, source_home=source_home)
    live = None
    if forgets_from is not None:
        live = open_catalog(
            Settings(home=source_home, model=None)
            if source_home is not None
            else Settings(home=settings.home, model=None, catalog=forgets_from)
        )
    try:
        return restore(
            Path(source).absolute(),
            settings.home.absolute(),
            key=key,
            no_key=no_key,
            forgets_from=live,
            catalog_url=settings.catalog,
            vectors_uri=settings.vectors,
            progress=progress,
        )
    finally:
        close_all(live)


def export_home(
    out,
    settings: Settings,
    *,
    spaces: list[str] | None = None,
    vectors: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ExportReport:
    """``esfis export``: every current memory as JSON Lines into ``out`` (``server.bulk.export``)."""
    from server.bulk.export import export

    catalog, store = _open_without_model(settings)
    try:
        return export(catalog, store, out, now=system_clock(), spaces=spaces, vectors=vectors, progress=progress)
    finally:
        close_all(catalog, store.coordination, store)


def open_and_check(settings: Settings, *, repair: bool = False) -> CheckReport:
    """``esfis check``: whether the home is whole, with ``repair`` mended where it can be
    (``server.bulk.check``). Opened without the model (a check embeds nothing, and a home whose
    model is gone is checked all the same) and without the recovery every service runs at open,
    so a check without ``repair`` changes nothing, and sees what dead processes left."""
    from server.bulk.check import HomeParts, check_home

    failpoints.arm(settings.failpoints)
    catalog, store = _open_without_model(settings)
    try:
        parts = HomeParts.over(home=settings.home, catalog=catalog, store=store, clock=system_clock)
        return check_home(parts, repair=repair)
    finally:
        close_all(catalog, store.coordination, store)


def _open_without_model(settings: Settings) -> tuple[Catalog, VectorStore]:
    """The catalog and the store for a command that reads vectors but never embeds."""
    from indexing.partitions.location import Location, read_manifest

    make_private(settings.home)
    catalog = open_catalog(settings)
    try:
        if settings.vectors is not None:
            recorded = read_manifest(Location.of(settings.vectors, settings.vectors_path))
        else:
            path = settings.vectors_path / "store.json"
            recorded = json.loads(path.read_text()) if path.is_file() else None
        if recorded is None:
            raise InvalidInput(f"there is no vector store in {settings.vectors or settings.vectors_path}", field="home")
        store = VectorStore(
            settings.vectors or settings.vectors_path,
            local=settings.vectors_path,
            model=recorded["model"],
            dimension=int(recorded["dimension"]),
            coordination=open_coordination(settings),
        )
    except IndexingError as exc:  # a reindex under way, say
        catalog.close()
        raise StoreUnavailable(str(exc)) from exc
    except BaseException:
        catalog.close()
        raise
    return catalog, store


_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\x00]*)?$")


def _open_store(settings: Settings, embedder: Embedder, coordination) -> VectorStore:
    if settings.vectors is not None and not _S3_URI.match(settings.vectors):
        raise StoreUnavailable(
            f"ESFIS_VECTORS must be s3://bucket/prefix (unset: the partitions in ESFIS_HOME), "
            f"not {settings.vectors[:200]!r}"
        )
    where = settings.vectors or settings.vectors_path
    if settings.vectors is None:
        from server.bulk.reindex import finish_swap

        finish_swap(settings.home)  # a reindex killed while swapping stores: finished, never opened half-way
    try:
        return VectorStore(
            where,
            local=settings.vectors_path,
            model=embedder.name,
            dimension=embedder.dimension,
            prompts=embedder.prompts,
            coordination=coordination,
        )
    except (OSError, RuntimeError, ValueError) as exc:  # an object store that cannot be reached (Lance's IO errors)
        if settings.vectors is None:
            raise
        raise StoreUnavailable(f"cannot open the vector store at {settings.vectors} (ESFIS_VECTORS): {exc}") from exc


def open_service(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    clock: Clock = system_clock,
    batching: bool = False,
) -> Esfis:
    """The one place a service is built: catalog, vector store, embedder, clock. ``batching``
    (a server's): concurrent requests' texts are embedded together (``settings.batch_window_ms``)."""
    failpoints.arm(settings.failpoints)
    make_private(settings.home)  # before the store writes a file there
    catalog = open_catalog(settings)  # first: an unreachable catalog is said before a model loads
    coordination = None
    try:
        coordination = open_coordination(settings)
        embedder = embedder or load_embedder(
            settings.model,
            backend=settings.embedder,
            device=settings.device,
            cache=settings.cache,
            query_precision=settings.query_precision,
            before_torch=torch_defaults,
        )
        if batching and settings.batch_window_ms > 0:
            embedder = BatchingEmbedder(embedder, window=settings.batch_window_ms / 1000)
        store = _open_store(settings, embedder, coordination)
    except IndexingError as exc:
        close_all(catalog, coordination)
        raise StoreUnavailable(str(exc)) from exc
    except BaseException:
        close_all(catalog, coordination)
        raise
    service = Esfis(
        Parts.over(
            catalog=catalog,
            store=store,
            embedder=embedder,
            clock=clock,
            home=settings.home,
            trail_days=settings.trail_days,
            approval_hours=settings.approval_hours,
            oauth_token_s=settings.oauth_token_s,
            backup_key=settings.backup_key,
            disk_reserve_mb=settings.disk_reserve_mb,
        )
    )
    service.recover()
    return service
