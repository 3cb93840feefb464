"""Faults: a real process killed (SIGKILL, through a failpoint: ``indexing.failpoints``) at each
step of remember, replace, forget and import, then the store reopened as the next ``esfis``
command would open it. Whatever the step, the reopened store is whole:

- the catalog and the partitions agree: each partition holds exactly the memories the catalog
  holds as not forgotten there, once each, and its counts say so;
- no file under ESFIS_HOME holds the text (or its sha256) of a memory that was being forgotten,
  and the id reads as forgotten;
- a write either happened whole (readable, recalled) or left nothing: no text that no command
  can find or forget;
- no journal or intent is left behind.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from indexing.embedding.testing import HashingEmbedder
from indexing.partitions.store import VectorStore
from server.bulk.importer import import_stream
from server.catalog import open_catalog
from server.errors import MemoryNotFound
from server.facade import Esfis, Parts, open_service
from server.spaces import partition_key
from tests.catalogs import settings_for
from tests.conftest import ESFIS_BIN, MovableClock, cli_env
from tests.helpers import files_containing

ROOT = Path(__file__).resolve().parents[1]
SECRET = "the vault unseal key is tangerine-otter-4471"
FILLER = [f"acme standing fact {i} about the build pipeline" for i in range(40)]

# One verb, through the façade, in a process of its own; the failpoint comes from the
# environment the way every esfis command reads it (Settings.from_env).
_VERB = textwrap.dedent(
    """
    import dataclasses, json, sys
    from indexing.embedding.testing import HashingEmbedder
    from server.facade import open_service
    from server.settings import Settings

    verb, space, *args = sys.argv[1:]
    svc = open_service(dataclasses.replace(Settings.from_env(), model=None), embedder=HashingEmbedder())
    caller = svc.caller("worker", space=space)
    if verb == "remember":
        print(svc.remember(caller, args[0]).id, flush=True)
    elif verb == "replace":
        print(svc.replace(caller, args[0], args[1]).id, flush=True)
    elif verb == "forget":
        svc.forget(caller, args[0])
    elif verb == "import":
        print(svc.operator.import_jsonl(open(args[0], "rb"), batch_size=int(args[1])).summary(), flush=True)
    elif verb in ("import-creating", "import-spilling"):
        if verb == "import-spilling":  # a window of a few rows: every thin space spills
            import server.bulk.grouping
            server.bulk.grouping.WINDOW_BYTES = 8000
        report = svc.operator.import_jsonl(open(args[0], "rb"), batch_size=int(args[1]), create_spaces=True)
        print(report.summary(), flush=True)
    svc.close()
    """
)


def run_verb(home: Path, failpoint: str | None, verb: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = cli_env(home, **({"ESFIS_FAILPOINT": failpoint} if failpoint else {}))
    return subprocess.run(
        [sys.executable, "-c", _VERB, verb, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def killed(home: Path, failpoint: str, verb: str, *args: str) -> None:
    done = run_verb(home, failpoint, verb, *args)
    assert done.returncode == -signal.SIGKILL, f"{failpoint} was not reached: rc {done.returncode} {done.stderr}"


def reopen(home: Path) -> Esfis:
    """The store as the next esfis command opens it."""
    return open_service(settings_for(home), embedder=HashingEmbedder())


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def id_of(svc: Esfis, text: str) -> str | None:
    row = svc._parts.catalog.one("SELECT id FROM memories WHERE digest = ?", (digest(text),))
    return None if row is None else row["id"]


def assert_whole(svc: Esfis, home: Path, *, gone: tuple[str, ...] = ()) -> None:
    """The invariants every test here ends with (see the module's docstring)."""
    catalog, store = svc._parts.catalog, svc._parts.store
    keys = {r["partition"] for r in catalog.all("SELECT DISTINCT partition FROM memories")}
    # A partition no catalog entry names holds nothing: a write killed before its first commit
    # into a new partition leaves its table or file, emptied by the sweep, for the next write.
    for key in set(store.partitions()) - keys:
        assert store.row_ids(key) == [], f"a partition no catalog entry names holds rows: {key}"
    for key in keys:
        stored = store.row_ids(key)
        assert len(stored) == len(set(stored)), f"a duplicate row in {key}"
        live = {
            r["id"]: r["superseded_by"]
            for r in catalog.all(
                "SELECT id, superseded_by FROM memories WHERE partition = ? AND forgotten_at IS NULL", (key,)
            )
        }
        assert set(stored) == set(live), f"{key}: partition {len(stored)} rows, catalog {len(live)} live"
        counts = catalog.one("SELECT live, superseded FROM partitions WHERE key = ?", (key,))
        expected = (len(live), sum(1 for s in live.values() if s is not None))
        assert (tuple(counts) if counts else (0, 0)) == expected, f"{key}: counts {tuple(counts)} != {expected}"
        for id_ in stored:
            assert store.text(key, id_)  # every stored row is a memory someone can read and forget
    assert not catalog.all("SELECT * FROM forgetting"), "an unfinished forget"
    assert not dead_journals(home), "a dead process's journal left behind"
    for text in gone:
        assert files_containing(home, text) == [], f"the text of a forgotten memory is on disk: {text!r}"
        for hexed in (digest(text), digest(text)[:16]):
            assert files_containing(home, hexed) == [], "the digest of a forgotten memory is on disk"


def dead_journals(home: Path) -> list[Path]:
    """Journals no live process holds (each holds its own locked while it lives)."""
    dead = []
    for path in (home / "imports").glob("*"):
        if path.name == "lock":
            continue
        with open(path, "rb") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            dead.append(path)
    return dead


@pytest.fixture
def acme(fake_service: Esfis, home: Path) -> str:
    """A store with acme's filler and the secret in one fragment (a plain delete would leave the
    secret in its data file), closed: the id of the secret."""
    fake_service.operator.create_space("acme")
    fake_service.operator.create_space("globex")
    lines = [json.dumps({"text": t, "space": "acme"}) for t in [*FILLER[:20], SECRET, *FILLER[20:]]]
    assert import_stream(fake_service._parts, lines).imported == len(lines)
    secret = id_of(fake_service, SECRET)
    assert secret is not None and files_containing(home, SECRET)
    fake_service.close()
    return secret


# -- forget --------------------------------------------------------------------------------

FORGET_STEPS = ["forget:after-intent", "purge:after-delete", "forget:after-purge", "forget:after-checkpoint"]


@pytest.mark.parametrize("failpoint", FORGET_STEPS)
def test_forget_killed_at_any_step_is_finished_on_the_next_open(home, acme, failpoint):
    killed(home, failpoint, "forget", "acme", acme)
    svc = reopen(home)
    try:
        row = svc._parts.catalog.one("SELECT forgotten_at, digest, labels, key FROM memories WHERE id = ?", (acme,))
        assert row["forgotten_at"] is not None and row["digest"] is None and row["key"] is None
        with pytest.raises(MemoryNotFound):
            svc.get(svc.caller("cli", space="acme"), acme)
        assert_whole(svc, home, gone=(SECRET,))
        recalled = svc.recall(svc.caller("cli", space="acme"), "vault unseal key", limit=100).memories
        assert [m.text for m in recalled if m.text == SECRET] == [] and len(recalled) == len(FILLER)
    finally:
        svc.close()


def unrecovered(home: Path) -> Esfis:
    """A service opened without the recovery ``open_service`` runs: one that was already up
    when another process died."""
    settings = settings_for(home)
    embedder = HashingEmbedder()
    store = VectorStore(settings.vectors_path, model=embedder.name, dimension=embedder.dimension)
    return Esfis(
        Parts.over(catalog=open_catalog(settings), store=store, embedder=embedder, clock=MovableClock(), home=home)
    )


def test_a_memory_being_forgotten_is_never_read_before_its_forget_is_finished(home, acme):
    killed(home, "forget:after-intent", "forget", "acme", acme)
    svc = unrecovered(home)
    try:
        assert svc._parts.store.text(partition_key("acme"), acme) == SECRET and files_containing(home, SECRET)
        caller = svc.caller("cli", space="acme")
        with pytest.raises(MemoryNotFound):
            svc.get(caller, acme)
        # (not the text itself as the query: deliveries record their query, by design)
        assert SECRET not in [m.text for m in svc.recall(caller, "vault unseal key", limit=100).memories]
        with pytest.raises(MemoryNotFound):
            svc.replace(caller, acme, "the key was rotated")
    finally:
        svc.close()
    reopen(home).close()
    assert files_containing(home, SECRET) == []


def test_a_stale_forget_is_finished_by_the_next_forget_of_a_running_service(home, acme):
    killed(home, "forget:after-intent", "forget", "acme", acme)
    svc = unrecovered(home)
    try:
        caller = svc.caller("cli", space="acme")
        other = svc.remember(caller, "a note to forget")
        svc.forget(caller, other.id)
        assert files_containing(home, SECRET), "an intent a minute young may be a live forget's"
        with svc._parts.catalog.transaction() as tx:
            tx.execute("UPDATE forgetting SET since = since - 120000000")  # two minutes old
        another = svc.remember(caller, "another note to forget")
        svc.forget(caller, another.id)
        assert files_containing(home, SECRET) == []
        assert_whole(svc, home, gone=(SECRET, "a note to forget", "another note to forget"))
    finally:
        svc.close()


# -- remember, replace, import ---------------------------------------------------------------

WRITE_STEPS = ["write:after-journal", "write:after-vectors", "write:after-commit"]
NEW = "acme rotates its signing keys every ninety days"


@pytest.mark.parametrize("failpoint", WRITE_STEPS)
def test_remember_killed_at_any_step_is_whole_or_leaves_nothing(home, acme, failpoint):
    killed(home, failpoint, "remember", "acme", NEW)
    svc = reopen(home)
    try:
        caller = svc.caller("cli", space="acme")
        new = id_of(svc, NEW)
        if failpoint == "write:after-commit":
            assert_whole(svc, home)
            assert new is not None and svc.get(caller, new).text == NEW
            assert NEW in [m.text for m in svc.recall(caller, "signing keys rotation", limit=5).memories]
        else:
            assert new is None
            assert_whole(svc, home, gone=(NEW,))
    finally:
        svc.close()


@pytest.mark.parametrize("failpoint", WRITE_STEPS)
def test_replace_killed_at_any_step_is_whole_or_leaves_nothing(home, acme, failpoint):
    svc = reopen(home)
    old = id_of(svc, FILLER[0])
    svc.close()
    killed(home, failpoint, "replace", "acme", old, NEW)
    svc = reopen(home)
    try:
        caller = svc.caller("cli", space="acme")
        new = id_of(svc, NEW)
        recalled = [m.id for m in svc.recall(caller, FILLER[0], limit=100).memories]
        if failpoint == "write:after-commit":
            assert_whole(svc, home)
            assert new is not None and svc.get(caller, old).superseded_by == new
            assert new in recalled and old not in recalled  # the catalog's word, whatever the table says
        else:
            assert new is None and svc.get(caller, old).superseded_by is None and old in recalled
            assert_whole(svc, home, gone=(NEW,))
    finally:
        svc.close()


@pytest.mark.parametrize("failpoint", ["write:after-vectors@3", "write:after-commit@3"])
def test_import_killed_mid_way_reruns_to_each_row_once(home, acme, tmp_path, failpoint):
    rows = [{"text": f"globex import row {i}", "space": "globex", "key": f"g{i}"} for i in range(50)]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    killed(home, failpoint, "import", "globex", str(source), "10")
    svc = reopen(home)
    try:
        assert_whole(svc, home)
        partial = svc._parts.catalog.one("SELECT count(*) AS n FROM memories WHERE space = 'globex'")["n"]
        assert partial == (20 if failpoint.startswith("write:after-vectors") else 30)
    finally:
        svc.close()
    done = run_verb(home, None, "import", "globex", str(source), "10")
    assert done.returncode == 0 and done.stdout.startswith(f"imported {50 - partial}, skipped {partial}, failed 0")
    svc = reopen(home)
    try:
        assert_whole(svc, home)
        keys = svc._parts.catalog.all("SELECT key, count(*) AS n FROM memories WHERE space = 'globex' GROUP BY key")
        assert len(keys) == 50 and {k["n"] for k in keys} == {1}
    finally:
        svc.close()


@pytest.mark.parametrize(
    ("verb", "failpoint"),
    [
        ("import-creating", "import:after-spaces@2"),
        ("import-creating", "write:after-vectors@3"),
        ("import-creating", "write:after-commit@3"),
        ("import-spilling", "import:after-spill@3"),
        ("import-spilling", "write:after-commit@2"),
    ],
)
def test_a_thin_spread_import_that_creates_its_spaces_killed_at_each_stage_reruns_to_each_row_once(
    home, acme, tmp_path, verb, failpoint
):
    """Thirty tenants, two rows each, batches of ten (five spaces a batch), ``--create-spaces``:
    killed after a batch made its spaces, after vectors, after a commit, the re-run creates the
    rest, writes each row once, and leaves every partition whole. ``import-spilling``: the rows
    come round robin and the window holds a few, so thin spaces spill to the import's unlinked
    files; killed after a spill or after a drained batch's commit, the same holds, and no spill
    file is left in the data folder. Until the re-run, the spaces the catalog holds are those
    holding rows: a batch's spaces are committed with its rows."""
    rows = [
        {"text": f"tenant {t} fact {i}", "space": f"tenant-{t:02d}", "key": f"t{t}-{i}"}
        for i in range(2)
        for t in range(30)
    ]
    if verb == "import-creating":
        rows.sort(key=lambda r: r["space"])
    source = tmp_path / "tenants.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    killed(home, failpoint, verb, "acme", str(source), "10")
    assert not list(home.glob("esfis-import-*"))
    svc = reopen(home)
    try:
        assert_whole(svc, home)
        made = {s.name for s in svc.operator.spaces() if s.name.startswith("tenant-")}
        written = {
            r["space"]
            for r in svc._parts.catalog.all("SELECT DISTINCT space FROM memories WHERE space LIKE 'tenant-%'")
        }
        # No row in a space the catalog does not know, and no space without its rows: a batch
        # creates its spaces in its rows' transaction, so a kill before its commit leaves neither.
        assert written == made
    finally:
        svc.close()
    done = run_verb(home, None, verb, "acme", str(source), "10")
    assert done.returncode == 0 and ", failed 0" in done.stdout, done.stderr
    svc = reopen(home)
    try:
        assert_whole(svc, home)
        assert {s.name for s in svc.operator.spaces() if s.name.startswith("tenant-")} == {
            f"tenant-{t:02d}" for t in range(30)
        }
        keys = svc._parts.catalog.all(
            "SELECT space, key, count(*) AS n FROM memories WHERE space LIKE 'tenant-%' GROUP BY space, key"
        )
        assert len(keys) == 60 and {k["n"] for k in keys} == {1}
    finally:
        svc.close()


def test_a_services_write_journal_is_empty_between_writes_and_gone_once_closed(fake_service, home):
    fake_service.operator.create_space("acme")
    caller = fake_service.caller("cli", space="acme")
    for i in range(3):
        fake_service.remember(caller, f"note {i}")
    journals = list((home / "imports").glob("writes-*.json"))
    assert len(journals) == 1 and journals[0].stat().st_size == 0
    assert not dead_journals(home)  # held by this process
    fake_service.close()
    assert not list((home / "imports").glob("writes-*"))


def test_esfis_forget_killed_mid_purge_is_finished_by_the_next_command(home, tmp_path, real_embedder):
    """Through the real command line: ESFIS_FAILPOINT as an operator would set it."""
    folder = tmp_path / "acme"
    folder.mkdir()

    def esfis(*argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [ESFIS_BIN, *argv], cwd=folder, env=cli_env(home, **extra), capture_output=True, text=True, timeout=120
        )

    assert esfis("space", "add", str(folder)).returncode == 0
    assert esfis("remember", "acme fact about the build").returncode == 0
    remembered = esfis("remember", SECRET)
    assert remembered.returncode == 0, remembered.stderr
    secret = remembered.stdout.strip()
    assert esfis("forget", secret, ESFIS_FAILPOINT="purge:after-delete").returncode == -signal.SIGKILL
    assert files_containing(home, SECRET)  # the kill left it on disk, deleted but not rewritten
    after = esfis("get", secret)  # the next command, whatever it is, finishes the forget first
    assert after.returncode == 3 and after.stderr == f"esfis: error: no memory {secret}\n"
    assert files_containing(home, SECRET) == []
    assert files_containing(home, digest(SECRET)) == []
