"""Small helpers shared by tests: run the CLI in-process, read every file under a folder, stop a
server the tests started."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from server.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], cwd: Path, *argv: str) -> tuple[int, str, str]:
    """Run ``esfis ARGV`` in-process from ``cwd``; return (exit code, stdout, stderr)."""
    before = os.getcwd()
    os.chdir(cwd)
    try:
        code = main(list(argv))
    finally:
        os.chdir(before)
    out, err = capsys.readouterr()
    return code, out, err


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under ``root`` whose bytes contain ``needle`` (UTF-8)."""
    raw = needle.encode()
    return [p for p in root.rglob("*") if p.is_file() and raw in p.read_bytes()]


def stop_process(process: subprocess.Popen, timeout: float = 15) -> None:
    """Terminate a server the tests started, killing it if it does not stop in time."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stored_ids(vectors: Path, key: str) -> list[str]:
    """The ids a partition holds on disk, read from its files (a small file or a table), as
    no running process sees them."""
    from indexing.partitions.store import Layout, Location

    batches = Layout(Location.of(vectors)).batches(key, ["id"], batch_size=8192)
    return [id_ for batch in batches for id_ in batch.column("id").to_pylist()]
