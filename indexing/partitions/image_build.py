"""How a large partition's image is built: from one version of its table, in a process of its
own that inherits the partition's write lock, the vectors streamed through in windows and
grouped by IVF list, the lexical index saved beside them, the lists calibrated, and the version
published by one atomic rename (``image:before-publish`` is the failpoint just before it). The
files it writes, and how they are read, are ``image.py``'s.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import numpy as np
import pyarrow as pa

from indexing import failpoints
from indexing.partitions.image import IMAGE_FORMAT, Image, fragment_marks, open_image, sweep, table_id
from indexing.relevance.ann import (
    CALIBRATION_QUERIES,
    IvfLists,
    TopTen,
    calibration_queries,
    list_count_for,
    nearest,
    train,
    training_sample,
)
from indexing.relevance.fusion import SPREAD_SAMPLE
from indexing.relevance.lexical import LexicalIndex

BUILD_WINDOW = 16_384  # rows read, grouped and written at a time: a build's memory stays bounded


def build(folder: Path, dataset, *, dimension: int, previous: Image | None = None) -> None:
    """Build and publish an image of the table version ``dataset``.

    With a ``previous`` image whose centroids were trained on at least half as many rows, the
    centroids are kept and only rows the previous image did not hold are assigned (a forget or
    a routine rebuild costs a read and a write, not a k-means); otherwise k-means runs afresh.
    Vectors stream through in windows, and the grouped file is written in order, so a million
    rows never sit in memory twice.
    """
    small = dataset.to_table(columns=["id", "created_at", "valid_from", "valid_until"], with_row_address=True)
    n = small.num_rows
    ids = small.column("id").to_pylist()
    rng = np.random.default_rng(0)
    probes = np.sort(rng.choice(n, size=min(CALIBRATION_QUERIES, n), replace=False))
    probe_vectors = calibration_queries(_vectors(dataset.take(probes, columns=["vector"]), dimension))
    no_row = np.full(len(probes), -1)
    top = TopTen(probe_vectors, no_row)
    if previous is not None and n <= 2 * previous.trained_rows:
        centroids, trained = np.array(previous.lists.centroids), previous.trained_rows
        assign = np.full(n, -1, dtype=np.int32)
        known_rows = previous.rows_of(ids)
        known = known_rows >= 0
        assign[known] = previous.lists.list_of(known_rows[known])
    else:
        sample = _vectors(dataset.take(training_sample(n), columns=["vector"]), dimension)
        centroids, trained = train(sample, list_count_for(n)), n
        del sample
        assign = np.full(n, -1, dtype=np.int32)
    # One pass over the vectors: the exact top 10 of the calibration rows, and each row's list.
    first = 0
    # Scanned in order with little read-ahead: Lance's defaults buffer many fragments at once.
    scan = dataset.scanner(
        columns=["vector"],
        batch_size=BUILD_WINDOW,
        batch_readahead=1,
        fragment_readahead=1,
        scan_in_order=True,
        io_buffer_size=32 * 2**20,
    )
    for batch in scan.to_batches():
        vectors = _vectors(batch, dimension)
        part = slice(first, first + len(vectors))
        missing = assign[part] < 0
        if missing.any():
            assign[part][missing] = nearest(vectors[missing], centroids)
        top.add(first, vectors)
        first += len(vectors)
    lists, order = IvfLists.of(centroids, assign)
    grouped_row = np.empty(n, dtype=np.int64)
    grouped_row[order] = np.arange(n)

    folder.mkdir(exist_ok=True)
    sweep(folder)
    building = folder / f"tmp-{secrets.token_hex(6)}"
    building.mkdir()
    header = np.lib.format.open_memmap(building / "vectors.npy", mode="w+", dtype=np.float32, shape=(n, dimension))
    offset = header.offset
    del header
    texts_schema = pa.schema([("text", pa.large_string())])
    with (
        open(building / "vectors.npy", "r+b") as out,
        pa.OSFile(str(building / "texts.arrow"), "wb") as sink,
        pa.ipc.new_file(sink, texts_schema) as texts_out,
    ):
        out.seek(offset)
        for start in range(0, n, BUILD_WINDOW):
            wanted = order[start : start + BUILD_WINDOW]
            sorted_wanted = np.sort(wanted)
            window = dataset.take(sorted_wanted, columns=["vector", "text"])
            back = np.searchsorted(sorted_wanted, wanted)  # the window's rows, in list order
            out.write(np.ascontiguousarray(_vectors(window, dimension)[back]).tobytes())
            texts = window.column("text").take(pa.array(back)).combine_chunks().cast(pa.large_string())
            texts_out.write_batch(pa.record_batch([texts], names=["text"]))
    id_bytes = np.array([ids[i].encode() for i in order], dtype=f"S{max(1, max(map(len, ids)))}")
    sort = np.argsort(id_bytes, kind="stable")
    until = small.column("valid_until").fill_null(int(np.iinfo(np.int64).max)).to_numpy()
    arrays = {
        "ids": id_bytes,
        "sorted_ids": id_bytes[sort],
        "sorted_rows": sort.astype(np.int64),
        "fragment": (small.column("_rowaddr").to_numpy() >> 32).astype(np.int32)[order],
        "valid_from": small.column("valid_from").to_numpy().astype(np.int64)[order],
        "valid_until": until.astype(np.int64)[order],
        "created_at": small.column("created_at").to_numpy().astype(np.int64)[order],
        "centroids": lists.centroids,
        "offsets": lists.offsets,
    }
    for name, array in arrays.items():
        np.save(building / f"{name}.npy", array)
    _save_lexical(building)
    with _RowReader(building / "vectors.npy", offset, dimension) as grouped:
        lists.calibrate_with(
            grouped, probe_vectors, own=no_row, truth=[set(grouped_row[list(t)].tolist()) for t in top.sets()]
        )
        # An even sample, kept contiguous: BM25's fusion takes the cosine's spread from it. Read
        # from vectors.npy at every stride, it mapped most of the file into each process.
        spread_rows = np.arange(0, n, max(1, n // SPREAD_SAMPLE), dtype=np.int64)
        spread_vectors = (
            np.concatenate([grouped[slice(int(r), int(r) + 1)] for r in spread_rows])
            if n
            else np.zeros((0, dimension), dtype=np.float32)
        )
    np.save(building / "spread_rows.npy", spread_rows)
    np.save(building / "spread_vectors.npy", spread_vectors)
    meta = {
        "format": IMAGE_FORMAT,
        "rows": n,
        "lance_version": dataset.version,
        "trained_rows": trained,
        "table_id": table_id(dataset),
        "nprobe": lists.nprobe,
        "fragments": {str(k): v for k, v in fragment_marks(dataset).items()},
    }
    (building / "meta.json").write_text(json.dumps(meta))
    failpoints.hit("image:before-publish")
    version = folder / f"v{dataset.version:08d}-{secrets.token_hex(4)}"
    os.rename(building, version)
    pointer = folder / f"current.{secrets.token_hex(4)}.tmp"
    pointer.write_text(version.name)
    os.replace(pointer, folder / "current")
    sweep(folder)


def _save_lexical(building: Path) -> None:
    """Index the image's texts (in its row order) for BM25 and save the postings beside them."""
    texts = pa.ipc.open_file(pa.memory_map(str(building / "texts.arrow"), "r")).read_all().column(0)
    index = LexicalIndex()
    start = 0
    for chunk in texts.chunks:
        index.append(start, chunk.to_pylist())
        start += len(chunk)
    terms, offsets, rows, freqs, lengths = index.sorted_arrays()
    with (
        pa.OSFile(str(building / "lex_terms.arrow"), "wb") as sink,
        pa.ipc.new_file(sink, pa.schema([("term", pa.large_string())])) as writer,
    ):
        writer.write_batch(pa.record_batch([pa.array(terms, pa.large_string())], names=["term"]))
    for name, array in (("offsets", offsets), ("rows", rows), ("freqs", freqs), ("lengths", lengths)):
        np.save(building / f"lex_{name}.npy", array)


class _RowReader:
    """Rows of the file being built, read (not mapped) a slice at a time: calibration visits
    many lists, and mapped pages would count in the building process's memory."""

    def __init__(self, path: Path, offset: int, dimension: int) -> None:
        self.fd = os.open(path, os.O_RDONLY)
        self.offset, self.row_bytes, self.dimension = offset, 4 * dimension, dimension

    def __enter__(self) -> _RowReader:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)

    def __getitem__(self, rows: slice) -> np.ndarray:
        data = os.pread(self.fd, (rows.stop - rows.start) * self.row_bytes, self.offset + rows.start * self.row_bytes)
        return np.frombuffer(data, dtype=np.float32).reshape(-1, self.dimension)


def _vectors(batch, dimension: int) -> np.ndarray:
    column = batch.column("vector")
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.flatten().to_numpy(zero_copy_only=False).reshape(-1, dimension).astype(np.float32, copy=False)


def build_in_child(folder: Path, lance_dir: str, dimension: int, *, reuse: bool, lock_fd: int) -> None:
    """Run ``build`` in a process of its own, which inherits the partition's write lock.

    A build reads the whole partition once: its peak memory would otherwise stay with the
    caller (a server keeps what its allocator once held). The child holds the lock's file
    descriptor, so if the caller dies mid-build no other writer starts until the child is done.
    """
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])  # the folder holding indexing/
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            root,
            str(folder),
            str(lance_dir),
            str(dimension),
            "reuse" if reuse else "fresh",
            ",".join(failpoints.armed()),  # the child is killed at the same steps as its parent
        ],
        pass_fds=(lock_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode != 0:
        from indexing.errors import ImageBuildFailed

        how = f"killed by signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
        raise ImageBuildFailed(f"building the image in {folder} failed ({how}): {done.stderr.strip()[-2000:]}")


# The child's program: the folder holding indexing/ first on its path, so it runs its parent's
# code wherever it was started from, then ``_main`` over the rest of its arguments. Everything it
# needs comes as arguments; its environment is its parent's, untouched.
_CHILD = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from indexing.partitions.image_build import _main; _main(sys.argv[1:])"
)


def _main(argv: list[str]) -> None:
    """The child: folder, table, dimension, ``reuse`` or ``fresh``, and the parent's armed
    failpoints (comma-separated, as ``failpoints.armed`` gives them)."""
    import lance

    folder, lance_dir, dimension, mode, armed = Path(argv[0]), argv[1], int(argv[2]), argv[3], argv[4]
    failpoints.arm(n for n in armed.split(",") if n)
    previous = open_image(folder) if mode == "reuse" else None
    build(folder, lance.dataset(lance_dir), dimension=dimension, previous=previous)
