"""``esfis reindex``: every memory embedded again with the model now configured, into a new
vector store that then takes the old one's place.

A store records the model its vectors were made with (name, dimension, prompts), and refuses to open
with another (``indexing.partitions.store``): a change of prompts alone is reindexed too. To change
models, the texts are read partition by partition from the old store's tables (never all at once),
embedded in batches with the new model and written to ``$ESFIS_HOME/vectors.reindex/``, with their
ids and validity unchanged; the catalog, which holds no vector, is not touched. Then the two folders
are swapped:

    vectors → vectors.replaced,  vectors.reindex → vectors,  vectors.replaced removed

**Resumable.** Each batch is one Lance commit. A reindex killed at any point is run again:
a partition's rows already in the new store are skipped, and an interrupted swap is finished
first (``finish_swap``, which ``open_service`` also runs: a store is never opened half-swapped,
and no copy of the texts is left behind in ``vectors.replaced``).

**Alone.** Every process holds the store's ``in-use.lock`` shared while it has the store open;
a reindex takes it exclusive, without waiting, or refuses: stop the servers first. Once taken,
no process can open the store until the reindex is done. A store on S3 (``ESFIS_VECTORS``) is
not reindexed by this command: its servers on other machines cannot be seen from here.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from indexing import failpoints
from indexing.embedding.embedder import Embedder
from indexing.identity import ModelIdentity, identity_of
from indexing.partitions.store import IN_USE, Layout, Location, VectorStore
from indexing.rows import OPEN_END, RowBatch
from server.errors import InvalidInput, StoreUnavailable

NEXT = "vectors.reindex"
REPLACED = "vectors.replaced"
COLUMNS = ["id", "text", "created_at", "valid_from", "valid_until"]
BATCH = 1024  # texts embedded and written at a time


@dataclass(frozen=True)
class ReindexReport:
    model_before: str
    model_after: str
    partitions: int
    rows: int  # embedded by this run (a resumed run skips what an earlier one wrote)
    seconds: float


def finish_swap(home: Path) -> None:
    """Complete a reindex's swap that was interrupted (a no-op when none was)."""
    current, ready, replaced = home / "vectors", home / NEXT, home / REPLACED
    if not replaced.exists():
        return
    if not current.exists() and ready.exists():
        os.rename(ready, current)
    if current.exists():
        shutil.rmtree(replaced)


def reindex(
    home: Path, embedder: Embedder, *, batch: int = BATCH, progress: Callable[[int], None] | None = None
) -> ReindexReport:
    started = time.monotonic()
    finish_swap(home)
    current, ready = home / "vectors", home / NEXT
    manifest = current / "store.json"
    if not manifest.exists():
        raise InvalidInput(f"there is no vector store in {home} to reindex", field="home")
    wanted = identity_of(embedder)
    recorded = ModelIdentity.from_manifest(json.loads(manifest.read_text()))
    before = recorded.model
    if recorded == wanted:  # the same model fed the same prompts: nothing to do
        shutil.rmtree(ready, ignore_errors=True)  # an earlier run for a model since given up
        return ReindexReport(before, embedder.name, 0, 0, time.monotonic() - started)
    written = 0
    source = Layout(Location.of(current))
    keys = source.partitions()
    with _alone(current):
        half = ready / "store.json"
        if half.exists() and ModelIdentity.from_manifest(json.loads(half.read_text())) != wanted:
            shutil.rmtree(ready)  # half-written for another model or prompts than this run's: start over
        target = VectorStore(ready, model=embedder.name, dimension=embedder.dimension, prompts=embedder.prompts)
        try:
            for key in keys:
                written += _copy(source, key, target=target, embedder=embedder, batch=batch, progress=progress)
        finally:
            target.close()
        os.rename(current, home / REPLACED)
        failpoints.hit("reindex:mid-swap")
        os.rename(ready, current)
        shutil.rmtree(home / REPLACED)
    return ReindexReport(before, embedder.name, len(keys), written, time.monotonic() - started)


def _copy(
    source: Layout,
    key: str,
    *,
    target: VectorStore,
    embedder: Embedder,
    batch: int,
    progress: Callable[[int], None] | None,
) -> int:
    """One partition's rows embedded again into ``target``. What an earlier, interrupted run
    wrote is kept where it still matches the source, row for row; a row the source no longer
    holds (forgotten since) or holds with another validity (closed since) is purged from the
    target first, so the new store never keeps a text the old one no longer has."""
    done = _validity(target.layout, key)
    if done:
        wanted = _validity(source, key)
        stale = [id_ for id_, until in done.items() if wanted.get(id_, ...) != until]
        if stale:
            target.purge(key, stale)
            for id_ in stale:
                del done[id_]
    written = 0
    for chunk in source.batches(key, COLUMNS, batch_size=batch):
        ids = chunk.column("id").to_pylist()
        keep = [i for i, id_ in enumerate(ids) if id_ not in done]
        if not keep:
            continue
        rows = chunk.take(keep)
        texts = rows.column("text").to_pylist()
        target.add(
            key,
            RowBatch(
                ids=rows.column("id").to_pylist(),
                texts=texts,
                vectors=np.asarray(embedder.embed_documents(texts), dtype=np.float32),
                created_at=rows.column("created_at").to_numpy(),
                valid_from=rows.column("valid_from").to_numpy(),
                valid_until=rows.column("valid_until").fill_null(OPEN_END).to_numpy(),
            ),
            compact=False,
        )
        written += len(texts)
        if progress is not None:
            progress(len(texts))
        failpoints.hit("reindex:after-batch")
    target.settle(key)
    return written


def _validity(layout: Layout, key: str) -> dict[str, int | None]:
    """Each row's end of validity, by id (no text read)."""
    found: dict[str, int | None] = {}
    for rows in layout.batches(key, ["id", "valid_until"], batch_size=BATCH):
        found.update(zip(rows.column("id").to_pylist(), rows.column("valid_until").to_pylist()))
    return found


@contextmanager
def _alone(current: Path) -> Iterator[None]:
    with open(current / IN_USE, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreUnavailable(
                "the store is open in another process (a server, esfis mcp, a command): "
                "stop it, then run esfis reindex again"
            ) from None
        yield
