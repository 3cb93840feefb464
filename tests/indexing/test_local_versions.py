"""A partition's version on one machine (``LocalCoordination``): a token in its lock file
(``<table>.lock``), written in place after every write, that another process reads before every
search; a new partition costs no file of its own for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from indexing.partitions.coordination import LocalCoordination
from indexing.partitions.layout import table_name
from indexing.partitions.store import VectorStore
from indexing.rows import Row

KEY = "space:acme"


def test_every_bump_gives_a_version_never_seen_and_another_process_reads_it(tmp_path: Path):
    versions = LocalCoordination(tmp_path, table_name)
    assert versions.version(KEY) == ""  # never written
    seen = {versions.bump(KEY) for _ in range(200)}
    assert len(seen) == 200 and versions.version(KEY) in seen
    latest = versions.bump(KEY)
    read = subprocess.run(
        [sys.executable, "-c", f"import os; print(open({str(tmp_path / (table_name(KEY) + '.lock'))!r}).read())"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ},
    ).stdout.strip()
    assert read == latest


def test_a_new_partition_gets_its_version_in_its_lock_file_and_no_file_of_its_own(tmp_path: Path):
    store = VectorStore(tmp_path, model="m", dimension=4)
    store.add(KEY, [Row("r1", "note", np.ones(4, dtype=np.float32) / 2, 1, 0, None)])
    files = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(table_name(KEY)))
    assert files == [f"{table_name(KEY)}.arrow", f"{table_name(KEY)}.lock"]
    token = store.coordination.version(KEY)
    assert token and (tmp_path / f"{table_name(KEY)}.lock").read_text() == token


def test_a_forked_child_draws_tokens_of_its_own(tmp_path: Path):
    """The tokens' random prefix is drawn again in a forked child (an image build is one), so a
    parent and its child never hand out the same version."""
    versions = LocalCoordination(tmp_path, table_name)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one token, through the pipe, and out
        os.write(write, versions.bump("space:child").encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    mine = versions.bump("space:child")
    assert child and mine and child[:12] != mine[:12]
