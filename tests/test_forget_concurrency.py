"""A forget in one process never breaks a recall in another.

``forget`` purges: it rewrites the partition and deletes its old Lance versions and files. A
process that loads its image of that partition at that moment must not find a file gone from
under it. Two real processes share one ESFIS_HOME: one remembers and forgets in a loop; the
other recalls through the service and, in three more threads, searches the partition the way
a fresh ``esfis recall`` would (a new store, the image read from disk every round). For a few
seconds, neither sees a single error, and the writer is never starved.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from server.bulk.importer import import_stream
from tests.conftest import cli_env

SECONDS = 3.0
LOADERS = 3  # threads of the reading process that load the image afresh each round

_WORKER = textwrap.dedent(
    """
    import json, os, sys, threading, time
    from pathlib import Path
    from indexing.partitions.store import VectorStore
    from indexing.embedding.testing import HashingEmbedder
    from server.facade import open_service
    from server.settings import Settings
    from server.spaces import partition_key

    role, home, seconds, loaders = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    settings = Settings(home=home, model=None, catalog=os.environ.get("ESFIS_CATALOG"))
    embedder = HashingEmbedder()
    service = open_service(settings, embedder=embedder)
    caller = service.caller("worker-" + role, space="acme")
    query = embedder.embed_query("build note for the purge race")
    print("ready", flush=True)
    sys.stdin.readline()  # both start together
    deadline = time.monotonic() + seconds
    rounds, errors = [], []

    def loop(step):
        n = 0
        while time.monotonic() < deadline:
            try:
                step(n)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}"[:300])
            n += 1
        rounds.append(n)

    def write(n):
        memory = service.remember(caller, f"build note {n} for the purge race")
        service.forget(caller, memory.id)

    def recall(n):
        service.recall(caller, "build note for the purge race", limit=5)

    def load(n):
        fresh = VectorStore(settings.vectors_path, model=embedder.name, dimension=embedder.dimension)
        fresh.search(partition_key("acme"), query, 5, now=time.time_ns() // 1000)

    steps = [write] if role == "writer" else [recall] + [load] * loaders
    threads = [threading.Thread(target=loop, args=(step,)) for step in steps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"role": role, "rounds": sum(rounds), "errors": errors[:3], "failed": len(errors)}), flush=True)
    """
)


def _start(role: str, home: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _WORKER, role, str(home), str(SECONDS), str(LOADERS)],
        env=cli_env(home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready", process.stderr
    return process


def test_recall_in_one_process_survives_forget_in_another(fake_service, home, folders):
    fake_service.operator.add_space(folders["acme"], "acme")
    filler = " ".join(f"word{j}" for j in range(5))
    lines = [
        json.dumps({"text": f"acme standing fact {i} about the build {filler}", "space": "acme"}) for i in range(50)
    ]
    assert import_stream(fake_service._parts, lines, ai="seed").imported == 50

    workers = [_start(role, home) for role in ("writer", "reader")]
    for process in workers:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    outcomes = []
    for process in workers:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        outcomes.append(json.loads(out.strip().splitlines()[-1]))

    assert all(o["rounds"] >= 10 for o in outcomes), outcomes  # the race was run, nobody starved
    assert all(o["failed"] == 0 for o in outcomes), outcomes
