"""Small helpers shared by tests: run the CLI in-process, read every file under a folder, stop a
server the tests started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


# Files are read by a child process, never by the test's own: closing a file of a SQLite database
# drops every POSIX lock the closing process holds on it, SQLite's own included, so another
# process could then take the database for unused and reset its WAL index under a connection
# the test still holds (server/catalog/stale.py says how that showed).
_FIND = """
import json, pathlib, sys
needles = [bytes.fromhex(n) for n in json.loads(sys.argv[2])]
found = [[] for _ in needles]
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*")):
    if path.is_file():
        data = path.read_bytes()
        for i, raw in enumerate(needles):
            if raw in data:
                found[i].append(str(path))
print(json.dumps(found))
"""


def files_holding(root: Path, needles: list[str]) -> dict[str, list[Path]]:
    """Of ``needles``, those some file under ``root`` holds (UTF-8), with the files; every file
    read once, apart (above)."""
    hexed = json.dumps([n.encode().hex() for n in needles])
    done = subprocess.run([sys.executable, "-c", _FIND, str(root), hexed], capture_output=True, text=True, check=True)
    return {n: [Path(p) for p in paths] for n, paths in zip(needles, json.loads(done.stdout), strict=True) if paths}


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under ``root`` whose bytes contain ``needle`` (UTF-8), read apart (above)."""
    return files_holding(root, [needle]).get(needle, [])


def file_bytes(path: Path) -> bytes:
    """A file's bytes, read apart (``files_containing`` says why)."""
    read = [sys.executable, "-c", "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())", str(path)]
    return subprocess.run(read, capture_output=True, check=True).stdout


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
