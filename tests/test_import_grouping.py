"""An import writes each partition once, however its rows are spread (``server.bulk.grouping``):
rows come out grouped by space and in the file's order within a space, thin spaces spill to
unlinked files and come back at the end, errors keep their lowest line numbers, and every line
(blank ones too) is accounted for by the batches' counts. Through the importer, on real LanceDB
tables: a round-robin file over many spaces leaves each partition at its first version."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

import server.bulk.grouping as grouping
from indexing.partitions import image_cache
from server.bulk.batches import ERRORS_KEPT, Failures
from server.bulk.grouping import DENSE_ROWS, Batch, Grouping
from server.bulk.importer import import_stream
from server.bulk.rows import Row, RowError
from server.spaces import partition_key
from tests.helpers import files_containing

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def row(line: int, space: str) -> Row:
    return Row(line, f"{space} fact {line}", f"d{line}", space, NOW, None, (), f"k{line}", None, None)


def run(grouper: Grouping, items: list[Row | RowError | None]) -> tuple[list[Batch], list[Batch]]:
    """The batches out while adding (before the end), and those of ``finish``."""
    early = [batch for item in items for batch in grouper.add(item)]
    return early, list(grouper.finish())


def rows_of(batches: list[Batch]) -> list[Row]:
    return [item for batch in batches for item in batch.items if isinstance(item, Row)]


def test_a_round_robin_spread_comes_out_space_by_space_in_the_files_order(tmp_path: Path):
    items: list[Row | RowError | None] = [row(i + 1, f"tenant-{i % 50}") for i in range(1000)]
    grouper = Grouping(batch_size=4096, spill_in=tmp_path, window_bytes=20_000)  # ~30 rows a window
    early, late = run(grouper, items)
    assert early == [] and grouper.spilled > 900  # every window thin: spilled, written at the end
    out = rows_of(late)
    assert sorted(r.line for r in out) == list(range(1, 1001))  # each row once
    spaces = [r.space for r in out]
    runs = [s for i, s in enumerate(spaces) if i == 0 or spaces[i - 1] != s]
    assert len(runs) == 50  # each space's rows together: one write of its partition
    for space in set(spaces):
        lines = [r.line for r in out if r.space == space]
        assert lines == sorted(lines)  # the file's order within a space: the first of a key wins
    assert sum(b.lines for b in early + late) == 1000
    assert os.listdir(tmp_path) == []  # spill files never have a name


def varied(line: int, space: str | None, vectors: str) -> Row:
    """A row with every field that can differ: a vector (on every row, some or none), labels, an
    end, no key, data."""
    has_vector = vectors == "all" or (vectors == "some" and line % 3 != 0)
    vector = np.array([line, 1, 2, 3], dtype=np.float32) if has_vector else None
    until = datetime(2027, 1, 1 + line % 27, tzinfo=UTC) if line % 2 else None
    labels = ("space:acme",) if line % 5 == 0 else ()
    data = f'{{"n":{line}}}' if line % 3 == 1 else None
    key = None if line % 4 == 0 else f"k{line}"
    return Row(line, f"text {line}", f"d{line}", space, NOW, until, labels, key, data, vector)


def same_row(a: Row, b: Row) -> bool:
    plain = a._replace(vector=None) == b._replace(vector=None)
    if a.vector is None or b.vector is None:
        return plain and a.vector is None and b.vector is None
    return plain and a.vector.dtype == b.vector.dtype and np.array_equal(a.vector, b.vector)


@pytest.mark.parametrize("vectors", ["some", "all", "none"])
@pytest.mark.parametrize("window_bytes", [60_000, 20_000], ids=["spilled", "spilled-and-split-again"])
def test_a_spilled_row_comes_back_field_for_field(tmp_path: Path, window_bytes: int, vectors: str):
    """Spills are written by column (one tuple a field, one matrix of vectors): every field of
    every row comes back as it went in, whether a chunk's rows all carry a vector, some or none,
    for personal rows too, and through a bucket split again once it outgrew the window."""
    spaces = [f"tenant-{i}" for i in range(6)] + [None]
    items: list[Row | RowError | None] = [varied(i + 1, spaces[i % len(spaces)], vectors) for i in range(600)]
    grouper = Grouping(batch_size=4096, spill_in=tmp_path, window_bytes=window_bytes)
    early, late = run(grouper, items)
    assert grouper.spilled > 500
    out = {r.line: r for r in rows_of(early + late)}
    assert sorted(out) == list(range(1, 601))
    assert all(same_row(out[item.line], item) for item in items if isinstance(item, Row))
    spaces_out = [r.space for r in rows_of(early + late)]
    assert len([s for i, s in enumerate(spaces_out) if i == 0 or spaces_out[i - 1] != s]) == len(spaces)


def test_dense_spaces_go_straight_on_and_nothing_spills(tmp_path: Path):
    items: list[Row | RowError | None] = [row(i + 1, f"big-{i % 2}") for i in range(400)]
    grouper = Grouping(batch_size=4096, spill_in=tmp_path, window_bytes=60_000)
    early, late = run(grouper, items)
    assert early and grouper.spilled == 0
    assert all(len(b.items) >= DENSE_ROWS for b in early)
    assert sorted(r.line for r in rows_of(early + late)) == list(range(1, 401))


def test_once_a_bucket_spilled_a_dense_space_in_it_follows_so_its_order_holds(tmp_path: Path):
    """A space whose early rows spilled must not have its later rows written first."""
    thin = [row(i + 1, "thin-and-then-dense") for i in range(3)]
    filler = [row(10 + i, f"other-{i}") for i in range(40)]
    dense = [row(100 + i, "thin-and-then-dense") for i in range(200)]
    grouper = Grouping(batch_size=4096, spill_in=tmp_path, window_bytes=30_000)
    early, late = run(grouper, [*thin, *filler, *dense])
    lines = [r.line for r in rows_of(early + late) if r.space == "thin-and-then-dense"]
    assert lines == sorted(lines) and len(lines) == 203


def test_a_group_larger_than_a_batch_is_split_and_small_groups_are_packed_whole(tmp_path: Path):
    items: list[Row | RowError | None] = [row(i + 1, "large") for i in range(250)]
    items += [row(1000 + i, f"small-{i % 3}") for i in range(30)]
    early, late = run(Grouping(batch_size=100, spill_in=tmp_path), items)
    sizes = [len(b.items) for b in early + late]
    assert max(sizes) <= 100 and sum(sizes) == 280
    for batch in early + late:
        spaces = [r.space for r in batch.items if isinstance(r, Row)]
        assert len(spaces) == 100 or len(set(spaces)) <= 3


def test_errors_and_blank_lines_are_counted_and_travel_with_the_batches(tmp_path: Path):
    items: list[Row | RowError | None] = []
    for i in range(300):
        items.append(row(i + 1, f"t-{i % 30}") if i % 3 else (RowError(i + 1, "bad") if i % 2 else None))
    grouper = Grouping(batch_size=4096, spill_in=tmp_path, window_bytes=8_000)
    early, late = run(grouper, items)
    batches = early + late
    assert sum(b.lines for b in batches) == 300
    errors = [item.line for b in batches for item in b.items if isinstance(item, RowError)]
    assert sorted(errors) == [i + 1 for i in range(300) if i % 3 == 0 and i % 2]


def _import(service, lines: list[str], **kwargs):
    return import_stream(service._parts, lines, create_spaces=True, **kwargs)


def test_a_round_robin_import_writes_each_partition_once_and_keeps_the_first_of_each_key(
    fake_service, home: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(grouping, "WINDOW_BYTES", 16_000)  # the window fills every dozen rows
    spaces = [f"tenant-{t:03d}" for t in range(40)]
    lines = [
        json.dumps({"text": f"{spaces[i % 40]} note {i}", "space": spaces[i % 40], "key": f"k{i // 40}"})
        for i in range(400)
    ]
    # A repeat of tenant-007's first key, far later in the file, with another text: skipped.
    lines.append(json.dumps({"text": "a later text under an early key", "space": "tenant-007", "key": "k0"}))
    lines.insert(123, '{"text": 5}')
    lines.insert(7, "")
    report = _import(fake_service, lines, batch_size=64)
    assert (report.imported, report.skipped, report.failed) == (400, 1, 1)
    assert report.errors == [(125, report.errors[0][1])]  # its line number, as an editor counts
    appended = fake_service._parts.store.stats.appended
    for space in spaces:
        assert appended[partition_key(space)] == 1, f"{space} was written {appended[partition_key(space)]} times"
    caller = fake_service.caller("bench", space="tenant-007")
    texts = {m.text for m in fake_service.recall(caller, "tenant-007 note", limit=20).memories}
    assert "tenant-007 note 7" in texts and "a later text under an early key" not in texts
    assert files_containing(home, "a later text under an early key") == []  # nor in a leftover spill


def test_progress_of_a_spilled_import_adds_up_to_its_lines(fake_service, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(grouping, "WINDOW_BYTES", 16_000)
    lines = [json.dumps({"text": f"t{i % 25} note {i}", "space": f"t{i % 25}"}) for i in range(300)] + ["", ""]
    seen: list[int] = []
    report = _import(fake_service, lines, batch_size=50, progress=seen.append)
    assert report.imported == 300 and sum(seen) == 302 and len(seen) > 1


def test_the_errors_kept_are_those_of_the_lowest_lines_whatever_order_they_arrive_in():
    failures = Failures()
    late = [(line, "bad") for line in range(5000, 5000 + ERRORS_KEPT)]
    early = [(line, "bad") for line in range(10, 10 + ERRORS_KEPT)]
    failures.add(late)  # a spilled space's errors are found after a later line's
    failures.add(early)
    assert failures.count == 2 * ERRORS_KEPT and failures.kept == early


def test_rows_that_come_space_by_space_stream_through_a_batch_at_a_time(tmp_path: Path):
    items: list[Row | RowError | None] = [row(i + 1, f"sorted-{i // 500}") for i in range(2000)]
    grouper = Grouping(batch_size=100, spill_in=tmp_path)  # the default window, far larger
    out = [(i, batch) for i, item in enumerate(items) for batch in grouper.add(item)]
    assert len(out) == 20 and out[0][0] == 99  # the first batch leaves with its hundredth row
    assert all(len({r.space for r in b.items if isinstance(r, Row)}) == 1 for _, b in out)
    assert list(grouper.finish()) == [] and grouper.spilled == 0


@pytest.mark.parametrize("batch_size", [1, 7, 10, 64])
def test_every_row_of_a_file_that_comes_space_by_space_is_imported(fake_service, batch_size: int):
    """Full batches leave the window as they fill and wait for the workers: none is left behind
    when the file ends (a batch still waiting then was once dropped)."""
    lines = [json.dumps({"text": f"space by space {i}", "space": f"s{i // 25}", "key": f"k{i}"}) for i in range(50)]
    report = _import(fake_service, lines, batch_size=batch_size)
    assert (report.imported, report.skipped, report.failed) == (50, 0, 0)


def test_a_space_the_import_created_is_opened_again_only_when_it_needs_an_image(
    fake_service, monkeypatch: pytest.MonkeyPatch
):
    """The import's end builds each large partition's image. A space the import created holds
    what it wrote there, so a small one is not opened again for it (a thin spread of 100,000
    spaces paid a dataset open each); a large one still gets its image; a space that was there
    before the import is opened to count what it holds."""
    monkeypatch.setattr(image_cache, "ANN_THRESHOLD", 300)
    fake_service._parts.registry.add_named("before")
    spaces = {"small": 5, "large": 320, "before": 5}
    lines = [json.dumps({"text": f"{s} note {i}", "space": s}) for s, n in spaces.items() for i in range(n)]
    report = _import(fake_service, lines)
    assert (report.imported, sorted(report.created_spaces)) == (330, ["large", "small"])
    stats = fake_service._parts.store.stats
    opened = {s: stats.opened[partition_key(s)] for s in spaces}
    # small: its write alone; before: its write, then the count; large: its write, the count, the build
    assert opened == {"small": 1, "large": 3, "before": 2}, opened
    assert stats.built[partition_key("large")] == 1 and stats.built[partition_key("small")] == 0
