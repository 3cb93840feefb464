"""Four real processes on one ESFIS_HOME, for a bounded time, each mixing remember, replace,
forget, recall and import on two shared spaces (and personal). Then the books are reconciled:

- 0 errors: the only refusals are the ones a race makes legitimate (a memory another process
  forgot is not found; one another replaced is already superseded);
- 0 lost writes: every memory a process was told it wrote is in the catalog and its partition,
  every import row once; every replace's old memory names its successor;
- every forgotten memory reads as forgotten and its text is in no file;
- catalog and partitions agree (``tests.test_faults.assert_whole``); nothing a caller cannot see
  came back from a recall.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import cli_env
from tests.helpers import files_holding
from tests.test_faults import ROOT, assert_whole, reopen

PROCESSES = 4
SECONDS = float(os.environ.get("ESFIS_FAULTS_SECONDS", "6"))

_WORKER = textwrap.dedent(
    """
    import io, json, os, random, sys, time
    from pathlib import Path
    from indexing.embedding.testing import HashingEmbedder
    from server.errors import AlreadySuperseded, MemoryNotFound
    from server.facade import open_service
    from server.settings import Settings

    worker, home, seconds = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
    svc = open_service(Settings(home=home, model=None, catalog=os.environ.get("ESFIS_CATALOG")), embedder=HashingEmbedder())
    rng = random.Random(worker)
    log = {"written": [], "replaced": [], "forgotten": [], "imported": 0, "import_keys": [],
           "raced": 0, "recalls": 0, "outside": 0, "errors": []}
    print("ready", flush=True)
    sys.stdin.readline()

    def live_id(space):
        row = svc._parts.catalog.one(
            "SELECT id FROM memories WHERE space = ? AND forgotten_at IS NULL AND superseded_by IS NULL "
            "ORDER BY random() LIMIT 1", (space,))
        return None if row is None else row["id"]

    deadline, n = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        n += 1
        space = rng.choice(["acme", "globex"])
        # Each step a run of its own: one run that read a space may not write personal (the barrier).
        caller, op = svc.caller("worker-" + worker, space=space), rng.choices(["remember", "replace", "forget", "recall", "import"],
                                                 [30, 15, 15, 35, 5])[0]
        text = f"worker {worker} note {n} about the {space} build"
        try:
            if op == "remember":
                log["written"].append(svc.remember(caller, text, personal=rng.random() < 0.1).id)
            elif op == "replace" and (old := live_id(space)):
                log["replaced"].append((old, svc.replace(caller, old, text).id))
            elif op == "forget" and (old := live_id(space)):
                text_of = svc.get(caller, old).text
                svc.forget(caller, old)
                log["forgotten"].append((old, text_of))
            elif op == "recall":
                got = svc.recall(caller, f"notes about the {space} build", limit=10).memories
                log["recalls"] += 1
                log["outside"] += sum(1 for m in got if m.space not in (space, None))
            elif op == "import":
                keys = [f"{worker}-{n}-{i}" for i in range(5)]
                lines = b"".join(json.dumps({"text": f"import {k} for {space}", "space": space, "key": k}).encode()
                                 + b"\\n" for k in keys)
                report = svc.operator.import_jsonl(io.BytesIO(lines), batch_size=5)
                assert report.failed == 0 and report.imported == 5, report.summary()
                log["imported"] += report.imported
                log["import_keys"].extend(keys)
        except (MemoryNotFound, AlreadySuperseded):
            log["raced"] += 1  # another process forgot or replaced it first
        except Exception as exc:
            log["errors"].append(f"{op}: {type(exc).__name__}: {exc}"[:300])
    svc.close()
    print(json.dumps(log), flush=True)
    """
)


def _start(worker: int, home: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _WORKER, str(worker), str(home), str(SECONDS)],
        cwd=ROOT,
        env=cli_env(home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready", process.stderr
    return process


def test_four_processes_mixing_every_verb_lose_nothing_and_leave_nothing(fake_service, home):
    fake_service.operator.create_space("acme")
    fake_service.operator.create_space("globex")
    for space in ("acme", "globex"):
        caller = fake_service.caller("seed", space=space)
        for i in range(20):
            fake_service.remember(caller, f"seed note {i} about the {space} build")
    fake_service.close()

    workers = [_start(w, home) for w in range(PROCESSES)]
    for process in workers:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    logs = []
    for process in workers:
        out, err = process.communicate(timeout=SECONDS + 120)
        assert process.returncode == 0, err
        logs.append(json.loads(out.strip().splitlines()[-1]))

    assert [e for log in logs for e in log["errors"]] == []
    assert sum(log["outside"] for log in logs) == 0
    done = {op: sum(len(log[op]) for log in logs) for op in ("written", "replaced", "forgotten")}
    print(
        "done:",
        done,
        "recalls",
        sum(log["recalls"] for log in logs),
        "imported",
        sum(log["imported"] for log in logs),
        "raced",
        sum(log["raced"] for log in logs),
    )
    assert all(n >= 5 for n in done.values()) and sum(log["recalls"] for log in logs) >= 5, (done, logs)
    assert sum(log["imported"] for log in logs) >= 5, "no import ran"

    svc = reopen(home)
    try:
        rows = {r["id"]: r for r in svc._parts.catalog.all("SELECT id, superseded_by, forgotten_at, key FROM memories")}
        forgotten = {i for log in logs for i, _ in log["forgotten"]}
        written = [i for log in logs for i in log["written"]] + [new for log in logs for _, new in log["replaced"]]
        assert [i for i in written if i not in rows] == [], "lost writes"
        for log in logs:
            for old, new in log["replaced"]:
                assert rows[old]["superseded_by"] == new
        assert all(rows[i]["forgotten_at"] is not None for i in forgotten)
        imports = svc._parts.catalog.one("SELECT count(*) AS n FROM memories WHERE ai = 'import'")["n"]
        assert imports == sum(log["imported"] for log in logs)  # each import row once, forgotten or not
        keys = svc._parts.catalog.all("SELECT key, count(*) AS n FROM memories WHERE key IS NOT NULL GROUP BY key")
        assert {k["key"] for k in keys} <= {k for log in logs for k in log["import_keys"]}
        assert {k["n"] for k in keys} <= {1}
        assert_whole(svc, home)
        texts = [t for log in logs for _, t in log["forgotten"]]
        assert files_holding(home, texts) == {}
    finally:
        svc.close()
