"""A fault drill (issue 68): a real ``esfis serve`` (the real model, a real port) under a steady
load of writes and recalls, and one fault at a time, each in a world of its own (its own home,
server, and where it needs one its own PostgreSQL cluster or S3 server):

- ``disk_full``: ESFIS_HOME on a 40 MiB tmpfs that the load fills (writes should answer 507
  ``disk_full``, recalls go on into the reserve, ``ESFIS_DISK_RESERVE_MB``); held full
  ``HOLD_S``, then grown to 400 MiB (``mount -o remount,size=400m``). Should the load not fill it
  within ``FILL_LOAD_S``, a ballast file on the same volume takes the rest (``filled_by`` says so).
- ``catalog_restart``: the catalog on a throwaway PostgreSQL cluster (``fsync`` and
  ``synchronous_commit`` on, its defaults, unlike the suite's clusters), restarted under the load
  (``pg_ctl -m fast -w restart``, as the postgres user); calls meanwhile should answer 503
  ``catalog_unavailable`` with ``Retry-After``.
- ``object_store_pause``: the partitions on S3 (moto's server, ``tests/objectstore.py``), whose
  process is stopped (SIGSTOP) for ``PAUSE_S``, then continued.
- ``worker_killed``: ``esfis serve --workers 2``, one worker SIGKILLed; uvicorn's supervisor
  starts another.

The load: ``CLIENTS`` processes (``benchmarks/fault_client.py``), each an agent with a token of
its own on the space ``acme``, one keep-alive connection each, ``WRITE_SHARE`` remembers and the
rest recalls, back to back, never waiting out a ``Retry-After``; every answer is logged with its
wall-clock time, and every acknowledged remember (a 2xx) with its id and text. ``STEADY_S`` of load,
then the fault, then the load goes on until a write and a recall have both succeeded after the
fault's end (``RECOVERY_LIMIT_S`` at most) and ``AFTER_S`` more. Then the load stops, the server
stops, a fresh server opens the same home and GETs every acknowledged id
(``/v1/memories/{id}?space=acme``): its text must be there, whole; and ``esfis check`` reads the
home (its findings are reported).

Reported (``extra_info``) per fault: the answers by operation, status and error code before,
during and after the fault (an answer counts where it arrived; the fault's window runs from its
start to its end, for a killed worker until its replacement serves); the answers of every request
in flight at some moment of that window, and the longest of them (a stopped object store holds
requests rather than refusing them, so none may arrive during it); the time to recover, from the
fault's end to the first successful write and to the first successful recall, and the later of
the two; acknowledged writes and how many were lost; 500 answers and tracebacks in the server's
log (an unhandled exception, which may leave its request with no answer at all); 503 and 507
answers without ``Retry-After``; what ``esfis check`` found. Asserted in both modes (promises, not
speed): 0 acknowledged writes lost, 0 answers 500, 0 tracebacks, ``Retry-After`` on every 503 and
507, and writes and recalls answering again by themselves within ``RECOVERY_LIMIT_S``.

Quick mode (the test suite's, about 2 minutes): 2 s of load before each fault, a ballast leaving
the load 4 MiB above the reserve, the disk held full 2 s, the object store stopped 3 s, 2 s after
recovery. Full mode: 10 s before, the whole 40 MiB volume, held full 5 s, the object store stopped
10 s, 10 s after. Mounting a tmpfs needs root, as CI runs (``.ci/run``): elsewhere the disk drill
fails and says so, never skips.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from benchmarks.conftest import FULL, RATES, REPO
from server.faults import DiskRoom
from server.settings import DISK_RESERVE_MB
from tests import objectstore
from tests.catalogs import Cluster
from tests.http.conftest import Server, start_server, stop_server

CLIENTS = 4
WRITE_SHARE = 0.2
TEXT_BYTES = 300  # an agent's fact, not a document
STEADY_S = 10.0 if FULL else 2.0  # load before the fault
AFTER_S = 10.0 if FULL else 2.0  # load once recovered
RECOVERY_LIMIT_S = 60.0
VOLUME_MB, GROWN_MB = 40, 400
HOLD_S = 5.0 if FULL else 2.0  # the disk held full
# Quick mode leaves the load this much room above the reserve (a ballast file takes the rest of
# the volume at the start); full mode the whole volume. Either way, a volume the load has not
# filled after FILL_LOAD_S gets a ballast that leaves it next to nothing.
HEADROOM_MB = None if FULL else 4
FILL_LOAD_S = 60.0 if FULL else 30.0
FILL_LIMIT_S = 30.0  # after the ballast
PAUSE_S = 10.0 if FULL else 3.0  # the object store stopped
FAULTS = ("disk_full", "catalog_restart", "object_store_pause", "worker_killed")
SPACE = "acme"


@dataclass(frozen=True)
class Answer:
    """One request of the load, as its client logged it (``benchmarks/fault_client.py``)."""

    began: float
    answered: float
    op: str  # remember or recall
    status: int  # 0: no answer (the connection failed)
    code: str | None  # the error's code, or the exception's name when no answer came
    retry_after: str | None
    id: str | None  # an acknowledged remember's id
    text: str | None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def label(self) -> str:
        if self.status == 0:
            return f"{self.op} no answer ({self.code})"
        return f"{self.op} {self.status}" + (f" {self.code}" if self.code else "")


class Load:
    """The client processes, started once, logging every answer to a file of their own."""

    def __init__(self, url: str, tokens: list[str], folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.paths = [folder / f"client-{i}.jsonl" for i in range(len(tokens))]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.processes = []
        for i, token in enumerate(tokens):
            command = {
                "url": url,
                "token": token,
                "space": SPACE,
                "seed": 1000 + i,
                "write_share": WRITE_SHARE,
                "text_bytes": TEXT_BYTES,
                "events": str(self.paths[i]),
            }
            self.processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.fault_client", json.dumps(command)],
                    cwd=REPO,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        for p in self.processes:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        self.began = time.time()
        self.answers: list[Answer] = []
        self._offsets = [0] * len(tokens)

    def read(self) -> list[Answer]:
        """The answers logged since the last read (whole lines only)."""
        new = []
        for i, path in enumerate(self.paths):
            try:
                with open(path, "rb") as f:
                    f.seek(self._offsets[i])
                    data = f.read()
            except FileNotFoundError:
                continue
            whole = data[: data.rfind(b"\n") + 1]
            self._offsets[i] += len(whole)
            new += [Answer(*json.loads(line)) for line in whole.splitlines() if line.strip()]
        self.answers += new
        return new

    def wait_for(self, wanted: Callable[[Answer], bool], limit_s: float) -> Answer | None:
        """The first answer logged (so far, or within ``limit_s``) that ``wanted`` accepts."""
        deadline = time.monotonic() + limit_s
        pending = self.answers
        while True:
            found = [a for a in pending if wanted(a)]
            if found:
                return min(found, key=lambda a: a.answered)
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)
            pending = self.read()

    def recovered(self, since: float, limit_s: float) -> dict[str, float | None]:
        """Seconds from ``since`` to the first successful write and the first successful recall
        answered after it (None: not within ``limit_s``)."""
        firsts: dict[str, float | None] = {"remember": None, "recall": None}
        deadline = time.monotonic() + limit_s
        pending = list(self.answers)
        while True:
            for a in pending:
                if a.ok and a.answered >= since and (firsts[a.op] is None or a.answered - since < firsts[a.op]):
                    firsts[a.op] = a.answered - since
            if all(v is not None for v in firsts.values()) or time.monotonic() > deadline:
                return firsts
            time.sleep(0.05)
            pending = self.read()

    def stop(self) -> list[dict]:
        counts = []
        for p in self.processes:
            try:
                assert p.stdin is not None
                p.stdin.write("stop\n")
                p.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
        for p in self.processes:
            assert p.stdout is not None
            line = p.stdout.readline()
            counts.append(json.loads(line) if line.strip() else {"exit": p.poll()})
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.read()
        return counts

    def kill(self) -> None:
        for p in self.processes:
            if p.poll() is None:
                p.kill()
                p.wait()


@dataclass
class World:
    """One fault's world: where its home is, what its server's environment adds, and the fault."""

    fault: str
    what: str
    home: Path
    inject: Callable[[Server, Load], dict]
    env: dict[str, str] = field(default_factory=dict)
    workers: int = 1


def _as_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.fail(f"the fault drill's {what} needs root, as CI runs it (.ci/run); run it as root")


def disk_world(tmp: Path, stack: ExitStack) -> World:
    _as_root("full disk mounts a small tmpfs and")
    volume = tmp / "volume"
    volume.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={VOLUME_MB}m,mode=0700", "tmpfs", str(volume)], check=True)
    stack.callback(subprocess.run, ["umount", "-l", str(volume)], check=False)
    home = volume  # the server's log lies beside it (start_server), off the volume
    ballast = volume / "fault-drill-ballast"  # another program's file, on the same volume
    filled_by = "load"
    if HEADROOM_MB is not None:
        _ballast(ballast, HEADROOM_MB << 20)
        filled_by = f"load, beside a ballast that left it {HEADROOM_MB} MiB above the reserve"

    def inject(server: Server, load: Load) -> dict:
        nonlocal filled_by
        refused = lambda a: a.op == "remember" and a.status == 507  # noqa: E731
        first = load.wait_for(refused, FILL_LOAD_S)
        if first is None:  # the home grows slower than this run has time for: another program fills the rest
            filled_by += f"; not full after {FILL_LOAD_S:g} s, a ballast took the rest"
            _ballast(ballast, 256 << 10)
            first = load.wait_for(refused, FILL_LIMIT_S)
        assert first is not None, f"the {VOLUME_MB} MiB volume never filled: no write was refused 507"
        start = first.answered
        time.sleep(max(0.0, start + HOLD_S - time.time()))
        subprocess.run(["mount", "-o", f"remount,size={GROWN_MB}m", str(volume)], check=True)
        return {"start": start, "end": time.time(), "filled_by": filled_by, "fill_s": round(start - load.began, 2)}

    what = f"ESFIS_HOME on a {VOLUME_MB} MiB tmpfs filled by the load, held full {HOLD_S:g} s, grown to {GROWN_MB} MiB"
    return World("disk_full", what, home, inject)


def _ballast(path: Path, leave: int) -> None:
    """Grow ``path`` until the volume has ``leave`` bytes free above esfis's reserve (its own
    rule, ``server.faults.DiskRoom``, at the default ``ESFIS_DISK_RESERVE_MB``)."""
    room = DiskRoom(path.parent, reserve_mb=DISK_RESERVE_MB).room()
    more = room.free - room.reserve - leave
    if more > 0:
        with open(path, "ab") as f:
            os.posix_fallocate(f.fileno(), f.seek(0, os.SEEK_END), more)


class DurableCluster(Cluster):
    """The suite's throwaway cluster, but with PostgreSQL's own durability (``fsync`` and
    ``synchronous_commit`` on, its defaults: what "acknowledged means durable" rests on there),
    and a restart."""

    durability = ""

    def restart(self) -> None:
        """A fast restart (sessions ended, a shutdown checkpoint, started again with the same
        options), waited for; its log to a file, or pg_ctl's output would never end."""
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.root / "data"),
            "-l",
            str(self.root / "log"),
            "-m",
            "fast",
            "-w",
            "-t",
            "60",
            "restart",
        )


def catalog_world(tmp: Path, stack: ExitStack) -> World:
    cluster = DurableCluster()
    stack.callback(cluster.stop)
    cluster.start()
    url = cluster.new_catalog()

    def inject(server: Server, load: Load) -> dict:
        start = time.time()
        cluster.restart()
        return {"start": start, "end": time.time()}

    what = "the catalog on PostgreSQL (fsync, synchronous_commit on), restarted: pg_ctl -m fast -w restart"
    return World("catalog_restart", what, tmp / "home", inject, env={"ESFIS_CATALOG": url})


def object_store_world(tmp: Path, stack: ExitStack) -> World:
    s3 = objectstore.S3Server()
    stack.callback(s3.stop)
    stack.callback(_signal, s3.process.pid, signal.SIGCONT)  # first: never leave it stopped
    bucket = s3.bucket()

    def inject(server: Server, load: Load) -> dict:
        start = time.time()
        os.kill(s3.process.pid, signal.SIGSTOP)
        try:
            time.sleep(PAUSE_S)
        finally:
            os.kill(s3.process.pid, signal.SIGCONT)
        return {"start": start, "end": time.time()}

    what = f"the partitions on S3 (moto), its process stopped (SIGSTOP) {PAUSE_S:g} s, then continued"
    env = {"ESFIS_VECTORS": f"s3://{bucket}/esfis", **s3.env}
    return World("object_store_pause", what, tmp / "home", inject, env=env)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _workers(root: int) -> set[int]:
    """The server's worker processes (spawned by uvicorn's supervisor; not its resource tracker)."""
    try:
        children = Path(f"/proc/{root}/task/{root}/children").read_text().split()
    except FileNotFoundError:
        return set()
    found = set()
    for pid in children:
        try:
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(int(pid))
        except FileNotFoundError:
            continue
    return found


def worker_world(tmp: Path, stack: ExitStack) -> World:
    def inject(server: Server, load: Load) -> dict:
        before = _workers(server.process.pid)
        assert len(before) == 2, f"esfis serve --workers 2 runs {len(before)} workers"
        victim = min(before)
        start = time.time()
        os.kill(victim, signal.SIGKILL)
        replaced = serving = None
        deadline = time.monotonic() + RECOVERY_LIMIT_S
        while time.monotonic() < deadline and serving is None:
            now = _workers(server.process.pid)
            if replaced is None and len(now - before) >= 1:
                replaced = time.time() - start
            if replaced is not None:
                try:
                    health = httpx.get(f"{server.url}/healthz", timeout=5).json()
                except httpx.HTTPError:
                    health = {}
                if health.get("workers") == 2 and health.get("model") == "ready":
                    serving = time.time() - start
            time.sleep(0.05)
        return {
            "start": start,
            "end": start,  # the fault is the kill; the window runs until the new worker serves
            "window_end": start + (serving if serving is not None else RECOVERY_LIMIT_S),
            "worker_replaced_s": None if replaced is None else round(replaced, 2),
            "worker_serving_s": None if serving is None else round(serving, 2),
        }

    what = "esfis serve --workers 2, one worker SIGKILLed; uvicorn's supervisor starts another"
    return World("worker_killed", what, tmp / "home", inject, workers=2)


WORLDS: dict[str, Callable[[Path, ExitStack], World]] = {
    "disk_full": disk_world,
    "catalog_restart": catalog_world,
    "object_store_pause": object_store_world,
    "worker_killed": worker_world,
}


def _phases(answers: list[Answer], start: float, end: float) -> dict[str, list[Answer]]:
    """Each answer in the phase it arrived in: before the fault, during it, after it."""
    phases: dict[str, list[Answer]] = {"before": [], "during": [], "after": []}
    for a in answers:
        phases["before" if a.answered < start else "during" if a.answered < end else "after"].append(a)
    return phases


def _read_back(server: Server, acknowledged: list[Answer]) -> list[dict]:
    """Every acknowledged write, read from a fresh server: those missing or changed."""
    lost = []
    with server.client(server.agent_token("fault-drill-check", space=SPACE)) as client:
        for a in acknowledged:
            got = client.get(f"/v1/memories/{a.id}", params={"space": SPACE})
            if got.status_code != 200 or got.json().get("text") != a.text:
                lost.append({"id": a.id, "status": got.status_code, "answer": got.text[:200]})
    return lost


def _unhandled(log: Path) -> list[str]:
    """The tracebacks a server's log holds, each named by its exception and the line before it."""
    lines = log.read_text(errors="replace").splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            ending = next((t for t in lines[i + 1 :] if t.strip() and not t.startswith((" ", "\t"))), "")
            before = lines[i - 1].strip() if i else ""
            found.append(f"{before} … {ending.strip()}"[:300])
    return found


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_drill(benchmark, tmp_path, fault):
    work = tmp_path / "work"
    folder = work / SPACE
    folder.mkdir(parents=True)
    with ExitStack() as stack:
        world = WORLDS[fault](tmp_path, stack)
        server = start_server(world.home, work, workers=world.workers, **RATES, **world.env)
        logs = [server.log]
        marks: dict = {}
        try:
            server.cli("space", "add", "--name", SPACE, str(folder))
            tokens = [server.agent_token("fault-drill", space=SPACE) for _ in range(CLIENTS)]
            load = Load(server.url, tokens, tmp_path / "answers")
            stack.callback(load.kill)

            def drill() -> None:
                time.sleep(STEADY_S)
                load.read()
                marks.update(world.inject(server, load))
                marks["recovered"] = load.recovered(marks["end"], RECOVERY_LIMIT_S)
                time.sleep(AFTER_S)

            try:
                benchmark.pedantic(drill, rounds=1, iterations=1)
            finally:
                client_counts = load.stop()
        finally:
            stop_server(server)
        answers = sorted(load.answers, key=lambda a: a.answered)
        acknowledged = [a for a in answers if a.op == "remember" and a.ok]
        again = start_server(world.home, work, **RATES, **world.env)  # a fresh server on the same home
        logs.append(again.log)
        try:
            lost = _read_back(again, acknowledged)
        finally:
            stop_server(again)
        checked = again.cli("check", "--json", check=False)
        try:
            check = json.loads(checked.stdout)
        except ValueError:
            check = {"whole": None, "error": (checked.stdout + checked.stderr)[-500:]}

    start, end = marks["start"], marks["end"]
    window_end = marks.get("window_end", end)
    phases = _phases(answers, start, window_end)
    recovered = marks["recovered"]
    both = None if None in recovered.values() else max(recovered.values())
    unhandled = [u for log in logs for u in _unhandled(log)]
    no_retry_after = [a.label for a in answers if a.status in (503, 507) and not a.retry_after]
    across = [a for a in answers if a.began < window_end and a.answered >= start]  # in flight at some moment of it
    benchmark.extra_info.update(
        {
            "fault": fault,
            "what": world.what,
            "workers": world.workers,
            "catalog": "postgresql" if "ESFIS_CATALOG" in world.env else "sqlite",
            "vectors": "s3" if "ESFIS_VECTORS" in world.env else "local",
            "clients": CLIENTS,
            "write_share": WRITE_SHARE,
            "text_bytes": TEXT_BYTES,
            "steady_s": STEADY_S,
            "fault_s": round(end - start, 2),
            "window_s": round(window_end - start, 2),
            **{k: v for k, v in marks.items() if k not in ("start", "end", "window_end", "recovered")},
            "answers": {phase: dict(Counter(a.label for a in got).most_common()) for phase, got in phases.items()},
            "answers_across": dict(Counter(a.label for a in across).most_common()),
            "longest_answer_across_s": round(max((a.answered - a.began for a in across), default=0.0), 2),
            "recovered_write_s": None if recovered["remember"] is None else round(recovered["remember"], 2),
            "recovered_recall_s": None if recovered["recall"] is None else round(recovered["recall"], 2),
            "time_to_recover_s": None if both is None else round(both, 2),
            "requests": len(answers),
            "acknowledged": len(acknowledged),
            "lost": len(lost),
            "lost_examples": lost[:20],
            "answers_500": sum(1 for a in answers if a.status == 500),
            "unhandled_in_log": len(unhandled),
            "unhandled_examples": sorted(Counter(unhandled).items(), key=lambda kv: -kv[1])[:10],
            "no_retry_after": len(no_retry_after),
            "check_whole": check.get("whole"),
            "check_found": dict(Counter(f.get("kind") for f in check.get("found", []) if isinstance(f, dict))),
            "clients_counts": client_counts,
        }
    )
    print(f"fault drill {fault}:", json.dumps(benchmark.extra_info))  # kept in the run's log as well
    assert lost == [], f"{len(lost)} of {len(acknowledged)} acknowledged writes lost: {lost[:5]}"
    assert benchmark.extra_info["answers_500"] == 0, Counter(a.label for a in answers if a.status == 500)
    assert unhandled == [], unhandled[:5]
    assert no_retry_after == [], Counter(no_retry_after)
    assert both is not None, f"not answering again within {RECOVERY_LIMIT_S:g} s of the fault's end: {recovered}"
