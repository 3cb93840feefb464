"""``esfis export`` → another home → ``esfis import --restore`` (``server.bulk.export``): ids, labels,
writers and validity come through intact, across catalogs (the source is always SQLite; the
target is the backend under test, so the PostgreSQL pass proves SQLite → PostgreSQL), and no
label is ever widened on the way in; an export file is its owner's only, from its first byte."""

from __future__ import annotations

import io
import json
import stat
import subprocess
from pathlib import Path

import pytest

from indexing.embedding.testing import HashingEmbedder
from server.clock import iso
from server.facade import export_home, open_service
from server.settings import Settings
from tests.conftest import ESFIS_BIN, cli_env
from tests.test_faults import ROOT


@pytest.fixture
def source(tmp_path: Path, clock):
    """A SQLite home with labels of every kind: origin marks, a ``from`` label (a run that read
    acme/platform wrote into acme), an end of validity, a superseded and a forgotten memory."""
    svc = open_service(Settings(home=tmp_path / "source", model=None), embedder=HashingEmbedder(), clock=clock)
    svc.operator.create_space("acme")
    svc.operator.create_space("acme/platform")
    platform = svc.caller("claude-code", space="acme/platform", run="task-7")
    svc.remember(platform, "the platform gateway is Kong", labels=["source:slack"])
    svc.recall(platform, "gateway")
    svc.remember(
        svc.caller("claude-code", space="acme", run="task-8"),
        "acme builds with bazel",
        valid_until="2099-01-01T00:00:00Z",
    )
    old = svc.remember(svc.caller("cursor", space="acme"), "acme deploys on Fridays")
    svc.replace(svc.caller("cursor", space="acme"), old.id, "acme deploys on Thursdays")
    gone = svc.remember(svc.caller("cursor", space="acme"), "the vault unseal key is tangerine-otter-4471")
    svc.forget(svc.caller("cursor", space="acme"), gone.id)
    svc.remember(svc.caller("cursor"), "I prefer small pull requests", personal=True)
    # A run that read acme/platform writes into acme: its memory carries from = [acme/platform].
    carrier = svc.caller("claude-code", space="acme", run="task-9")
    svc.recall(svc.caller("claude-code", space="acme", run="task-9"), "platform gateway Kong")
    svc.remember(carrier, "summary: acme's edge is Kong")
    yield svc
    svc.close()


def exported(svc, **options) -> list[dict]:
    out = io.BytesIO()
    report = export_home(out, Settings(home=svc.home, model=None), **options)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert report.memories == len(lines)
    return lines


def test_export_then_import_restore_keeps_ids_labels_and_validity(source, fake_service):
    lines = exported(source, vectors=True)
    texts = {line["text"] for line in lines}
    assert texts == {
        "the platform gateway is Kong",
        "acme builds with bazel",
        "acme deploys on Thursdays",
        "I prefer small pull requests",
        "summary: acme's edge is Kong",
    }  # current ones only
    carried = next(line for line in lines if line["text"].startswith("summary"))
    assert carried["labels"]["from"] == ["acme/platform"] and carried["space"] == "acme"
    fake_service.operator.create_space("acme")
    fake_service.operator.create_space("acme/platform")
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    report = fake_service.operator.import_restore(io.BytesIO(body))
    assert (report.imported, report.skipped, report.failed) == (5, 0, 0), report.errors
    for line in lines:
        memory = fake_service._parts.memories.load(line["id"])
        assert memory is not None and memory.text == line["text"] and memory.space == line["space"]
        assert (memory.origin, memory.from_spaces, memory.run_id, memory.digest, memory.ai) == (
            tuple(line["labels"]["origin"]),
            tuple(line["labels"]["from"]),
            line["labels"]["run"],
            line["labels"]["digest"],
            line["ai"],
        )
        assert [iso(m) for m in (memory.created_at, memory.valid_from, memory.valid_until)] == [
            line["created_at"],
            line["valid_from"],
            line["valid_until"],
        ]
    # The barrier still knows where the summary's data came from: a run that reads it carries acme/platform.
    reader = fake_service.caller("claude-code", space="acme", run="reader")
    assert fake_service.get(reader, carried["id"]).from_spaces == ("acme/platform",)
    again = fake_service.operator.import_restore(io.BytesIO(body))
    assert (again.imported, again.skipped) == (0, 5)  # a re-run adds nothing
    query = "how does acme build and deploy"
    ours = fake_service.recall(fake_service.caller("cli", space="acme"), query).memories
    theirs = source.recall(source.caller("cli", space="acme"), query).memories
    assert [m.id for m in ours] == [m.id for m in theirs]


def test_import_restore_never_widens_a_label(source, fake_service):
    fake_service.operator.create_space("acme")
    fake_service.operator.create_space("acme/platform")
    carried = next(line for line in exported(source) if line["text"].startswith("summary"))

    def variant(**changes):
        line = json.loads(json.dumps(carried))
        for path, value in changes.items():
            where, key = (line["labels"], path[7:]) if path.startswith("labels_") else (line, path)
            if value is ...:
                del where[key]
            else:
                where[key] = value
        return line

    bad = [
        variant(space=...),
        variant(space=None),
        variant(labels_space=...),
        variant(labels_from=...),
        variant(labels_from="acme/platform"),
        variant(labels_digest="0" * 64),
        variant(space="globex", labels_space="globex"),
    ]
    body = b"".join(json.dumps(line).encode() + b"\n" for line in bad)
    report = fake_service.operator.import_restore(io.BytesIO(body))
    assert (report.imported, report.failed) == (0, len(bad)), report.errors
    reasons = [reason for _, reason in report.errors]
    assert "labels.space None is not the row's space" not in reasons[0]
    assert all(reasons), reasons
    assert fake_service._parts.memories.load(carried["id"]) is None


def test_esfis_export_and_import_restore_on_the_command_line(source, tmp_path):
    out = tmp_path / "acme.jsonl"
    done = subprocess.run(
        [ESFIS_BIN, "export", "--space", "acme", "-o", str(out)],
        cwd=ROOT,
        text=True,
        capture_output=True,
        env={**cli_env(source.home), "ESFIS_CATALOG": ""},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "exported 3 memories" in done.stderr
    unknown = subprocess.run(
        [ESFIS_BIN, "export", "--space", "initech"],
        cwd=ROOT,
        text=True,
        capture_output=True,
        env={**cli_env(source.home), "ESFIS_CATALOG": ""},
        timeout=120,
    )
    assert unknown.returncode == 3 and "no space named 'initech'" in unknown.stderr
    target = tmp_path / "target"
    env = cli_env(target)
    assert (
        subprocess.run(
            [ESFIS_BIN, "space", "add", str(tmp_path), "--name", "acme"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            timeout=120,
        ).returncode
        == 0
    )
    both = subprocess.run(
        [ESFIS_BIN, "import", "--restore", "--create-spaces", str(out)],
        cwd=ROOT,
        text=True,
        capture_output=True,
        env=env,
        timeout=300,
    )  # said, not ignored
    assert both.returncode == 2 and "--create-spaces does not apply to --restore" in both.stderr, both.stderr
    done = subprocess.run(
        [ESFIS_BIN, "import", "--restore", str(out)], cwd=ROOT, text=True, capture_output=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "restored 3, skipped 0, failed 0" in done.stdout


def test_an_export_file_is_readable_by_its_owner_only_whatever_the_umask(source, tmp_path):
    """It holds every memory text: 0600 from its first byte, under a shell's umask of 022; and
    an existing file, or a link, is never written through."""
    out = tmp_path / "all.jsonl"
    env = {**cli_env(source.home), "ESFIS_CATALOG": ""}
    done = subprocess.run(
        [ESFIS_BIN, "export", "-o", str(out)],
        cwd=ROOT,
        text=True,
        capture_output=True,
        env=env,
        timeout=120,
        umask=0o022,
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert b"acme builds with bazel" in out.read_bytes()
    (tmp_path / "elsewhere").write_text("kept")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "elsewhere")
    for taken in (out, tmp_path / "link.jsonl"):
        refused = subprocess.run(
            [ESFIS_BIN, "export", "-o", str(taken)], cwd=ROOT, text=True, capture_output=True, env=env, timeout=120
        )
        assert refused.returncode == 2 and "exists: an export goes into a new file" in refused.stderr
    assert (tmp_path / "elsewhere").read_text() == "kept"


class _ForgetsOnFirstWrite(io.BytesIO):
    """An export's output that, when the first lines arrive (the partition's table read, its
    tail not yet), has another store forget a memory in that tail: a forget racing the export."""

    def __init__(self, forget) -> None:
        super().__init__()
        self.forget = forget

    def write(self, data) -> int:
        if self.forget is not None:
            self.forget, forget = None, self.forget
            forget()
        return super().write(data)


def test_an_export_racing_a_forget_in_a_partitions_tail_writes_every_other_memory_once(tmp_path, clock):
    svc = open_service(Settings(home=tmp_path / "home", model=None), embedder=HashingEmbedder(), clock=clock)
    try:
        svc.operator.create_space("acme")
        caller = svc.caller("cursor", space="acme")
        # Past a small partition's 256 rows it is a table; the newest rows lie in its tail.
        kept = [svc.remember(caller, f"acme fact number {i}").id for i in range(260)]
        newest = [svc.remember(caller, f"acme newest fact {i}").id for i in range(3)]
        out = _ForgetsOnFirstWrite(lambda: svc.forget(caller, newest[1]))
        report = export_home(out, Settings(home=svc.home, model=None))
        ids = [json.loads(line)["id"] for line in out.getvalue().splitlines()]
        assert out.forget is None  # the forget ran during the export
        assert sorted(ids) == sorted(kept + [newest[0], newest[2]])
        assert report.memories == len(ids)
    finally:
        svc.close()
