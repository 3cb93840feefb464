"""The data folder is private to its owner: ESFIS_HOME holds memory texts, queries and token
hashes, so it is made 0700 and everything esfis writes in it (the SQLite database and its WAL,
LanceDB tables, locks, journals) is 0700 for folders and 0600 for files, whatever the umask
of the shell that ran esfis."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from tests.catalogs import BACKEND
from tests.conftest import ESFIS_BIN, cli_env


def _esfis(home: Path, cwd: Path, *argv: str) -> str:
    done = subprocess.run(
        [ESFIS_BIN, *argv],
        env=cli_env(home),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.umask(0o022),  # the usual shell umask
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _modes(home: Path) -> dict[str, str]:
    paths = [home, *home.rglob("*")]
    return {str(p.relative_to(home.parent)): oct(stat.S_IMODE(p.lstat().st_mode)) for p in paths}


def test_everything_under_esfis_home_is_private_after_a_remember(tmp_path, folders):
    home = tmp_path / "esfis-home"
    _esfis(home, folders["acme"], "token", "create", "--operator")  # the first to open the home
    _esfis(home, folders["acme"], "space", "add", str(folders["acme"]))
    _esfis(home, folders["acme"], "remember", "acme builds with bazel")
    memory_id = _esfis(home, folders["acme"], "remember", "acme's staging password is in vault").strip()
    _esfis(home, folders["acme"], "forget", memory_id)
    modes = _modes(home)
    catalog_here = BACKEND == "sqlite"  # a PostgreSQL catalog lies outside the home
    assert ("esfis-home/esfis.db" in modes) == catalog_here and any(
        n.endswith(".arrow") or ".lance/data/" in n for n in modes
    ), sorted(modes)
    loose = {
        name: mode for name, mode in modes.items() if mode != (oct(0o700) if (tmp_path / name).is_dir() else oct(0o600))
    }
    assert loose == {}


def test_an_existing_home_open_to_others_is_closed(tmp_path, folders):
    home = tmp_path / "esfis-home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    _esfis(home, folders["acme"], "space", "add", str(folders["acme"]))
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
