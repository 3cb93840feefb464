"""A full disk and a failing one at every step of every write (issue 68): ``ENOSPC`` and ``EIO``
raised through the failpoints (``indexing.failpoints``, ``=enospc`` and ``=eio``; a write
through ``indexing.durable`` is cut short first, as a full disk's short write is), in process,
on the catalog under test. After each fault, writes go on by themselves; then the home is
reopened and must be whole:

- every acknowledged write is there, with its text, and recalled;
- the refused write left nothing: no catalog row, no partition row (``assert_whole``: the
  catalog and the partitions agree, row for row, counts included, and no journal is left);
- the refusal was said as what it is: ``DiskFull`` for ENOSPC, ``StorageFailed`` for EIO;
- ``esfis check`` (``Operator.check``) finds the home whole.

Partitions here outgrow their forms after four rows (``SMALL_ROWS``, ``TAIL_ROWS``), so a dozen
remembers cross every form a write can take: the small file, its promotion to a table, the
tail, and the tail's fold into the table.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from indexing import failpoints
from indexing.embedding.testing import HashingEmbedder
from indexing.partitions import compaction, image, image_cache, small_file, tail
from server.bulk.importer import import_stream
from server.errors import DiskFull, EsfisError, MemoryNotFound, StorageFailed
from server.facade import Esfis, open_service
from server.faults import fault_of
from tests.catalogs import settings_for
from tests.conftest import ESFIS_BIN, cli_env
from tests.test_faults import assert_whole, id_of

ROWS = 4  # a small file and a tail outgrow themselves past this many rows here
WRITES = 13  # small file (1-4), promotion (5), tail (6-9), fold (10), tail again
EXPECTED = {"enospc": DiskFull, "eio": StorageFailed}

# (failpoint, which time it is reached): each step a remember's write takes, in the order above.
REMEMBER_STEPS = [
    ("journal:write", 1),
    ("small:write", 1),
    ("small:sync", 1),
    ("catalog:commit", 1),
    ("lance:commit", 1),  # the promotion's table
    ("lance:sync", 1),
    ("promote:after-table", 1),
    ("tail:append", 1),
    ("tail:sync", 1),
    ("fold:after-rename", 1),
    ("lance:commit", 2),  # the fold's append
    ("lance:sync", 2),
]


@pytest.fixture(autouse=True)
def small_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(small_file, "SMALL_ROWS", ROWS)
    monkeypatch.setattr(tail, "TAIL_ROWS", ROWS)
    yield
    failpoints.arm(())


def opened(home: Path) -> Esfis:
    return open_service(settings_for(home), embedder=HashingEmbedder())


def refusal(exc: BaseException) -> EsfisError:
    """What an interface answers for ``exc``: an esfis error, never an internal one."""
    fault = exc if isinstance(exc, EsfisError) else fault_of(exc)
    assert fault is not None, f"an unmapped failure, a 500 over HTTP: {exc!r}"
    return fault


def text_of(i: int) -> str:
    return f"acme fact number {i}: the build runs on runner pool {i * 7}"


def remember_all(svc: Esfis, n: int, *, start: int = 0) -> tuple[dict[str, str], list[tuple[str, EsfisError]]]:
    """Remember ``n`` facts; (acknowledged id → text, [(refused text, its refusal)])."""
    caller = svc.caller("claude-code", space="acme")
    acknowledged: dict[str, str] = {}
    refused: list[tuple[str, EsfisError]] = []
    for i in range(start, start + n):
        try:
            acknowledged[svc.remember(caller, text_of(i)).id] = text_of(i)
        except Exception as exc:
            refused.append((text_of(i), refusal(exc)))
    return acknowledged, refused


def assert_kept(svc: Esfis, home: Path, acknowledged: dict[str, str], refused: list[str]) -> None:
    """Every acknowledged memory whole and recalled, nothing of a refused one, the home whole."""
    caller = svc.caller("claude-code", space="acme")
    for id_, text in acknowledged.items():
        assert svc.get(caller, id_).text == text
    recalled = {m.id for m in svc.recall(caller, "acme fact build runner pool", limit=100).memories}
    if len(acknowledged) <= 100:
        assert set(acknowledged) <= recalled, f"acknowledged but not recalled: {set(acknowledged) - recalled}"
    else:  # more than a recall answers: a full answer, of acknowledged memories only
        assert len(recalled) == 100 and recalled <= set(acknowledged)
    for text in refused:
        assert id_of(svc, text) is None, f"a refused write left a catalog row: {text!r}"
    assert_whole(svc, home)
    check = svc.operator.check()  # and esfis check agrees: whole, not even a row in flight
    assert check.whole and not check.in_flight, check.summary()


@pytest.mark.parametrize("fault", ["enospc", "eio"])
@pytest.mark.parametrize(("step", "nth"), REMEMBER_STEPS, ids=[f"{s}@{n}" for s, n in REMEMBER_STEPS])
def test_a_remember_refused_by_the_disk_at_any_step_loses_nothing_acknowledged(home, step, nth, fault):
    svc = opened(home)
    svc.operator.create_space("acme")
    failpoints.arm([f"{step}@{nth}={fault}"])
    acknowledged, refused = remember_all(svc, WRITES)
    failpoints.arm(())
    more, again = remember_all(svc, 3, start=WRITES)  # writes work again by themselves
    assert not again
    acknowledged |= more
    assert_kept(svc, home, acknowledged, [text for text, _ in refused])
    svc.close()
    svc = opened(home)  # and all of it as the next process opens the home, from the files alone
    assert_kept(svc, home, acknowledged, [text for text, _ in refused])
    svc.close()
    assert len(refused) == 1, f"{step}@{nth} refused {len(refused)} writes"
    assert isinstance(refused[0][1], EXPECTED[fault]), refused[0][1]


REPLACE_STEPS = [  # (the old row's form, the step, which time it is reached, whether it refuses the replace)
    ("small file", "catalog:commit", 1, True),
    ("small file", "small:write", 1, True),  # the new row
    ("small file", "small:write", 2, False),  # the old row's end, after the commit
    ("tail", "tail:append", 1, True),  # the new row
    ("tail", "small:write", 1, False),  # the old row's end (the tail rewritten), after the commit
]


@pytest.mark.parametrize("fault", ["enospc", "eio"])
@pytest.mark.parametrize(
    ("form", "step", "nth", "refuses"), REPLACE_STEPS, ids=[f"{f}-{s}@{n}" for f, s, n, _ in REPLACE_STEPS]
)
def test_a_replace_refused_by_the_disk_is_whole_or_nothing(home, form, step, nth, refuses, fault):
    """A replace refused before its commit changes nothing; one whose old row's end the disk
    refuses after the commit is acknowledged: the catalog, which every recall checks, has it."""
    svc = opened(home)
    svc.operator.create_space("acme")
    caller = svc.caller("claude-code", space="acme")
    acknowledged, _ = remember_all(svc, 2 if form == "small file" else ROWS + 2)  # the last one in the tail
    old = list(acknowledged)[-1]
    failpoints.arm([f"{step}@{nth}={fault}"])
    try:
        new = svc.replace(caller, old, "acme fact replaced: the build runs on runner pool 99")
    except Exception as exc:
        assert refuses, f"refused after its commit: {exc!r}"
        assert isinstance(refusal(exc), EXPECTED[fault])
        assert svc.get(caller, old).superseded_by is None
    else:
        assert not refuses, f"{step}@{nth} was never reached"
        assert failpoints.armed() and not failpoints.faulted(step)  # reached, and refused nothing
        acknowledged[new.id] = new.text
        del acknowledged[old]
        recalled = [m.id for m in svc.recall(caller, "acme fact build runner pool", limit=100).memories]
        assert old not in recalled and new.id in recalled
    failpoints.arm(())
    assert_kept(svc, home, acknowledged, [])
    svc.close()


@pytest.mark.parametrize("fault", ["enospc", "eio"])
@pytest.mark.parametrize("step", ["small:write", "tail:append", "lance:commit"])
def test_an_import_batch_refused_by_the_disk_reports_its_rows_failed_and_keeps_the_rest(home, step, fault):
    svc = opened(home)
    svc.operator.create_space("acme")
    lines = [json.dumps({"text": text_of(i), "space": "acme"}) for i in range(12)]
    if step == "tail:append":
        import_stream(svc._parts, lines[:6], batch_size=6)  # a table with room in its tail
        lines = lines[6:]
    failpoints.arm([f"{step}={fault}"])
    try:
        report = import_stream(svc._parts, lines, batch_size=2)
    except Exception as exc:  # an import that meets a full disk stops, its message plain
        assert isinstance(refusal(exc), EXPECTED[fault])
    else:
        assert report.failed, f"{step} was never reached"
    failpoints.arm(())
    caller = svc.caller("claude-code", space="acme")
    kept = {id_of(svc, text_of(i)): text_of(i) for i in range(12)}
    acknowledged = {id_: text for id_, text in kept.items() if id_ is not None}
    for id_, text in acknowledged.items():
        assert svc.get(caller, id_).text == text
    rerun = import_stream(svc._parts, [json.dumps({"text": text_of(i), "space": "acme"}) for i in range(12)])
    assert rerun.failed == 0  # the rows refused go in when there is room, the others are not doubled
    assert_kept(svc, home, {id_of(svc, text_of(i)): text_of(i) for i in range(12)}, [])
    svc.close()


@pytest.mark.parametrize("fault", ["enospc", "eio"])
@pytest.mark.parametrize("rows", [2, ROWS + 3], ids=["small file", "table and tail"])
def test_a_forget_the_disk_refuses_is_finished_once_there_is_room(home, rows, fault):
    """The purge's rewrite refused: the memory is forgotten for every reader at once, the caller
    is told plainly, and the next forget (or the next open) takes the text off the disk."""
    svc = opened(home)
    svc.operator.create_space("acme")
    caller = svc.caller("claude-code", space="acme")
    acknowledged, _ = remember_all(svc, rows)
    secret = next(iter(acknowledged))
    failpoints.arm([f"purge:after-delete={fault}"])  # the rows deleted (or the file rewritten), not yet gone
    with pytest.raises(Exception) as raised:
        svc.forget(caller, secret)
    failpoints.arm(())
    assert isinstance(refusal(raised.value), EXPECTED[fault])
    with pytest.raises(MemoryNotFound):
        svc.get(caller, secret)
    assert secret not in {m.id for m in svc.recall(caller, "acme fact", limit=100).memories}
    del acknowledged[secret]
    svc.close()
    svc = opened(home)  # the next open finishes the forget
    assert_kept(svc, home, acknowledged, [])
    svc.close()


def test_the_cli_says_a_full_disk_in_one_line(home, tmp_path):
    """The real ``esfis remember``, its disk full as it writes its partition's file: one line that says so,
    a failure status, no traceback; the next command writes again."""
    folder = tmp_path / "acme"
    folder.mkdir()
    made = subprocess.run([ESFIS_BIN, "space", "add", str(folder)], env=cli_env(home), capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    env = cli_env(home, ESFIS_SPACE="acme", ESFIS_FAILPOINT="small:write=enospc")
    done = subprocess.run(
        [ESFIS_BIN, "remember", "acme fact the disk refuses"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "disk under ESFIS_HOME is full" in done.stderr, done.stderr
    env.pop("ESFIS_FAILPOINT")
    again = subprocess.run(
        [ESFIS_BIN, "remember", "acme fact once there is room"], env=env, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("fault", ["enospc", "eio"])
@pytest.mark.parametrize("step", ["compact:run", "image:before-publish"])
def test_a_compaction_or_image_build_the_disk_refuses_is_put_off_and_every_write_kept(home, monkeypatch, step, fault):
    """Upkeep, not the write: a routine compaction, or the image build after it (in a process of
    its own), that the disk refuses leaves every remember acknowledged; a later one does them."""
    monkeypatch.setattr(compaction, "COMPACT_EVERY", 2)  # at the fold, the partition's second table write
    monkeypatch.setattr(image_cache, "ANN_THRESHOLD", 70)  # an image from 70 rows on (its lists need 64)
    svc = opened(home)
    svc.operator.create_space("acme")
    failpoints.arm([f"{step}={fault}"])  # an image build's process arms it too: every build fails
    acknowledged, refused = remember_all(svc, 90)
    folder = svc._parts.store.layout.image_folder("space:acme")
    if step == "compact:run":
        assert not failpoints.faulted(step), f"{step} was never reached"
    else:  # reached in the build's own process: no image was published
        assert image.open_image(folder) is None
    failpoints.arm(())
    assert not refused, refused
    more, _ = remember_all(svc, 20, start=90)  # the next folds compact and build again
    acknowledged |= more
    assert image.open_image(folder) is not None
    svc.close()
    svc = opened(home)
    assert_kept(svc, home, acknowledged, [])
    svc.close()


@pytest.mark.parametrize("fault", ["enospc", "eio"])
def test_a_dedupe_the_disk_cuts_short_is_finished_by_a_rerun(home, fault):
    svc = opened(home)
    svc.operator.create_space("acme")
    caller = svc.caller("claude-code", space="acme")
    copies = [svc.remember(caller, "acme deploys on fridays at noon", dedupe=False).id for _ in range(3)]
    failpoints.arm([f"catalog:commit@2={fault}"])  # the second copy's fold refused
    with pytest.raises(Exception) as raised:
        svc.operator.dedupe("acme")
    failpoints.arm(())
    assert isinstance(refusal(raised.value), EXPECTED[fault])
    assert svc.operator.dedupe("acme").copies == 1  # the one the disk refused, folded now
    current = [m.id for m in svc.recall(caller, "when does acme deploy", limit=10).memories]
    assert current == [copies[0]]
    assert_kept(svc, home, {copies[0]: "acme deploys on fridays at noon"}, [])
    svc.close()


@pytest.mark.parametrize("fault", ["enospc", "eio"])
def test_a_backup_the_disk_refuses_leaves_the_home_whole_and_the_next_backup_works(home, tmp_path, fault):
    svc = opened(home)
    svc.operator.create_space("acme")
    acknowledged, _ = remember_all(svc, ROWS + 3)
    failpoints.arm([f"backup:after-partition={fault}"])
    with pytest.raises(Exception) as raised:
        svc.operator.backup(tmp_path / "refused")
    failpoints.arm(())
    assert isinstance(refusal(raised.value), EXPECTED[fault])
    assert svc.operator.backup(tmp_path / "taken").memories == len(acknowledged)
    assert_kept(svc, home, acknowledged, [])
    svc.close()
