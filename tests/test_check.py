"""``esfis check``: a home damaged on purpose is named exactly (lost memories, orphan rows,
forgotten texts still stored, what killed writes left, counts, images, unreadable files), and
``--repair`` leaves it whole, a lost memory never served; a home used normally checks whole."""

from __future__ import annotations

import io
import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lance
import numpy as np
import pytest

from indexing.embedding.testing import HashingEmbedder
from indexing.partitions import image, image_cache, small_file, tail
from indexing.partitions.store import table_name
from indexing.rows import Row
from server.bulk.check import CheckReport, Finding
from server.clock import to_micros
from server.errors import MemoryNotFound
from server.facade import Esfis, open_service
from server.spaces import partition_key
from tests.catalogs import catalog_rows, settings_for
from tests.conftest import ESFIS_BIN, MovableClock, cli_env
from tests.helpers import files_containing

ACME, BIG = partition_key("acme"), partition_key("big")
LARGE = 300  # rows imported into big: past small_file.SMALL_ROWS, so a table, whose later writes go to its tail


def open_home(home: Path, clock: MovableClock, **settings) -> Esfis:
    return open_service(settings_for(home, **settings), embedder=HashingEmbedder(), clock=clock)


def add_row(svc: Esfis, key: str, id_: str, text: str, written: datetime) -> None:
    """A row put down behind the catalog's back, as a write killed before its catalog rows."""
    vector = np.asarray(svc._parts.embedder.embed_documents([text])[0], dtype=np.float32)
    at = to_micros(written)
    svc._parts.store.add(key, [Row(id_, text, vector, at, at, None)])


def seeded(svc: Esfis, *, big: int = LARGE) -> dict[str, str]:
    """acme, a small partition (one Arrow file); big, a table with a tail. The ids by name."""
    for space in ("acme", "big"):
        svc._parts.registry.add_named(space)
    acme = svc.caller("cli", space="acme")
    ids = {f"acme{i}": svc.remember(acme, f"acme keeps fact number {i} in its runbook").id for i in range(5)}
    lines = "\n".join(json.dumps({"text": f"big holds row {i} of its ledger", "space": "big"}) for i in range(big))
    assert svc.operator.import_jsonl(io.BytesIO(lines.encode())).imported == big
    caller = svc.caller("cli", space="big")
    ids |= {f"tail{i}": svc.remember(caller, f"big appended note {i} to its tail").id for i in range(3)}
    return ids


def found(report: CheckReport) -> set[tuple[str, str | None, tuple[str, ...]]]:
    return {(f.kind, f.partition, f.ids) for f in report.found}


def kinds(findings: tuple[Finding, ...]) -> list[tuple[str, str | None]]:
    return [(f.kind, f.partition) for f in findings]


def never_served(svc: Esfis, ids: list[str], texts: list[str], space: str, **settings: str) -> None:
    """Not by get, recall, or export (which never writes an empty text)."""
    caller = svc.caller("cli", space=space)
    for id_ in ids:
        with pytest.raises(MemoryNotFound):
            svc.get(caller, id_)
    for text in texts:
        assert not {m.id for m in svc.recall(caller, text, limit=50).memories} & set(ids)
    from server.facade import export_home

    out = io.BytesIO()
    export_home(out, settings_for(svc._parts.home, **settings))
    exported = [json.loads(line) for line in out.getvalue().splitlines()]
    assert not {row["id"] for row in exported} & set(ids)
    assert all(row["text"] for row in exported)


def test_a_home_used_normally_checks_whole(fake_service, clock):
    ids = seeded(fake_service)
    acme = fake_service.caller("cli", space="acme")
    fake_service.replace(acme, ids["acme1"], "acme keeps fact number 1 in its wiki now")
    fake_service.forget(acme, ids["acme2"])
    big = fake_service.caller("cli", space="big")
    fake_service.forget(big, ids["tail0"])
    fake_service.replace(big, ids["tail1"], "big moved note 1 elsewhere")
    fake_service.remember(fake_service.caller("cli", space="acme"), "a personal note", personal=True)
    report = fake_service.operator.check()
    assert report.whole and report.found == () and report.in_flight == 0, report.summary()
    assert report.partitions == 3 and report.memories == 5 - 1 + 1 + LARGE + 3 - 1 + 1 + 1
    assert report.summary() == [f"whole: 3 partitions, {report.memories} memories checked"]
    repaired = fake_service.operator.check(repair=True)  # nothing to mend: nothing changes
    assert repaired.whole and not repaired.repaired


def test_check_names_exactly_the_damage_and_repair_leaves_the_home_whole(home, clock):
    svc = open_home(home, clock)
    ids = seeded(svc)
    store = svc._parts.store
    root = store.root
    big_tail = store.layout.tail_path(BIG)
    # Rows behind the catalog's back: a forgotten memory's row put back, orphans, a row taken out
    # of the tail; then one more memory, whose frame ends the tail.
    svc.forget(svc.caller("cli", space="acme"), ids["acme4"])
    add_row(svc, ACME, ids["acme4"], "acme keeps fact number 4 in its runbook", clock())
    add_row(svc, ACME, "orphan_acme", "a half-written acme secret", clock() - timedelta(hours=1))
    add_row(svc, BIG, "orphan_big", "a half-written big secret", clock() - timedelta(hours=1))
    add_row(svc, ACME, "young_acme", "a write still in flight", clock())
    tail.without(big_tail, tail.read(big_tail), [ids["tail0"]])
    ids["last"] = svc.remember(svc.caller("cli", space="big"), "big's last note, cut by a kill").id
    svc.close()

    big_table = lance.dataset(str(root / f"{table_name(BIG)}.lance"))
    in_table = big_table.to_table(columns=["id"]).column("id").to_pylist()[7]
    big_table.delete(f"id = '{in_table}'")
    acme_file = store.layout.small_path(ACME)
    small_file.write(acme_file, small_file.without(small_file.read(acme_file), [ids["acme0"]]))
    (root / f"{table_name(ACME)}.arrow.tmp").write_bytes(acme_file.read_bytes())
    big_tail.write_bytes(big_tail.read_bytes()[:-8])  # the last frame, cut short by a kill
    svc = open_home(home, clock)
    try:
        with svc._parts.catalog.transaction() as tx:
            tx.execute("UPDATE partitions SET live = live + 2 WHERE key = ?", (ACME,))
            tx.execute("UPDATE totals SET live = live + 1")

        report = svc.operator.check()
        assert not report.whole and report.in_flight == 1
        assert found(report) == {
            ("lost", ACME, (ids["acme0"],)),
            ("lost", BIG, tuple(sorted([in_table, ids["tail0"], ids["last"]]))),
            ("orphan", ACME, ("orphan_acme",)),
            ("orphan", BIG, ("orphan_big",)),
            ("forgotten", ACME, (ids["acme4"],)),
            ("leftover", ACME, ()),
            ("leftover", BIG, ()),
            ("count", ACME, ()),
            ("count", "totals", ()),
        }, report.summary()
        leftovers = {f.partition: f.what for f in report.found if f.kind == "leftover"}
        assert leftovers[ACME] == f"temporary file {table_name(ACME)}.arrow.tmp, a killed write's"
        assert leftovers[BIG].startswith(f"{table_name(BIG)}.tail ends in ") and "cut short" in leftovers[BIG]
        assert report.left == report.found and not report.repaired
        assert not any("secret" in line or "runbook" in line for line in report.summary())  # ids, never texts

        repaired = svc.operator.check(repair=True)
        assert repaired.repaired and repaired.whole and repaired.left == (), repaired.summary()
        assert kinds(repaired.found) == kinds(report.found)
        assert repaired.summary()[-2].startswith(
            "repaired 9 findings (lost 2, orphan 2, forgotten 1, leftover 2, count 2)"
        )
        again = svc.operator.check()
        assert again.whole and again.found == () and again.in_flight == 1  # the young row: a write in flight still
    finally:
        svc.close()

    svc = open_home(home, clock)  # a fresh process's view
    try:
        lost = [ids["acme0"], in_table, ids["tail0"], ids["last"]]
        never_served(svc, lost, ["acme keeps fact number 0 in its runbook", "big's last note, cut by a kill"], "big")
        never_served(svc, lost, ["acme keeps fact number 0 in its runbook"], "acme")
        forgotten = catalog_rows(home, "SELECT count(*) FROM memories WHERE forgotten_at IS NOT NULL")[0][0]
        assert forgotten == 1 + len(lost)  # acme4, and the lost ones recorded as forgotten
        assert files_containing(home, "half-written") == []
        assert files_containing(home, "acme keeps fact number 4") == []
        assert not (root / f"{table_name(ACME)}.arrow.tmp").exists()
        assert svc.operator.check().whole
    finally:
        svc.close()


@pytest.mark.parametrize("chunk", [2000, 2])
def test_an_index_over_data_that_disagrees_with_the_data_is_named_and_indexed_again(home, clock, chunk, monkeypatch):
    """A recall's filter reads the catalog's index over data: rows missing, wrong, dated other
    than their memory, left for a memory that holds no data, or naming a memory gone are each
    found, by id, however the
    partition is read in chunks; a filter that missed a memory before the repair finds it after,
    and takes no memory it does not match."""
    import server.bulk.check_data

    monkeypatch.setattr(server.bulk.check_data, "CHUNK", chunk)
    svc = open_home(home, clock)
    try:
        svc._parts.registry.add_named("acme")
        acme = svc.caller("cli", space="acme")
        written = {
            name: svc.remember(acme, f"acme's {name} service is owned by the platform team", data=data).id
            for name, data in {
                "billing": {"team": "platform", "tier": 1},
                "search": {"team": "platform", "due": "2027-03-01T00:00:00Z"},
                "auth": {"team": "platform", "owner": {"name": "ada"}},
                "ledger": {"team": "core"},
            }.items()
        }
        plain = svc.remember(acme, "acme's wiki holds no data at all").id
        assert svc.operator.check().whole  # written normally: the index agrees
        with svc._parts.catalog.transaction() as tx:
            tx.execute("DELETE FROM memory_fields WHERE memory_id = ?", (written["billing"],))  # rows gone
            tx.execute(  # a value changed behind the data's back
                "UPDATE memory_fields SET txt = 'core' WHERE memory_id = ? AND path = 'team'", (written["search"],)
            )
            tx.execute(  # a row out of its place in the newest-first order
                "UPDATE memory_fields SET created_at = created_at - 1 WHERE memory_id = ?", (written["ledger"],)
            )
            tx.execute(  # rows for a memory that holds no data, and for one that is no memory at all
                "INSERT INTO memory_fields (partition, path, memory_id, kind, num, txt, instant) "
                "VALUES (?, 'team', ?, 's', NULL, 'platform', NULL), (?, 'team', 'mem_gone', 's', NULL, 'platform', NULL)",
                (ACME, plain, ACME),
            )
        platform = {"team": "platform"}
        before = {m.id for m in svc.recall(acme, None, where=platform, limit=20).memories}
        assert written["billing"] not in before and written["search"] not in before  # what a bad index does

        report = svc.operator.check()
        wrong = tuple(sorted([written["billing"], written["search"], written["ledger"], plain, "mem_gone"]))
        assert found(report) == {("index", ACME, wrong)}, report.summary()
        line = report.summary()[0]
        assert line.startswith("index") and "space acme: 5 memories whose data the catalog's index over data" in line

        repaired = svc.operator.check(repair=True)
        assert repaired.repaired and repaired.whole, repaired.summary()
        after = {m.id for m in svc.recall(acme, None, where=platform, limit=20).memories}
        assert after == {written["billing"], written["search"], written["auth"]}
        assert {m.id for m in svc.recall(acme, None, where={"owner.name": "ada"}).memories} == {written["auth"]}
        assert svc.operator.check().whole
    finally:
        svc.close()


def test_what_dead_processes_left_is_settled_by_the_repair(home, clock):
    svc = open_home(home, clock)
    ids = seeded(svc)
    big_tail = svc._parts.store.layout.tail_path(BIG)
    svc.close()
    tail.folding_of(big_tail).write_bytes(big_tail.read_bytes())  # a fold killed before its append
    big_tail.unlink()
    svc = open_home(home, clock)
    try:
        add_row(svc, ACME, "journalled", "a write its process died in", clock())
        journals = home / "imports"
        (journals / "writes-4194305-deadbeef.json").write_text(json.dumps({ACME: ["journalled"]}) + "\n")
        with svc._parts.catalog.transaction() as tx:  # a forget whose process died after its intent
            tx.execute("UPDATE memories SET forgotten_at = 1, digest = NULL WHERE id = ?", (ids["acme3"],))
            tx.execute("UPDATE partitions SET live = live - 1 WHERE key = ?", (ACME,))
            tx.execute("INSERT INTO forgetting (memory_id, partition, since) VALUES (?, ?, 1)", (ids["acme3"], ACME))

        report = svc.operator.check()
        assert found(report) == {
            ("leftover", BIG, ()),
            ("leftover", None, ()),
            ("leftover", None, (ids["acme3"],)),
        }, report.summary()
        assert report.in_flight == 1  # the journalled row is young: only its journal names it
        repaired = svc.operator.check(repair=True)
        assert repaired.whole and repaired.in_flight == 0, repaired.summary()
        assert not tail.folding_of(big_tail).exists() and big_tail.exists()
        assert list(journals.glob("writes-4194305-*")) == []
        assert files_containing(home, "a write its process died in") == []
        assert files_containing(home, "acme keeps fact number 3") == []
        caller = svc.caller("cli", space="big")
        assert svc.get(caller, ids["tail2"]).text == "big appended note 2 to its tail"  # the fold undone, kept
    finally:
        svc.close()


def test_an_image_holding_rows_gone_or_that_cannot_be_opened_is_built_again(home, clock, monkeypatch):
    monkeypatch.setattr(image_cache, "ANN_THRESHOLD", LARGE - 10)
    svc = open_home(home, clock)
    try:
        seeded(svc)
        store = svc._parts.store
        folder = store.layout.image_folder(BIG)
        assert (folder / "current").exists()
        table = lance.dataset(store.layout.uri(BIG))
        gone = table.to_table(columns=["id"]).column("id").to_pylist()[3]
        table.delete(f"id = '{gone}'")

        report = svc.operator.check()
        assert found(report) == {("lost", BIG, (gone,)), ("image", BIG, (gone,))}, report.summary()
        assert gone.encode() in image.open_image(folder).ids.tolist()  # its text in the image still
        assert svc.operator.check(repair=True).whole
        rebuilt = image.open_image(folder)
        assert rebuilt is not None and gone.encode() not in rebuilt.ids.tolist()

        version = folder / (folder / "current").read_text().strip()
        (version / "meta.json").write_text("{not json")
        broken = svc.operator.check()
        assert kinds(broken.found) == [("image", BIG)] and "cannot be opened" in broken.found[0].what
        assert svc.operator.check(repair=True).whole
        assert svc.operator.check().whole and (folder / "current").exists()
    finally:
        svc.close()


def test_an_unreadable_partition_is_named_and_never_touched(home, clock):
    svc = open_home(home, clock)
    seeded(svc)
    big_tail = svc._parts.store.layout.tail_path(BIG)
    svc.close()
    data = bytearray(big_tail.read_bytes())
    schema_end = len(tail.MAGIC) + tail.FRAME.size + tail.FRAME.unpack_from(data, len(tail.MAGIC))[0]
    data[schema_end + tail.FRAME.size + 8] ^= 0xFF  # a byte of the first row's frame, whole frames after it
    big_tail.write_bytes(bytes(data))
    svc = open_home(home, clock)
    try:
        report = svc.operator.check(repair=True)
        assert kinds(report.found) == [("unreadable", BIG)] and not report.whole, report.summary()
        assert "PartitionCorrupt" in report.found[0].what and not report.found[0].mendable
        assert report.summary()[0].endswith("(left: none: left as it is; restore the partition from a backup)")
        assert big_tail.read_bytes() == bytes(data)
    finally:
        svc.close()


def test_check_on_s3_names_lost_and_orphan_rows_and_repairs_them(home, clock, s3, s3_env):
    bucket = s3.bucket()
    svc = open_home(home, clock, vectors=f"s3://{bucket}/esfis")
    try:
        svc._parts.registry.add_named("acme")
        acme = svc.caller("cli", space="acme")
        ids = [svc.remember(acme, f"acme keeps fact number {i} in its runbook").id for i in range(4)]
        add_row(svc, ACME, "orphan_acme", "a half-written acme secret", clock() - timedelta(hours=1))
        lance.dataset(svc._parts.store.layout.uri(ACME)).delete(f"id = '{ids[1]}'")

        report = svc.operator.check()
        assert found(report) == {("lost", ACME, (ids[1],)), ("orphan", ACME, ("orphan_acme",))}, report.summary()
        assert svc.operator.check(repair=True).whole
        assert not any(b"half-written" in body for body in s3.objects(bucket).values())
        never_served(svc, [ids[1]], ["acme keeps fact number 1 in its runbook"], "acme", vectors=f"s3://{bucket}/esfis")
    finally:
        svc.close()


def test_a_partition_whose_table_is_gone_from_s3_is_named_lost_and_never_served(home, clock, s3, s3_env):
    bucket = s3.bucket()
    vectors = f"s3://{bucket}/esfis"
    svc = open_home(home, clock, vectors=vectors)
    svc._parts.registry.add_named("acme")
    ids = [svc.remember(svc.caller("cli", space="acme"), f"acme keeps fact number {i}").id for i in range(2)]
    svc.close()
    for key in s3.objects(bucket, f"esfis/{table_name(ACME)}.lance"):
        s3.client.delete_object(Bucket=bucket, Key=key)
    svc = open_home(home, clock, vectors=vectors)
    try:
        assert found(svc.operator.check()) == {("lost", ACME, tuple(sorted(ids)))}
        svc.operator.check(repair=True)  # never half-way: forgotten whole, or left and said
        never_served(svc, ids, ["acme keeps fact number 0"], "acme", vectors=vectors)
    finally:
        svc.close()


def test_esfis_check_on_the_command_line_exits_1_until_repaired(home, clock):
    svc = open_home(home, clock)
    seeded(svc, big=3)
    add_row(svc, ACME, "orphan_acme", "a half-written acme secret", datetime.now(UTC) - timedelta(hours=1))
    svc.close()

    def esfis(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([ESFIS_BIN, *argv], env=cli_env(home), capture_output=True, text=True, timeout=120)

    told = esfis("check")
    assert told.returncode == 1, told.stderr
    assert told.stdout.splitlines()[0] == (
        "orphan     space acme: 1 row no catalog entry names: orphan_acme (--repair: purged)"
    )
    assert "not whole: 1 finding (orphan 1)" in told.stdout
    assert (
        told.stderr.strip() == "esfis: error: the home is not whole: 1 finding (esfis check --repair mends what it can)"
    )
    as_json = json.loads(esfis("check", "--json").stdout)
    assert as_json["whole"] is False and as_json["found"][0]["ids"] == ["orphan_acme"]
    assert as_json["found"][0]["space"] == "acme"
    mended = esfis("check", "--repair")
    assert mended.returncode == 0, mended.stderr
    assert "(repaired: purged)" in mended.stdout and "whole now" in mended.stdout
    clean = esfis("check", "--json")
    assert clean.returncode == 0 and json.loads(clean.stdout)["whole"] is True
