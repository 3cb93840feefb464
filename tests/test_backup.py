"""Backups you can restore (``server.bulk.backup``): ``esfis backup DIR`` while others write, and
``esfis restore DIR`` into an empty home.

What is proven here, each on a real LanceDB store and a real catalog, with real ``esfis``
processes for the concurrency and the kills:

- a restored home answers every recall as the source did at backup time (the real model: ids,
  order, scores within 1e-6), with every catalog table as it was (spaces, folders, policies,
  grants, trusted sources, tokens, runs, deliveries: whatever tables the catalog has);
- a backup taken while four processes remember, replace, forget and import is whole: its
  catalog and partitions agree row for row (validity included), it holds no text outside what
  its catalog names, and restored with ``--forgets-from`` no forgotten text comes back;
- a forget racing the backup, between the catalog copy and the partition's read, and in the
  middle of the read (its purge deletes the files being read), leaves the backup whole;
- kill -9 at each step of a backup and of a restore: never taken for a complete one, the source
  untouched, the target empty, and a re-run completes;
- a backup touches only what it made: a folder it did not mark is never cleared, a path through
  a symbolic link or inside the home is refused, and a second backup into a folder while one
  writes there is a conflict;
- a backup's manifest is keyed: a catalog changed and its digest written again is refused, and
  so is a restore without the key, with another key, or of a manifest whose MAC was removed;
- a damaged backup (a part missing, cut short or changed) is one error line, and the refused
  restore leaves no staging folder behind;
- damage and wrong targets are refused.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from indexing.embedding.testing import HashingEmbedder
from indexing.partitions.location import open_dataset
from indexing.partitions.store import table_name
from server.bulk.backup import forget as forget_in
from server.bulk.journal import sweep_every_partition
from server.clock import from_micros
from server.errors import BackupDamaged, BackupNotTrusted, FolderNotEmpty, InvalidInput, MemoryNotFound
from server.facade import open_service, restore_home
from server.memories.input import digest_of
from tests.catalogs import settings_for
from tests.conftest import ESFIS_BIN, MovableClock, cli_env
from tests.helpers import files_containing
from tests.test_concurrent_processes import _start
from tests.test_faults import ROOT, assert_whole, reopen, run_verb

# esfis backup copies a SQLite catalog here; PostgreSQL's backup is tests/test_backup_postgres.py.
pytestmark = pytest.mark.sqlite


def esfis(home: Path, *argv: str, failpoint: str | None = None, **popen) -> subprocess.CompletedProcess[str]:
    env = cli_env(home, **({"ESFIS_FAILPOINT": failpoint} if failpoint else {}))
    return subprocess.run([ESFIS_BIN, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, **popen)


def tables(db: Path) -> dict[str, list[tuple]]:
    """Every table of a catalog file, rows sorted: what a restore must bring back whole."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' AND name != 'forgetting'"
            )
        ]
        return {n: sorted(conn.execute(f"SELECT * FROM {n}").fetchall(), key=repr) for n in names}


def assert_backup_whole(folder: Path, *, gone: tuple[str, ...] = ()) -> dict:
    """A backup folder is complete, and its catalog and partitions agree row for row: every
    memory the catalog names as not forgotten is in its partition once, with the text its
    digest names and the catalog's validity; no row is in a partition the catalog does not name.
    (Read only: opening it as a catalog or a store would write to it.)"""
    manifest = json.loads((folder / "manifest.json").read_text())
    assert not (folder / "INCOMPLETE").exists()
    named = {r["id"]: r for r in backup_rows(folder, "SELECT * FROM memories WHERE forgotten_at IS NULL")}
    stored = {}
    for key in {r["partition"] for r in named.values()}:
        for row in open_dataset(str(folder / "vectors" / f"{table_name(key)}.lance")).to_table().to_pylist():
            assert row["id"] not in stored, f"a duplicate row in {key}"
            stored[row["id"]] = (key, row)
    assert set(stored) == set(named), "the backup's partitions and catalog disagree"
    for id_, (key, row) in stored.items():
        entry = named[id_]
        assert entry["partition"] == key and entry["digest"] == digest_of(row["text"])
        assert (row["valid_from"], row["valid_until"]) == (entry["valid_from"], entry["valid_until"]), id_
    assert manifest["memories"] == len(named)
    for text in gone:
        assert files_containing(folder, text) == [], f"a forgotten text is in the backup: {text!r}"
    return manifest


def backup_rows(folder: Path, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
    with sqlite3.connect(f"file:{folder / 'esfis.db'}?mode=ro", uri=True) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute(sql, params).fetchall()


def recalls(svc, queries: dict[str | None, list[str]], *, limit: int = 10) -> dict:
    """(caller's space, query) → [(id, score)], best first."""
    answers = {}
    for space, asked in queries.items():
        caller = svc.caller("claude-code", space=space) if space else svc.caller("claude-code")
        for query in asked:
            answers[(space, query)] = [(m.id, m.score) for m in svc.recall(caller, query, limit=limit).memories]
    return answers


def assert_same_answers(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for asked, answer in expected.items():
        assert [i for i, _ in got[asked]] == [i for i, _ in answer], asked
        assert all(abs(a - b) <= 1e-6 for (_, a), (_, b) in zip(got[asked], answer)), asked
    assert any(expected.values())


# -- a restore answers as the source did ------------------------------------------------------

QUERIES = {
    "acme": ["how does login work?", "where is the staging database password"],
    "acme/platform": ["how does login work?", "deploy schedule"],
    "globex": ["how does login work?", "deploy schedule"],
    None: ["what do I prefer for reviews?"],
}


def test_restored_home_answers_every_recall_as_the_source_did_at_backup_time(service, home, tmp_path, clock):
    """The real model, several spaces, a policy, a grant, a trusted source, tokens, runs and
    deliveries: after a restore, recall gives the same ids in the same order with the same
    scores, and every catalog table is as it was."""
    for name in ("acme", "acme/platform", "globex"):
        service.operator.create_space(name)
    facts = {
        "acme": [
            "Acme authentication uses Auth0",
            "the staging database password is in vault secret/acme-stg",
            "Acme deploys on Fridays",
        ],
        "acme/platform": ["the platform API gateway is Kong", "platform deploys go out every Tuesday"],
        "globex": ["Globex authentication uses Clerk", "Globex deploys on Mondays"],
    }
    ids = {}
    for space, texts in facts.items():
        for text in texts:
            ids[text] = service.remember(service.caller("claude-code", space=space), text, labels=["source:slack"]).id
    service.remember(service.caller("claude-code"), "I prefer small pull requests for reviews", personal=True)
    service.replace(
        service.caller("claude-code", space="acme"), ids["Acme deploys on Fridays"], "Acme deploys on Thursdays now"
    )
    service.forget(service.caller("claude-code", space="globex"), ids["Globex deploys on Mondays"])
    clock.advance(minutes=1)
    service.operator.set_policy("cursor", "acme", "deny")
    service.operator.add_grant("acme/platform", "acme")
    service.operator.trust("source:github")
    service.operator.create_token(operator=True)
    service.operator.create_token(ai="claude-code", space="acme")
    service.share(service.caller("claude-code", space="acme"), [ids["Acme authentication uses Auth0"]])
    before = recalls(service, QUERIES)
    catalog_then = tables(home / "esfis.db")

    report = service.operator.backup(tmp_path / "backup")
    assert report.memories == 8 and report.taken_at == clock()
    # The source goes on: none of this is in the backup.
    service.remember(service.caller("claude-code", space="acme"), "Acme login moved to Okta")
    service.forget(service.caller("claude-code", space="acme"), ids["Acme authentication uses Auth0"])

    restored = tmp_path / "restored"
    done = restore_home(tmp_path / "backup", settings_for(restored), key_file=home / "backup.key")
    assert (done.memories, done.forgets_applied) == (8, 0)
    assert tables(restored / "esfis.db") == catalog_then
    svc = open_service(settings_for(restored), embedder=service._parts.embedder, clock=clock)
    try:
        assert_whole(svc, restored)
        assert_same_answers(recalls(svc, QUERIES), before)
        denied = svc.recall(svc.caller("cursor", space="acme"), "how does login work?").memories
        assert [m.space for m in denied if m.space == "acme"] == []  # the policy came back too
        assert svc.get(
            svc.caller("claude-code", space="acme"), ids["Acme authentication uses Auth0"]
        ).labels.origin == ("source:slack",)
    finally:
        svc.close()


def test_restore_with_forgets_from_forgets_again_what_the_live_home_forgot(fake_service, home, tmp_path):
    """A backup made before a forget holds the text; restored with the live home's catalog,
    the memory is forgotten again and its text is in no file of the restored home."""
    fake_service.operator.create_space("acme")
    caller = fake_service.caller("cli", space="acme")
    secret = fake_service.remember(caller, "the vault unseal key is tangerine-otter-4471")
    kept = fake_service.remember(caller, "acme builds with bazel")
    fake_service.operator.backup(tmp_path / "backup")
    fake_service.forget(caller, secret.id)
    assert files_containing(tmp_path / "backup", secret.text), "a backup made before a forget holds the text"

    plain = tmp_path / "plain"
    restore_home(tmp_path / "backup", settings_for(plain), key_file=home / "backup.key")
    assert files_containing(plain, secret.text)  # without the live catalog, the backup's world comes back

    restored = tmp_path / "restored"
    report = restore_home(tmp_path / "backup", settings_for(restored), forgets_from=str(home))
    assert report.forgets_applied == 1
    svc = reopen(restored)
    try:
        with pytest.raises(MemoryNotFound):
            svc.get(svc.caller("cli", space="acme"), secret.id)
        assert svc.get(svc.caller("cli", space="acme"), kept.id).text == kept.text
        assert_whole(svc, restored, gone=(secret.text,))
    finally:
        svc.close()


# -- while four processes write ----------------------------------------------------------------


def test_backup_while_four_processes_write_is_whole_and_restores_the_source_at_its_time(fake_service, home, tmp_path):
    """Four real processes remember, replace, forget, recall and import while a real ``esfis
    backup`` runs. The backup is whole; restored with ``--forgets-from`` it is whole and holds
    no forgotten text; and its recalls at the backup's time equal the source's then.

    The source at the backup's time is rebuilt as a reference: the backup's catalog (the copy
    taken at that time) over the source's partitions as they are afterwards (the texts and
    vectors the source holds), less the rows that catalog does not name (writes that had not
    committed then: a recall never returns them, though while a write is in flight its row
    counts in its partition's BM25 statistics), with every forget since applied to both."""
    fake_service.operator.create_space("acme")
    fake_service.operator.create_space("globex")
    for space in ("acme", "globex"):
        caller = fake_service.caller("seed", space=space)
        for i in range(60):
            fake_service.remember(caller, f"seed note {i} about the {space} build")
    fake_service.close()
    workers = [_start(w, home) for w in range(4)]
    for process in workers:
        process.stdin.write("go\n")
        process.stdin.flush()
    time.sleep(1.5)
    made = esfis(home, "backup", str(tmp_path / "backup"))
    logs = []
    for process in workers:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        logs.append(json.loads(out.strip().splitlines()[-1]))
    assert made.returncode == 0, made.stderr
    assert [e for log in logs for e in log["errors"]] == []
    forgotten = [t for log in logs for _, t in log["forgotten"]]
    assert forgotten and sum(len(log["replaced"]) for log in logs) and sum(len(log["written"]) for log in logs)

    source = reopen(home)
    try:
        taken = assert_backup_whole(tmp_path / "backup")["taken_at_micros"]
        before = {
            r["id"] for r in source._parts.catalog.all("SELECT id FROM memories WHERE forgotten_at < ?", (taken,))
        }
        gone_before = [t for log in logs for i, t in log["forgotten"] if i in before]
        assert_backup_whole(tmp_path / "backup", gone=tuple(gone_before))
        forgotten_ids = {
            r["id"]: r["forgotten_at"]
            for r in source._parts.catalog.all("SELECT id, forgotten_at FROM memories WHERE forgotten_at IS NOT NULL")
        }
    finally:
        source.close()

    restored = tmp_path / "restored"
    done = esfis(restored, "restore", str(tmp_path / "backup"), "--forgets-from", str(home))
    assert done.returncode == 0, done.stderr
    reference = tmp_path / "reference"
    reference.mkdir()
    shutil.copy(tmp_path / "backup" / "esfis.db", reference / "esfis.db")
    shutil.copytree(home / "vectors", reference / "vectors")
    at = MovableClock(from_micros(taken))
    ref = open_service(settings_for(reference), embedder=HashingEmbedder(), clock=at)
    svc = open_service(settings_for(restored), embedder=HashingEmbedder(), clock=at)
    try:
        forget_in(ref._parts.catalog, ref._parts.store, forgotten_ids)
        sweep_every_partition(ref._parts.catalog, ref._parts.store, written_before=2**62)
        assert_whole(svc, restored, gone=tuple(forgotten))
        # The hashing embedder gives many texts one vector ("note 5" and "note 6" may share a
        # bucket), and equal scores go by the partition's row order, which a replace changes
        # (Lance rewrites the row at the end): the reference's rows are put in the backup's order.
        # Their validity is the catalog copy's (the catalog has the last word on validity): a
        # replace that began before the copy and committed after it closed the row since.
        until = {r["id"]: r["valid_until"] for r in ref._parts.catalog.all("SELECT id, valid_until FROM memories")}
        for key in ref._parts.store.partitions():
            order = {i: n for n, i in enumerate(svc._parts.store.row_ids(key))}
            batches = list(ref._parts.store.stream(key))
            if not batches:
                continue
            rows = pa.Table.from_batches(batches)
            rows = rows.take(sorted(range(rows.num_rows), key=lambda n: order[rows.column("id")[n].as_py()]))
            rows = rows.set_column(
                rows.schema.get_field_index("valid_until"),
                "valid_until",
                pa.array([until[i] for i in rows.column("id").to_pylist()], type=pa.int64()),
            )
            ref._parts.store.drop(key)
            ref._parts.store.create_from(key, iter(rows.to_batches()))
        queries = {s: [f"notes about the {s} build", f"worker 1 note about the {s} build"] for s in ("acme", "globex")}
        queries[None] = ["notes about the build"]
        assert_same_answers(recalls(svc, queries, limit=20), recalls(ref, queries, limit=20))
    finally:
        svc.close()
        ref.close()


# -- a forget racing the backup ----------------------------------------------------------------


def _stopped(process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "T":
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.02)
    raise AssertionError("the backup never reached its failpoint")


SECRET = " and the vault unseal key is tangerine-otter-4471"


@pytest.fixture(params=["in the table", "in the tail"])
def big_acme(request, fake_service, home, monkeypatch) -> list[str]:
    """acme in 30 fragments (a read goes a fragment at a time, and a forget's purge rewrites
    them all into one, deleting every file the read had open), closed; its ids, the one with
    the secret 2,900th. Written without a tail (``indexing.partitions.tail``): each batch is a
    fragment of its own. "in the tail": the secret is remembered last, into the table's tail,
    which a purge rewrites without touching the table's files."""
    from indexing.partitions import tail

    in_tail = request.param == "in the tail"
    rows = TAIL_ROWS = tail.TAIL_ROWS
    monkeypatch.setattr(tail, "TAIL_ROWS", 0)
    fake_service.operator.create_space("acme")
    lines = [
        json.dumps({"text": f"acme fact {i} about the build" + (SECRET if i == 2900 else ""), "space": "acme"})
        for i in range(3000)
        if not (in_tail and i == 2900)
    ]
    report = fake_service.operator.import_jsonl(io.BytesIO("\n".join(lines).encode()), batch_size=100)
    assert report.imported == len(lines)
    if in_tail:
        monkeypatch.setattr(tail, "TAIL_ROWS", TAIL_ROWS)
        fake_service.remember(
            fake_service.caller("claude-code", space="acme"), f"acme fact 2900 about the build{SECRET}"
        )
        assert rows and fake_service._parts.store.layout.tail_path("space:acme").exists()
    ids = [r["id"] for r in fake_service._parts.catalog.all("SELECT id FROM memories ORDER BY rowid")]
    fake_service.close()
    return ids[:2900] + ids[-1:] + ids[2900:-1] if in_tail else ids


@pytest.mark.parametrize("step", ["backup:after-catalog", "backup:mid-partition"])
def test_a_forget_racing_the_backup_leaves_it_whole(home, tmp_path, big_acme, step):
    """A forget right after the catalog copy (the row is gone when the table is read), or in
    the middle of the read (its purge deletes the files the read had open, so the partition is
    read again holding its lock): the backup names the memory as forgotten and holds its text
    nowhere."""
    secret, text = big_acme[2900], SECRET.removeprefix(" and ")
    backup = subprocess.Popen(
        [ESFIS_BIN, "backup", str(tmp_path / "backup")],
        cwd=ROOT,
        env=cli_env(home, ESFIS_FAILPOINT=f"{step}=stop"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _stopped(backup)
        forgot = run_verb(home, None, "forget", "acme", secret)
        assert forgot.returncode == 0, forgot.stderr
    finally:
        backup.send_signal(signal.SIGCONT)
    out, err = backup.communicate(timeout=300)
    assert backup.returncode == 0, err
    manifest = assert_backup_whole(tmp_path / "backup")
    named = (
        backup_rows(tmp_path / "backup", "SELECT forgotten_at FROM memories WHERE id = ?", (secret,))[0]["forgotten_at"]
        is None
    )
    assert not named and manifest["forgotten_since"] == 1
    assert manifest["reread"] == ([] if step == "backup:after-catalog" else ["space:acme"])
    assert files_containing(tmp_path / "backup", text) == []
    restored = tmp_path / "restored"
    assert esfis(restored, "restore", str(tmp_path / "backup"), "--forgets-from", str(home)).returncode == 0
    svc = reopen(restored)
    try:
        assert_whole(svc, restored, gone=(text,))
        assert len(svc._parts.store.row_ids("space:acme")) == 2999
    finally:
        svc.close()


# -- kill -9 at each step --------------------------------------------------------------------

BACKUP_STEPS = [
    "backup:after-catalog",
    "backup:after-partition@1",
    "backup:after-partition@2",
    "backup:before-manifest",
]
RESTORE_STEPS = ["restore:after-catalog", "restore:after-partition@1", "restore:after-forgets", "restore:before-rename"]


@pytest.fixture
def two_spaces(fake_service, home) -> int:
    """acme and personal memories, one forgotten; closed: how many memories are not forgotten."""
    fake_service.operator.create_space("acme")
    caller = fake_service.caller("cli", space="acme")
    for i in range(30):
        fake_service.remember(caller, f"acme note {i} about the build", personal=i % 3 == 0)
    fake_service.forget(caller, fake_service.remember(caller, "acme note to forget").id)
    fake_service.close()
    return 30


@pytest.mark.parametrize("step", BACKUP_STEPS)
def test_a_backup_killed_at_any_step_is_never_taken_for_a_complete_one(home, tmp_path, two_spaces, step):
    killed = esfis(home, "backup", str(tmp_path / "backup"), failpoint=step)
    assert killed.returncode == -signal.SIGKILL, f"{step} not reached: {killed.stderr}"
    refused = esfis(tmp_path / "new-home", "restore", str(tmp_path / "backup"))
    assert refused.returncode == 2 and "no complete backup" in refused.stderr
    assert not (tmp_path / "new-home").exists() or not any((tmp_path / "new-home").iterdir())
    svc = reopen(home)
    try:
        assert_whole(svc, home)  # the source never noticed
    finally:
        svc.close()
    again = esfis(home, "backup", str(tmp_path / "backup"))  # a killed backup's folder is started over
    assert again.returncode == 0, again.stderr
    assert assert_backup_whole(tmp_path / "backup")["memories"] == two_spaces


@pytest.mark.parametrize("step", RESTORE_STEPS)
def test_a_restore_killed_at_any_step_leaves_the_home_empty_and_reruns(home, tmp_path, two_spaces, step):
    assert esfis(home, "backup", str(tmp_path / "backup")).returncode == 0
    restored = tmp_path / "restored"
    killed = esfis(restored, "restore", str(tmp_path / "backup"), "--forgets-from", str(home), failpoint=step)
    assert killed.returncode == -signal.SIGKILL, f"{step} not reached: {killed.stderr}"
    assert not restored.exists() or not any(restored.iterdir()), "a half-restored home"
    again = esfis(restored, "restore", str(tmp_path / "backup"), "--forgets-from", str(home))
    assert again.returncode == 0, again.stderr
    assert not list(tmp_path.glob(".restored.restoring*"))
    svc = reopen(restored)
    try:
        assert_whole(svc, restored)
        assert (
            svc._parts.catalog.one("SELECT count(*) AS n FROM memories WHERE forgotten_at IS NULL")["n"] == two_spaces
        )
    finally:
        svc.close()


# -- refusals --------------------------------------------------------------------------------


def test_backup_and_restore_refuse_what_is_not_theirs(fake_service, home, tmp_path):
    fake_service.operator.create_space("acme")
    fake_service.remember(fake_service.caller("cli", space="acme"), "acme builds with bazel")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(FolderNotEmpty, match="not empty"):
        fake_service.operator.backup(tmp_path / "busy")
    with pytest.raises(InvalidInput, match="absolute"):
        fake_service.operator.backup("relative/folder")
    fake_service.operator.backup(tmp_path / "backup")
    with pytest.raises(FolderNotEmpty, match="complete backup"):
        fake_service.operator.backup(tmp_path / "backup")
    with pytest.raises(InvalidInput, match="not empty"):
        restore_home(tmp_path / "backup", settings_for(home), key_file=home / "backup.key")
    with pytest.raises(InvalidInput, match="no complete backup"):
        restore_home(tmp_path / "busy", settings_for(tmp_path / "elsewhere"))
    damaged = tmp_path / "damaged"
    shutil.copytree(tmp_path / "backup", damaged)
    with open(damaged / "esfis.db", "r+b") as f:
        f.seek(200)
        f.write(b"\xff")
    with pytest.raises(BackupDamaged, match="does not match its manifest"):
        restore_home(damaged, settings_for(tmp_path / "from-damaged"), key_file=home / "backup.key")
    assert not (tmp_path / "from-damaged").exists() or not any((tmp_path / "from-damaged").iterdir())
    assert not list(tmp_path.glob(".from-damaged.restoring*")), "a refused restore left its texts beside the home"


# -- a backup touches only what it made ---------------------------------------------------------


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("esfis: error: "), done.stderr
    return lines[0]


def test_a_backup_never_clears_a_folder_it_did_not_mark(home, tmp_path, two_spaces):
    """A folder holding a file named INCOMPLETE is not a killed backup unless a backup marked it:
    it is refused, and every file in it stays. A marked one holding a file no backup writes is
    refused too; a marked one holding only a killed backup's parts is started over."""
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "INCOMPLETE").write_text("chapter 4 still to write")
    (thesis / "chapter-1.md").write_text("the first chapter")
    refused = esfis(home, "backup", str(thesis))
    assert refused.returncode == 5 and "no backup folder of esfis's" in _one_error_line(refused)
    assert sorted(p.name for p in thesis.iterdir()) == ["INCOMPLETE", "chapter-1.md"]

    killed = esfis(home, "backup", str(tmp_path / "backup"), failpoint="backup:after-partition@1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (tmp_path / "backup" / ".esfis-backup").is_file()
    (tmp_path / "backup" / "notes.txt").write_text("put here by hand")
    refused = esfis(home, "backup", str(tmp_path / "backup"))
    assert refused.returncode == 5 and "'notes.txt', which no backup made" in _one_error_line(refused)
    assert (tmp_path / "backup" / "notes.txt").read_text() == "put here by hand"
    (tmp_path / "backup" / "notes.txt").unlink()
    again = esfis(home, "backup", str(tmp_path / "backup"))
    assert again.returncode == 0, again.stderr
    assert assert_backup_whole(tmp_path / "backup")["memories"] == two_spaces


@pytest.mark.parametrize("where", ["the-folder", "a-parent", "dangling"])
def test_a_backup_through_a_symbolic_link_is_refused(fake_service, home, tmp_path, where):
    """The folder written would not be the one named: refused, and nothing is written where
    the link leads."""
    fake_service.remember(fake_service.caller("cli"), "a personal note", personal=True)
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real if where != "dangling" else tmp_path / "nowhere")
    target = link / "backup" if where == "a-parent" else link
    with pytest.raises(InvalidInput, match="goes through a symbolic link"):
        fake_service.operator.backup(target)
    assert list(real.iterdir()) == [] and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    "inside", ["vectors", "vectors/backup", "backup", ".", ".."], ids=lambda p: p.replace("/", "-").strip(".") or p
)
def test_a_backup_inside_the_home_or_around_it_is_refused_and_the_home_still_works(home, tmp_path, two_spaces, inside):
    """A backup in the vectors folder would be read as a partition (``esfis sweep`` and ``--why``
    died on it), one elsewhere in the home would be copied into the next backup, and one around
    the home would hold it: each is refused, and nothing is made."""
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    target = (home / inside).resolve()
    refused = esfis(home, "backup", str(target))
    assert refused.returncode == 2, refused.stderr
    assert ("holds ESFIS_HOME" if inside == ".." else "is inside") in _one_error_line(refused)
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    svc = reopen(home)
    try:
        assert svc.operator.sweep_orphans(timedelta(minutes=10)) == (0, 2)
        assert_whole(svc, home)
    finally:
        svc.close()


def test_a_second_backup_into_a_folder_while_one_writes_there_is_a_conflict(home, tmp_path, two_spaces):
    """One backup at a time holds a folder: another answers a conflict (exit 5) and touches
    nothing, and the first completes."""
    first = subprocess.Popen(
        [ESFIS_BIN, "backup", str(tmp_path / "backup")],
        cwd=ROOT,
        env=cli_env(home, ESFIS_FAILPOINT="backup:after-catalog=stop"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _stopped(first)
        second = esfis(home, "backup", str(tmp_path / "backup"))
        assert second.returncode == 5 and "another backup is writing into" in _one_error_line(second)
    finally:
        first.send_signal(signal.SIGCONT)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert assert_backup_whole(tmp_path / "backup")["memories"] == two_spaces


# -- a keyed manifest --------------------------------------------------------------------------


def _replant(folder: Path, sql: str) -> dict:
    """What someone who can write the backup folder, but has no key, can do: change the
    catalog and write its digest and size into the manifest again."""
    with sqlite3.connect(folder / "esfis.db") as conn:
        assert conn.execute(sql).rowcount >= 1
    conn.close()
    manifest = json.loads((folder / "manifest.json").read_text())
    body = (folder / "esfis.db").read_bytes()
    manifest["catalog"].update(sha256=hashlib.sha256(body).hexdigest(), bytes=len(body))
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def test_a_restore_refuses_a_catalog_changed_after_the_backup_even_with_its_digest_rewritten(
    fake_service, home, tmp_path
):
    """An AI token made operator in the backup's catalog, digest and size written again: the
    manifest's MAC no longer verifies with the key, and nothing is restored."""
    fake_service.operator.create_space("acme")
    fake_service.remember(fake_service.caller("cli", space="acme"), "acme builds with bazel")
    fake_service.operator.create_token(ai="claude-code", space="acme")
    fake_service.operator.backup(tmp_path / "backup")
    _replant(tmp_path / "backup", "UPDATE tokens SET operator = 1, space = NULL WHERE ai = 'claude-code'")
    restored = tmp_path / "restored"
    with pytest.raises(BackupNotTrusted, match="does not verify with its key"):
        restore_home(tmp_path / "backup", settings_for(restored), key_file=home / "backup.key")
    assert not restored.exists() or not any(restored.iterdir())
    assert not list(tmp_path.glob(".restored.restoring*"))

    stripped = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    del stripped["mac"]
    (tmp_path / "backup" / "manifest.json").write_text(json.dumps(stripped))
    with pytest.raises(BackupNotTrusted, match="carries no MAC"):
        restore_home(tmp_path / "backup", settings_for(restored), key_file=home / "backup.key")
    # --no-key is the operator's word that the folder is as it was written: the digests agree.
    done = restore_home(tmp_path / "backup", settings_for(restored), no_key=True)
    assert done.memories == 1


def test_a_restore_needs_the_key_the_backup_was_made_with(home, tmp_path, two_spaces):
    """The key is the home's backup.key (0600, never in the backup) or one given; a restore
    without it, or with another one, is one clear line; with it, or with --no-key, it goes."""
    made = esfis(home, "backup", str(tmp_path / "backup"))
    assert made.returncode == 0, made.stderr
    key = (home / "backup.key").read_text().strip()
    assert oct((home / "backup.key").stat().st_mode & 0o777) == "0o600" and len(key) == 64
    assert f"from {home / 'backup.key'}: a restore needs it" in made.stdout
    assert files_containing(tmp_path / "backup", key) == []
    keyed_with = json.loads((tmp_path / "backup" / "manifest.json").read_text())["key_id"]

    bare = esfis(tmp_path / "bare", "restore", str(tmp_path / "backup"))
    assert bare.returncode == 2 and f"is keyed (key {keyed_with})" in _one_error_line(bare)
    assert "--key-file" in bare.stderr and "--no-key" in bare.stderr
    (tmp_path / "other.key").write_text(os.urandom(32).hex() + "\n")
    other = esfis(tmp_path / "other", "restore", str(tmp_path / "backup"), "--key-file", str(tmp_path / "other.key"))
    assert other.returncode == 4 and f"was keyed with key {keyed_with}, not with" in _one_error_line(other)
    for restored in (tmp_path / "bare", tmp_path / "other"):
        assert not restored.exists() or not any(restored.iterdir())

    by_env = subprocess.run(
        [ESFIS_BIN, "restore", str(tmp_path / "backup")],
        cwd=ROOT,
        env=cli_env(tmp_path / "by-env", ESFIS_BACKUP_KEY=key),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert by_env.returncode == 0, by_env.stderr
    by_file = esfis(tmp_path / "by-file", "restore", str(tmp_path / "backup"), "--key-file", str(home / "backup.key"))
    assert by_file.returncode == 0, by_file.stderr
    trusted = esfis(tmp_path / "trusted", "restore", str(tmp_path / "backup"), "--no-key")
    assert trusted.returncode == 0, trusted.stderr
    both = esfis(tmp_path / "both", "restore", str(tmp_path / "backup"), "--no-key", "--key-file", "k")
    assert both.returncode == 2 and "not allowed with" in both.stderr


# -- a damaged backup -------------------------------------------------------------------------


def _last_table(folder: Path) -> Path:
    """The folder of the partition the restore reads last: the ones before it are written by then."""
    key = json.loads((folder / "manifest.json").read_text())["partitions"][-1]["key"]
    return folder / "vectors" / f"{table_name(key)}.lance"


DAMAGES = {
    "catalog-missing": lambda folder: (folder / "esfis.db").unlink(),
    "partition-data-missing": lambda folder: [p.unlink() for p in (_last_table(folder) / "data").iterdir()],
    "partition-cut-short": lambda folder: [
        p.write_bytes(p.read_bytes()[:100]) for p in (_last_table(folder) / "data").iterdir()
    ],
    "partition-missing": lambda folder: shutil.rmtree(_last_table(folder)),
    "manifest-not-json": lambda folder: (folder / "manifest.json").write_text('{"format": 2, "partitions": ['),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_backup_is_one_error_line_and_leaves_nothing_behind(home, tmp_path, two_spaces, damage):
    """docs/cli.md's one line (exit 2, no traceback), the home empty, and no staging folder
    holding the texts restored before the damage was found."""
    assert esfis(home, "backup", str(tmp_path / "backup")).returncode == 0
    DAMAGES[damage](tmp_path / "backup")
    restored = tmp_path / "restored"
    refused = esfis(restored, "restore", str(tmp_path / "backup"), "--key-file", str(home / "backup.key"))
    assert refused.returncode == 2, refused.stderr
    assert "damaged" in _one_error_line(refused) and "Traceback" not in refused.stderr
    assert not restored.exists() or not any(restored.iterdir())
    assert not list(tmp_path.glob(".restored.restoring*")), "a refused restore left its texts beside the home"


@pytest.mark.parametrize(
    "change, with_key, code, says",
    [
        pytest.param(
            {"partitions": [{"key": "space:\x1b[2Jacme", "rows": 1, "sha256": "0" * 64}]},
            False,
            2,
            "is not whole: damaged",
            id="escape-in-key",
        ),
        pytest.param(
            {"catalog": {"kind": "pg_dump", "file": "../../etc/passwd", "sha256": "0" * 64}},
            False,
            2,
            "is not whole: damaged",
            id="file-elsewhere",
        ),
        pytest.param({"dimension": "384"}, False, 2, "is not whole: damaged", id="dimension-a-string"),
        pytest.param({"key_id": "\x1b[2J" + "0" * 12}, True, 4, "carries no MAC", id="escape-in-key-id"),
    ],
)
def test_a_manifest_is_checked_whole_and_never_printed_raw(home, tmp_path, two_spaces, change, with_key, code, says):
    """--no-key trusts the folder's intent, not its shape: a manifest naming a file outside the
    backup, or a field of the wrong type, is one line; and what a manifest says is never shown
    raw (an escape in its key id is no key id)."""
    assert esfis(home, "backup", str(tmp_path / "backup")).returncode == 0
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    (tmp_path / "backup" / "manifest.json").write_text(json.dumps({**manifest, **change}))
    key = ["--key-file", str(home / "backup.key")] if with_key else ["--no-key"]
    refused = esfis(tmp_path / "restored", "restore", str(tmp_path / "backup"), *key)
    assert refused.returncode == code and says in _one_error_line(refused)
    assert "\x1b" not in refused.stderr
    assert not (tmp_path / "restored").exists() or not any((tmp_path / "restored").iterdir())
