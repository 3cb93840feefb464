"""``esfis check``'s look at a home: what is wrong with it, read without changing anything.

Every partition is read whole, its files as the store sees them (``Layout.batches``: a table
with its tail and folding file, or a small file), while it is held still (``held_still``: no
write of this machine, nor on a shared store of any other, until the read ends; a write to that
partition waits that long). What the catalog says of the partition is read before and after:

- **lost**: memories the catalog holds (not forgotten) that no partition file holds. Read
  *before* the partition: a write puts its vectors down before its catalog rows commit, so a
  memory the catalog named then has its row by the time the partition is read. A memory
  forgotten meanwhile (its row purged after the catalog was read) is dropped by a second read
  of the catalog.
- **orphans**: rows no catalog entry names, asked again *after* the partition (a write that
  committed meanwhile is named by then). Rows written less than ``older_than`` ago are left
  alone and counted as ``in_flight``: a write in flight, on any machine, by its own clock, as
  ``esfis sweep`` leaves them.
- **forgotten**: rows of forgotten memories. A forget under way (its intent in the catalog)
  is left out; a candidate is looked for once more, since a forget that finished after the
  read purged it.

Besides the rows: what a killed write left beside them (temporary files, an unsettled fold, a
tail whose last frame is cut short, a promotion cut short), the partition's image (one that
cannot be opened, or that holds rows the partition no longer does), journals of dead processes,
forgets a dead process left, images of partitions that are gone, and the catalog's counts
(``partitions.live``, ``partitions.superseded`` and ``totals.live``) against its own rows,
each compared in one statement. A partition that cannot be read is said, never guessed at.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from indexing.errors import IndexingError, PartitionCorrupt
from indexing.partitions import image, small_file
from indexing.partitions import tail as tail_file
from indexing.partitions.store import Layout, VectorStore, table_name
from server.bulk.check_data import misindexed
from server.bulk.journal import dead_journals
from server.catalog import Catalog
from server.memories.forgetting import STALE_FORGET
from server.memories.journal import JOURNALS

# What reading a partition's files may raise: a tail the disk changed (``PartitionCorrupt``), an
# Arrow file that is not one, Lance's errors on a table it cannot read.
READ_ERRORS = (IndexingError, OSError, RuntimeError, ValueError, pa.ArrowException)
TOTALS = "totals"  # the key a drift of ``totals.live`` is reported under
_BATCH = 65_536


@dataclass(frozen=True)
class PartitionDamage:
    """What is wrong with one partition (ids only, never a text)."""

    key: str
    lost: tuple[str, ...] = ()  # not forgotten in the catalog, in no partition file
    orphans: tuple[str, ...] = ()  # in a partition file, named by no catalog entry
    forgotten: tuple[str, ...] = ()  # forgotten in the catalog, still in a partition file
    leftovers: tuple[str, ...] = ()  # what a killed write left, each said in words
    image_broken: str | None = None  # why the image cannot be opened
    image_gone: tuple[str, ...] = ()  # rows the image holds that the partition no longer does
    unreadable: str | None = None  # why the partition's files cannot be read
    in_flight: int = 0  # rows named by no catalog entry, younger than the age bound

    @property
    def damaged(self) -> bool:
        return bool(
            self.lost
            or self.orphans
            or self.forgotten
            or self.leftovers
            or self.image_broken
            or self.image_gone
            or self.unreadable
        )


@dataclass(frozen=True)
class CountDrift:
    """A count the catalog keeps that its own rows do not give: a partition's live and
    superseded memories (``partitions``), or the total of all (``TOTALS``, superseded 0)."""

    key: str
    kept: int
    counted: int
    kept_superseded: int = 0
    counted_superseded: int = 0


@dataclass(frozen=True)
class Damage:
    """Everything a look found; ``partitions`` holds the damaged ones only."""

    partitions: tuple[PartitionDamage, ...]
    checked: int  # partitions read
    memories: int  # memories the catalog holds, not forgotten
    journals: tuple[tuple[str, int], ...]  # dead processes' journals: name, ids it names
    forgets: tuple[str, ...]  # memories whose forget a dead process left unfinished
    stale_images: tuple[str, ...]  # partitions with an image on this machine and no files
    counts: tuple[CountDrift, ...]
    in_flight: int
    misindexed: tuple[tuple[str, tuple[str, ...]], ...] = ()  # partition, memories its data index has wrong


def look_home(*, home: Path, catalog: Catalog, store: VectorStore, orphans_before: int) -> Damage:
    """Read the whole home and say what is wrong.
    ``orphans_before``: microseconds; unnamed rows written since are a write in flight."""
    intents = catalog.all("SELECT memory_id, since FROM forgetting")
    under_way = {r["memory_id"] for r in intents}
    horizon = time.time_ns() // 1000 - int(STALE_FORGET.total_seconds() * 1e6)
    stale = tuple(sorted(r["memory_id"] for r in intents if r["since"] < horizon))
    stored = store.partitions()
    named = [r["partition"] for r in catalog.all("SELECT DISTINCT partition FROM memories WHERE forgotten_at IS NULL")]
    keys = sorted(set(stored) | set(named))
    damaged, memories, in_flight = [], 0, 0
    for key in keys:
        found, current = look_partition(catalog, store, key, orphans_before=orphans_before, under_way=under_way)
        memories += current
        in_flight += found.in_flight
        if found.damaged:
            damaged.append(found)
    tables = set(stored)
    return Damage(
        partitions=tuple(damaged),
        checked=len(keys),
        memories=memories,
        journals=tuple((path.name, ids) for path, ids in dead_journals(home / JOURNALS)),
        forgets=stale,
        stale_images=tuple(sorted(key for key, _ in store.layout.images() if key not in tables)),
        counts=tuple(count_drift(catalog)),
        in_flight=in_flight,
        misindexed=tuple(misindexed(catalog).items()),
    )


def look_partition(
    catalog: Catalog, store: VectorStore, key: str, *, orphans_before: int, under_way: set[str]
) -> tuple[PartitionDamage, int]:
    """What is wrong with one partition, and how many memories the catalog holds of it."""
    before = _forgotten_by_id(catalog, key)
    with store.held_still(key):
        leftovers = tuple(_leftovers(store.layout, key))
        try:
            present = _present(store, key)
        except READ_ERRORS as exc:
            current = sum(1 for forgotten in before.values() if not forgotten)
            return PartitionDamage(key, leftovers=leftovers, unreadable=said(exc)), current
        image_broken, image_gone = _image(store.layout, key, present)
    lost = [id_ for id_, forgotten in before.items() if not forgotten and id_ not in present]
    if lost:  # a forget that purged its row after the first read is forgotten by now
        lost = [id_ for id_, forgotten in _forgotten_by_id(catalog, key, lost).items() if not forgotten]
    unknown = [id_ for id_ in present if id_ not in before]
    after = _forgotten_by_id(catalog, key, unknown) if unknown else {}
    unnamed = [id_ for id_ in unknown if id_ not in after]
    orphans = [id_ for id_ in unnamed if present[id_] < orphans_before]
    gone = [id_ for id_ in present if (before.get(id_) or after.get(id_)) and id_ not in under_way]
    if gone:  # a forget that finished after the read purged its rows: only what is still there
        with store.held_still(key):
            still = _present(store, key)
        gone = [id_ for id_ in gone if id_ in still]
    damage = PartitionDamage(
        key,
        lost=tuple(sorted(lost)),
        orphans=tuple(sorted(orphans)),
        forgotten=tuple(sorted(gone)),
        leftovers=leftovers,
        image_broken=image_broken,
        image_gone=image_gone,
        in_flight=len(unnamed) - len(orphans),
    )
    return damage, sum(1 for forgotten in before.values() if not forgotten)


def count_drift(catalog: Catalog) -> list[CountDrift]:
    """Each partition's kept counts against the catalog's own rows, in one statement (one
    snapshot: a write that moves both is seen in both or in neither); then the total."""
    rows = catalog.all(
        "SELECT key, sum(kept) AS kept, sum(counted) AS counted, sum(kept_superseded) AS kept_superseded, "
        "sum(counted_superseded) AS counted_superseded FROM ("
        "SELECT key, live AS kept, 0 AS counted, superseded AS kept_superseded, 0 AS counted_superseded "
        "FROM partitions UNION ALL "
        "SELECT partition, 0, count(*), 0, count(superseded_by) FROM memories WHERE forgotten_at IS NULL "
        "GROUP BY partition) AS both_counts GROUP BY key "
        "HAVING sum(kept) <> sum(counted) OR sum(kept_superseded) <> sum(counted_superseded) ORDER BY key"
    )
    drift = [
        CountDrift(
            r["key"],
            int(r["kept"]),
            int(r["counted"]),
            int(r["kept_superseded"]),
            int(r["counted_superseded"]),
        )
        for r in rows
    ]
    total = catalog.one(
        "SELECT (SELECT live FROM totals WHERE one = 1) AS kept, (SELECT coalesce(sum(live), 0) FROM partitions) AS counted"
    )
    if total is not None and total["kept"] is not None and int(total["kept"]) != int(total["counted"]):
        drift.append(CountDrift(TOTALS, int(total["kept"]), int(total["counted"])))
    return drift


def _forgotten_by_id(catalog: Catalog, key: str, ids: list[str] | None = None) -> dict[str, bool]:
    """The partition's memories in the catalog (of ``ids`` only, when given): id → forgotten."""
    if ids is None:
        rows = catalog.all("SELECT id, forgotten_at FROM memories WHERE partition = ?", (key,))
    else:
        rows = catalog.all(
            f"SELECT id, forgotten_at FROM memories WHERE id IN (SELECT value FROM {catalog.sql.values}) "
            "AND partition = ?",
            (json.dumps(ids), key),
        )
    return {r["id"]: r["forgotten_at"] is not None for r in rows}


def _present(store: VectorStore, key: str) -> dict[str, int]:
    """Every row in the partition's files (table, tail and folding file, or small file): id →
    when it was written (microseconds)."""
    present: dict[str, int] = {}
    for batch in store.layout.batches(key, ["id", "created_at"], batch_size=_BATCH, session=store.session):
        present.update(zip(batch.column("id").to_pylist(), batch.column("created_at").to_pylist(), strict=True))
    return present


def _leftovers(layout: Layout, key: str) -> list[str]:
    """What a killed write left beside the partition's files, each in words (local disks only:
    an object store holds tables alone). Read while the partition is held still, so no write
    is under way: each is a kill's."""
    small, tail = layout.small_path(key), layout.tail_path(key)
    if small is None or tail is None:
        return []
    found = [
        f"temporary file {temp.name}, a killed write's"
        for temp in (small_file.temp_of(small), small_file.temp_of(tail))
        if temp.exists()
    ]
    folding = tail_file.folding_of(tail)
    if folding.exists():
        found.append(f"{folding.name}: a fold into the table a kill cut short, not settled")
    cut = _cut_bytes(tail)
    if cut:
        found.append(f"{tail.name} ends in {cut} bytes of a frame a kill cut short")
    if small.exists() and layout.location.table_exists(table_name(key)):
        found.append(f"{small.name} beside the table {table_name(key)}.lance: a promotion a kill cut short")
    return found


def _cut_bytes(tail: Path) -> int:
    """How many bytes at the tail's end are no whole frame (what a kill cut short, which the
    next writer or purge cuts off); 0 for none. A tail the disk changed is left to the read,
    which says so (``PartitionCorrupt``)."""
    try:
        data = tail.read_bytes()
    except FileNotFoundError:
        return 0
    if data.startswith(tail_file.LEGACY):
        return 0
    try:
        end = tail_file._Frames(data, tail).end  # the walk every reader and writer of a tail makes
    except PartitionCorrupt:
        return 0
    return len(data) - end


def _image(layout: Layout, key: str, present: dict[str, int]) -> tuple[str | None, tuple[str, ...]]:
    """The partition's image on this machine: why it cannot be opened, or the rows it holds
    that the partition no longer does (their texts are still in it)."""
    try:
        mapped = image.open_image(layout.image_folder(key))
    except Exception as exc:  # whatever a damaged image raises, it cannot serve
        return said(exc), ()
    if mapped is None:
        return None, ()
    held: list[Any] = mapped.ids.tolist()
    names = (raw.decode() if isinstance(raw, bytes) else str(raw) for raw in held)
    return None, tuple(sorted(id_ for id_ in names if id_ not in present))


def said(exc: BaseException) -> str:
    """An error in one line, short: its kind and message (paths, never a row's text)."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message[:300]}" if message else type(exc).__name__
