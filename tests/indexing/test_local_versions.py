"""A partition's version on one machine (``LocalCoordination``): a token in ``<table>.gen``,
written in place after every write, that another process reads before every search."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from indexing.partitions.coordination import LocalCoordination
from indexing.partitions.layout import table_name

KEY = "space:acme"


def test_every_bump_gives_a_version_never_seen_and_another_process_reads_it(tmp_path: Path):
    versions = LocalCoordination(tmp_path, table_name)
    assert versions.version(KEY) == ""  # never written
    seen = {versions.bump(KEY) for _ in range(200)}
    assert len(seen) == 200 and versions.version(KEY) in seen
    latest = versions.bump(KEY)
    read = subprocess.run(
        [sys.executable, "-c", f"import os; print(open({str(tmp_path / (table_name(KEY) + '.gen'))!r}).read())"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ},
    ).stdout.strip()
    assert read == latest


def test_a_longer_token_an_older_esfis_wrote_is_covered_whole(tmp_path: Path):
    """The token is written over the old one in place: it must cover every byte of the 16-character
    random tokens older versions renamed into place, or the file would read as a mix forever."""
    versions = LocalCoordination(tmp_path, table_name)
    (tmp_path / f"{table_name(KEY)}.gen").write_text("f" * 16)
    token = versions.bump(KEY)
    assert versions.version(KEY) == token and len(token) >= 16


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
