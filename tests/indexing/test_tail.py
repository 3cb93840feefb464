"""A table's newest rows in its tail file (``indexing.partitions.tail``): a small write changes
no table version, every reader sees each row once (racing a fold, or after a fold a kill cut
short), validity and forget reach the tail, and the fold puts every row in the table."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from indexing.errors import PartitionCorrupt
from indexing.partitions import small_file, tail
from indexing.partitions.store import VectorStore, table_name
from indexing.rows import Row
from tests.helpers import files_containing, stored_ids

KEY = "space:acme"
DIM = 16
SECRET = "the deploy key of acme is plum-7731"
TABLE_ROWS = 20  # past the small file's bound below: a table from the first write


@pytest.fixture(autouse=True)
def bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(small_file, "SMALL_ROWS", 8)
    monkeypatch.setattr(tail, "TAIL_ROWS", 5)


def unit(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


VECTORS = unit(100)


def row(i: int, text: str | None = None, until: int | None = None) -> Row:
    return Row(f"r{i}", text or f"note {i}", VECTORS[i], i, 0, until)


def store_at(root: Path) -> VectorStore:
    return VectorStore(root, model="m", dimension=DIM)


def table_version(root: Path) -> int:
    import lance

    return lance.dataset(str(root / f"{table_name(KEY)}.lance")).version


def tail_path(root: Path) -> Path:
    return root / f"{table_name(KEY)}.tail"


def each_once(root: Path, numbers) -> None:
    """Every reader sees each row once: a fresh store's memory, and the files read as a backup does."""
    expected = sorted(f"r{i}" for i in numbers)
    assert sorted(store_at(root).row_ids(KEY)) == expected
    assert sorted(stored_ids(root, KEY)) == expected


def test_small_writes_to_a_table_go_to_its_tail_and_the_write_past_it_folds_every_row_in(tmp_path: Path):
    store = store_at(tmp_path)
    store.add(KEY, [row(i) for i in range(TABLE_ROWS)])
    version = table_version(tmp_path)
    for i in range(TABLE_ROWS, TABLE_ROWS + 5):
        store.add(KEY, [row(i)])
    assert table_version(tmp_path) == version and tail_path(tmp_path).exists()  # no append yet
    each_once(tmp_path, range(TABLE_ROWS + 5))
    hit = store_at(tmp_path).search(KEY, VECTORS[TABLE_ROWS + 2], 1, now=10).hits[0]
    assert (hit.id, hit.text) == (f"r{TABLE_ROWS + 2}", f"note {TABLE_ROWS + 2}")  # found in the tail
    store.add(KEY, [row(TABLE_ROWS + 5)])  # the tail is full: folded in, with this row, in one append
    assert table_version(tmp_path) == version + 1 and not tail_path(tmp_path).exists()
    import lance

    assert lance.dataset(str(tmp_path / f"{table_name(KEY)}.lance")).count_rows() == TABLE_ROWS + 6
    each_once(tmp_path, range(TABLE_ROWS + 6))
    store.add(KEY, [row(i) for i in range(50, 60)])  # too large for a tail: straight in
    assert table_version(tmp_path) == version + 2 and not tail_path(tmp_path).exists()
    each_once(tmp_path, [*range(TABLE_ROWS + 6), *range(50, 60)])


def test_an_ended_validity_and_a_forget_reach_the_tail(tmp_path: Path):
    store = store_at(tmp_path)
    store.add(KEY, [row(i) for i in range(TABLE_ROWS)])
    store.add(KEY, [row(TABLE_ROWS, f"{SECRET} (the tail's)")])
    store.add(KEY, [row(TABLE_ROWS + 1)])
    store.end_validity(KEY, f"r{TABLE_ROWS + 1}", 5)
    fresh = store_at(tmp_path)  # read from disk
    assert f"r{TABLE_ROWS + 1}" not in [h.id for h in fresh.search(KEY, VECTORS[TABLE_ROWS + 1], 3, now=10).hits]
    assert fresh.search(KEY, VECTORS[TABLE_ROWS + 1], 3, now=4).hits[0].id == f"r{TABLE_ROWS + 1}"
    held = tail_path(tmp_path).read_bytes()
    store.purge(KEY, [f"r{TABLE_ROWS}"])
    assert files_containing(tmp_path, SECRET) == []
    each_once(tmp_path, [*range(TABLE_ROWS), TABLE_ROWS + 1])
    # A tail write killed before its rename leaves its temporary file, which may hold the text
    # of a row the tail does not: a purge (the orphan's, retried) removes it too.
    small_file.temp_of(tail_path(tmp_path)).write_bytes(held)
    assert files_containing(tmp_path, SECRET)
    store.purge(KEY, [f"r{TABLE_ROWS}"])
    assert files_containing(tmp_path, SECRET) == []


def test_stream_ids_written_before_and_drop_take_the_tail_in(tmp_path: Path):
    store = store_at(tmp_path)
    store.add(KEY, [row(i) for i in range(TABLE_ROWS)])
    store.add(KEY, [row(TABLE_ROWS), row(TABLE_ROWS + 1)])
    assert sorted(store.ids_written_before(KEY, TABLE_ROWS + 1)) == sorted(f"r{i}" for i in range(TABLE_ROWS + 1))
    streamed = [b for b in store.stream(KEY, batch_size=7)]
    got = {i: v for b in streamed for i, v in zip(b.column("id").to_pylist(), b.column("vector").to_pylist())}
    assert len(got) == sum(len(b) for b in streamed) == TABLE_ROWS + 2
    assert np.allclose(np.stack([got[f"r{i}"] for i in range(TABLE_ROWS + 2)]), VECTORS[: TABLE_ROWS + 2])
    store.drop(KEY)
    assert not tail_path(tmp_path).exists() and store.partitions() == []


KILLED_FOLD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from indexing import failpoints
    from indexing.partitions import small_file, tail
    from indexing.partitions.store import VectorStore
    from indexing.rows import Row
    small_file.SMALL_ROWS, tail.TAIL_ROWS = 8, 5
    store = VectorStore(sys.argv[1], model="m", dimension=16)
    v = np.random.default_rng(0).normal(size=(100, 16)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    row = lambda i: Row(f"r{i}", f"note {i}", v[i], i, 0, None)
    store.add("space:acme", [row(i) for i in range(20)])
    for i in range(20, 25):
        store.add("space:acme", [row(i)])
    failpoints.arm([sys.argv[2]])
    store.add("space:acme", [row(25)])  # the fold, killed where armed
    """
)


@pytest.mark.parametrize(
    ("step", "committed"), [("fold:after-rename", False), ("fold:after-append", True)], ids=["before", "after"]
)
def test_a_fold_killed_before_or_after_its_append_keeps_each_row_once(tmp_path: Path, step: str, committed: bool):
    killed = subprocess.run([sys.executable, "-c", KILLED_FOLD, str(tmp_path), step], cwd=Path(__file__).parents[2])
    assert killed.returncode == -9
    folding = tail.folding_of(tail_path(tmp_path))
    assert folding.exists() and not tail_path(tmp_path).exists()
    kept = range(26) if committed else range(25)  # row 25 came with the fold: in only if it committed
    each_once(tmp_path, kept)  # readers, before anyone settles it
    store = store_at(tmp_path)
    store.add(KEY, [row(30)])  # the next writer settles it first
    assert not folding.exists()
    each_once(tmp_path, [*kept, 30])
    for i in range(31, 40):  # and later folds add nothing twice
        store.add(KEY, [row(i)])
    each_once(tmp_path, [*kept, *range(30, 40)])


def test_a_write_appends_one_frame_to_the_tail_and_never_rewrites_it(tmp_path: Path):
    store = store_at(tmp_path)
    store.add(KEY, [row(i) for i in range(TABLE_ROWS)])
    store.add(KEY, [row(TABLE_ROWS)])
    first = tail_path(tmp_path).stat()
    store.add(KEY, [row(TABLE_ROWS + 1)])
    store.add(KEY, [row(TABLE_ROWS + 2)])
    after = tail_path(tmp_path).stat()
    assert after.st_ino == first.st_ino and after.st_size > first.st_size  # the same file, grown
    assert tail_path(tmp_path).read_bytes().startswith(tail.MAGIC)
    each_once(tmp_path, range(TABLE_ROWS + 3))


def test_a_frame_a_kill_cut_short_counts_for_no_reader_and_the_next_write_or_forget_cuts_it(tmp_path: Path):
    store = store_at(tmp_path)
    store.add(KEY, [row(i) for i in range(TABLE_ROWS)])
    store.add(KEY, [row(TABLE_ROWS)])
    kept = tail_path(tmp_path).read_bytes()
    store.add(KEY, [row(TABLE_ROWS + 1, f"{SECRET} (cut)")])
    whole = tail_path(tmp_path).read_bytes()
    cut = whole[:-8]  # the last frame, all but its last bytes written
    tail_path(tmp_path).write_bytes(cut)
    assert files_containing(tmp_path, SECRET)
    each_once(tmp_path, range(TABLE_ROWS + 1))  # the cut row: in no reader's rows
    store_at(tmp_path).purge(KEY, [f"r{TABLE_ROWS + 1}"])  # its forget, retried: the text goes
    assert files_containing(tmp_path, SECRET) == []
    tail_path(tmp_path).write_bytes(cut[:-3] + b"\x00\x01\x02")  # a cut end that fails its checksum
    store = store_at(tmp_path)
    store.add(KEY, [row(TABLE_ROWS + 2)])  # the next write cuts the end off before its own frame
    assert tail_path(tmp_path).read_bytes().startswith(kept)
    each_once(tmp_path, [*range(TABLE_ROWS + 1), TABLE_ROWS + 2])


def _three_row_frames(tmp_path: Path) -> tuple[bytearray, int]:
    """A table whose tail holds three frames of one row each, after the schema's: the tail's
    bytes, and where the first row frame begins."""
    store = store_at(tmp_path)
    store.add(KEY, [row(i) for i in range(TABLE_ROWS)])
    for i in range(TABLE_ROWS, TABLE_ROWS + 3):
        store.add(KEY, [row(i)])
    data = bytearray(tail_path(tmp_path).read_bytes())
    return data, len(tail.MAGIC) + tail.FRAME.size + tail.FRAME.unpack_from(data, len(tail.MAGIC))[0]


def test_a_frame_the_disk_changed_before_others_is_refused_not_cut_and_no_row_after_it_is_lost(tmp_path: Path):
    data, first = _three_row_frames(tmp_path)
    data[first + tail.FRAME.size + 8] ^= 0xFF  # a byte of the first row's frame, two whole frames after it
    tail_path(tmp_path).write_bytes(bytes(data))
    with pytest.raises(PartitionCorrupt, match="frame 1 of 4 fails its checksum"):
        store_at(tmp_path).live_partition(KEY)
    writer = store_at(tmp_path)
    # A write past the tail's bounds (a fold) reads every frame: refused, the file left whole.
    with pytest.raises(PartitionCorrupt):
        writer.add(KEY, [row(TABLE_ROWS + 3 + i) for i in range(tail.TAIL_ROWS)])
    with pytest.raises(PartitionCorrupt):
        writer.purge(KEY, [f"r{TABLE_ROWS + 2}"])
    assert tail_path(tmp_path).read_bytes() == bytes(data)


def test_a_frame_length_the_disk_changed_is_refused_not_taken_for_a_cut_end(tmp_path: Path):
    """A changed length would walk the frames to a false end that looks like a kill's cut: the
    next write would cut every committed frame after it away. Its header's checksum refuses it."""
    data, first = _three_row_frames(tmp_path)
    data[first + 2] ^= 0x01  # the first row frame's length, 64 KiB longer: past the file's end
    tail_path(tmp_path).write_bytes(bytes(data))
    with pytest.raises(PartitionCorrupt, match="the header of frame 1 fails its checksum"):
        store_at(tmp_path).live_partition(KEY)
    writer = store_at(tmp_path)
    with pytest.raises(PartitionCorrupt):
        writer.add(KEY, [row(TABLE_ROWS + 3)])  # a writer's walk checks every header too
    with pytest.raises(PartitionCorrupt):
        writer.purge(KEY, [f"r{TABLE_ROWS + 2}"])
    assert tail_path(tmp_path).read_bytes() == bytes(data)  # nothing cut, nothing lost


def _frames_without_header_checksums(data: bytes) -> bytes:
    """A tail as esfis wrote it before headers had a checksum (``ESFTAIL1``)."""
    out, at = [tail.MAGIC_V1], len(tail.MAGIC)
    while at < len(data):
        length = tail.FRAME.unpack_from(data, at)[0]
        out += [data[at : at + tail.HEAD.size], data[at + tail.FRAME.size : at + tail.FRAME.size + length]]
        at += tail.FRAME.size + length
    return b"".join(out)


def test_frames_without_header_checksums_are_read_and_rewritten_with_them(tmp_path: Path):
    store = store_at(tmp_path)
    store.add(KEY, [row(i) for i in range(TABLE_ROWS)])
    for i in range(TABLE_ROWS, TABLE_ROWS + 2):
        store.add(KEY, [row(i)])
    held = tail.read(tail_path(tmp_path))
    assert held is not None
    tail_path(tmp_path).write_bytes(_frames_without_header_checksums(tail_path(tmp_path).read_bytes()))
    assert tail.id_of(tail.read(tail_path(tmp_path))) == tail.id_of(held)
    each_once(tmp_path, range(TABLE_ROWS + 2))
    store = store_at(tmp_path)
    store.add(KEY, [row(TABLE_ROWS + 2)])  # no frame of the new form after frames of the old
    assert tail_path(tmp_path).read_bytes().startswith(tail.MAGIC)
    each_once(tmp_path, range(TABLE_ROWS + 3))
    store = store_at(tmp_path)
    store.add(KEY, [row(TABLE_ROWS + 3)])
    each_once(tmp_path, range(TABLE_ROWS + 4))


def test_a_tail_esfis_wrote_before_frames_is_read_and_rewritten_in_frames(tmp_path: Path):
    import pyarrow as pa

    store = store_at(tmp_path)
    store.add(KEY, [row(i) for i in range(TABLE_ROWS)])
    store.add(KEY, [row(TABLE_ROWS), row(TABLE_ROWS + 1)])
    held = tail.read(tail_path(tmp_path))
    assert held is not None
    small_file.write(tail_path(tmp_path), held)  # the Arrow IPC file the tail was before frames
    assert tail_path(tmp_path).read_bytes().startswith(tail.LEGACY)
    assert tail.id_of(pa.ipc.open_file(tail_path(tmp_path).read_bytes()).read_all()) == tail.id_of(held)
    each_once(tmp_path, range(TABLE_ROWS + 2))
    store = store_at(tmp_path)
    store.add(KEY, [row(TABLE_ROWS + 2)])
    assert tail_path(tmp_path).read_bytes().startswith(tail.MAGIC)
    each_once(tmp_path, range(TABLE_ROWS + 3))
    for i in range(TABLE_ROWS + 3, TABLE_ROWS + 6):  # on to a fold
        store.add(KEY, [row(i)])
    assert not tail_path(tmp_path).exists()
    each_once(tmp_path, range(TABLE_ROWS + 6))
