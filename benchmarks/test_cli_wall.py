"""Wall time of real ``esfis`` processes, start-up included: a one-line recall (the model loaded
and the query embedded in the process) and commands that embed nothing.

Targets (issue 13): ≤ 1 s for a CLI recall, ≤ 0.3 s for every command that does not embed.
Correctness asserted: each command succeeds, and the recall answers the memory of its space.
"""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from benchmarks.conftest import FULL
from tests.conftest import cli_env

ROUNDS = 10 if FULL else 3
COMMANDS = {
    "recall": ["recall", "how do we deploy?"],
    "space-list": ["space", "list"],
    "policy-list": ["policy", "list"],
    "deliveries": ["deliveries"],
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    home, folder = root / "home", root / "acme"
    folder.mkdir()
    esfis(home, folder, "space", "add", str(folder))
    esfis(home, folder, "remember", "acme deploys with a blue-green switch on fridays")
    return home, folder


def esfis(home, folder, *args: str) -> str:
    env = cli_env(home)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's install has its bytecode compiled
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", *args], cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("command", list(COMMANDS))
def test_cli_wall_time(benchmark, store, command):
    home, folder = store
    benchmark.group = "cli-wall"
    esfis(home, folder, *COMMANDS[command])  # compiled bytecode and warm file caches, as on a user's machine
    walls: list[float] = []

    def once():
        started = time.perf_counter()
        out = esfis(home, folder, *COMMANDS[command])
        walls.append(time.perf_counter() - started)
        return out

    out = benchmark.pedantic(once, rounds=ROUNDS, iterations=1)
    if command == "recall":
        assert "blue-green" in out
    benchmark.extra_info.update(
        {"command": command, "rounds": ROUNDS, "p50_s": float(np.percentile(walls, 50)), "max_s": float(max(walls))}
    )
