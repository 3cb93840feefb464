"""Metadata on memories (``data``) and recall's filter over it, through the façade on the
deterministic embedder: the filter runs inside the partitions the caller reaches, after validity
and before relevance, so a recall answers ``limit`` matching memories while they exist (checked
against an exact scan of the catalog), never reaches further than without it, and forget takes
the data with the text. The real model over HTTP: ``tests/http/test_http_data.py``."""

from __future__ import annotations

import io
import json

import pytest

from indexing.embedding.testing import HashingEmbedder
from server.errors import InvalidInput
from server.facade import export_home, open_service
from server.models import Held
from server.settings import Settings
from tests.helpers import files_containing, run_cli


def _acme(service):
    service.operator.create_space("acme")
    return service.caller("cli", space="acme")


def test_filtered_recall_answers_limit_matching_memories_when_the_best_match_none(fake_service, partition_form):
    acme = _acme(fake_service)
    for i in range(40):
        fake_service.remember(acme, f"the deploy pipeline step {i} runs the deploy", data={"kind": "note", "n": i})
    decisions = [
        fake_service.remember(acme, f"lunch order {i} was pizza", data={"kind": "decision", "n": i}).id
        for i in range(7)
    ]
    plain = fake_service.recall(acme, "deploy pipeline", limit=5).memories
    assert plain and not {m.id for m in plain} & set(decisions)  # the best by relevance match none
    recall = fake_service.recall(acme, "deploy pipeline", limit=5, where={"kind": "decision"})
    narrowed = recall.memories
    assert len(narrowed) == 5 and {m.id for m in narrowed} <= set(decisions)
    assert fake_service.operator.delivery(recall.delivery_id).cut["filter"] == 40  # the notes, never scored
    # Against an exact scan of the catalog: every matching current memory, and only those.
    scan = {
        r["id"]
        for r in fake_service._parts.catalog.all("SELECT id, data FROM memories WHERE data IS NOT NULL")
        if json.loads(r["data"]) == {"kind": "decision", "n": json.loads(r["data"])["n"]}
    }
    every = fake_service.recall(acme, "deploy pipeline", limit=100, where={"kind": "decision"}).memories
    assert {m.id for m in every} == scan == set(decisions)
    ranged = fake_service.recall(acme, "deploy", limit=100, where={"kind": "note", "n": {"$gte": 10, "$lt": 13}})
    assert sorted(m.data["n"] for m in ranged.memories) == [10, 11, 12]


def test_filter_never_widens_reach(fake_service):
    acme = _acme(fake_service)
    fake_service.operator.create_space("globex")
    globex = fake_service.caller("cli", space="globex")
    for i in range(5):
        fake_service.remember(globex, f"globex secret plan {i}", data={"client": "globex"})
    fake_service.remember(acme, "acme plan", data={"client": "acme"})
    assert fake_service.recall(acme, "secret plan", where={"client": "globex"}).memories == []
    assert fake_service.recall(acme, None, where={"client": {"$exists": True}}).memories[0].space == "acme"
    assert len(fake_service.recall(acme, None, where={"client": {"$exists": True}}).memories) == 1


def test_filter_without_query_answers_the_newest_matching_first(fake_service, clock):
    acme = _acme(fake_service)
    ids = []
    for i in range(6):
        clock.advance(minutes=1)
        ids.append(fake_service.remember(acme, f"task {i}", data={"due": f"2027-01-0{i + 1}T09:00:00+01:00"}).id)
    fake_service.remember(acme, "no data here")
    got = fake_service.recall(acme, "", limit=3, where={"due": {"$gte": "2027-01-02T08:00:00Z"}}).memories
    assert [m.id for m in got] == ids[::-1][:3] and all(m.score == 0 for m in got)
    assert [m.text for m in fake_service.recall(acme, None, where={"due": {"$exists": False}}).memories] == [
        "no data here"
    ]
    with pytest.raises(InvalidInput):
        fake_service.recall(acme, None)  # neither a query nor a filter


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([1, 2], "must be a JSON object"),
        ({"$kind": 1}, "may not start with \\$"),
        ({"a": {"b": {"c": {"d": {}}}}}, "nested too deep"),
        ({"x": "y" * 5000}, "the limit is 4 KiB"),
        ({f"k{i}": i for i in range(65)}, "65 keys"),
        ({"k" * 65: 1}, "keys are 1 to 64"),
    ],
    ids=["array", "dollar-key", "too-deep", "too-large", "too-many-keys", "long-key"],
)
def test_bad_data_is_refused_and_nothing_is_stored(fake_service, data, says):
    acme = _acme(fake_service)
    with pytest.raises(InvalidInput, match=says) as refused:
        fake_service.remember(acme, "a fact with bad data", data=data)
    assert refused.value.field == "data"
    assert fake_service._parts.catalog.one("SELECT count(*) AS n FROM memories")["n"] == 0


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ({"kind": {"$regex": "a"}}, "unknown operator '\\$regex'"),
        ({"$or": [{"a": 1}]}, "is not a field"),
        ({"kind": {"$gt": "decision"}}, "compares numbers or ISO 8601 times"),
        ({"kind": {"$in": "decision"}}, "\\$in takes an array"),
        ({"kind": {"$exists": 1}}, "\\$exists takes true or false"),
        ("kind=decision", "must be a JSON object"),
    ],
    ids=["unknown-operator", "top-level-operator", "range-on-text", "in-not-array", "exists-not-bool", "not-object"],
)
def test_malformed_filter_is_refused_naming_what_is_wrong(fake_service, where, says):
    acme = _acme(fake_service)
    with pytest.raises(InvalidInput, match=says) as refused:
        fake_service.recall(acme, "anything", where=where)
    assert refused.value.field == "filter"


def test_replace_keeps_only_the_data_it_is_given(fake_service):
    acme = _acme(fake_service)
    old = fake_service.remember(acme, "billing runs monthly", data={"kind": "decision"})
    kept = fake_service.replace(acme, old.id, "billing runs weekly", data={"kind": "decision", "v": 2})
    assert fake_service.get(acme, kept.id).data == {"kind": "decision", "v": 2}
    bare = fake_service.replace(acme, kept.id, "billing runs daily")
    assert fake_service.get(acme, bare.id).data == {}
    assert [m.id for m in fake_service.recall(acme, None, where={"kind": "decision"}).memories] == []


def test_export_carries_data_and_restore_brings_it_back(tmp_path, fake_service, clock):
    source = open_service(Settings(home=tmp_path / "source", model=None), embedder=HashingEmbedder(), clock=clock)
    try:
        acme = _acme(source)
        memory = source.remember(acme, "the release train leaves on thursdays", data={"team": "platform"})
        bare = source.remember(acme, "the office closes at six")
        out = io.BytesIO()
        export_home(out, Settings(home=source.home, model=None))
    finally:
        source.close()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {line["id"]: line["data"] for line in lines} == {memory.id: {"team": "platform"}, bare.id: {}}
    target = _acme(fake_service)
    report = fake_service.operator.import_restore(io.BytesIO(out.getvalue()))
    assert report.imported == 2, report.errors
    assert fake_service.get(target, memory.id).data == {"team": "platform"}
    assert [m.id for m in fake_service.recall(target, None, where={"team": "platform"}).memories] == [memory.id]


def test_import_carries_data_and_reports_bad_data_by_line(fake_service):
    acme = _acme(fake_service)
    lines = [
        {"text": "acme invoices go out on the first", "space": "acme", "data": {"kind": "policy", "note": "a\nb"}},
        {"text": "acme has no office dog", "space": "acme", "data": {"$kind": "policy"}},
        {"text": "acme pays within thirty days", "space": "acme"},
    ]
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    report = fake_service.operator.import_jsonl(io.BytesIO(body))
    assert (report.imported, report.failed) == (2, 1)
    assert report.errors[0][0] == 2 and "may not start with $" in report.errors[0][1]
    found = fake_service.recall(acme, None, where={"kind": "policy"}).memories
    assert [(m.text, m.data) for m in found] == [(lines[0]["text"], lines[0]["data"])]


def test_forgotten_data_is_in_no_catalog_file(home, clock):
    """SQLite's promise, as ``tests/test_forget_purge.py`` proves for the digest: after forget no
    file under ESFIS_HOME (the database, its WAL, its pages' gaps) holds the memory's data."""
    service = open_service(Settings(home=home, model=None), embedder=HashingEmbedder(), clock=clock)
    try:
        acme = _acme(service)
        secret = "customer-ledger-7f3a9c"
        memories = [
            service.remember(acme, f"acme fact {i}", data={"ref": f"{secret}-{i:03d}", "i": i}) for i in range(40)
        ]
        service._parts.catalog.checkpoint()
        assert files_containing(home, f"{secret}-005")
        for memory in memories[5::7]:
            service.forget(acme, memory.id)
        for memory in memories[5::7]:
            assert files_containing(home, f"{secret}-{memory.data['i']:03d}") == []
        assert files_containing(home, f"{secret}-006")  # the others are kept
    finally:
        service.close()


def test_the_command_line_takes_data_and_where(capsys, home, folders, real_embedder):
    acme = folders["acme"]
    assert run_cli(capsys, acme, "space", "add", str(acme))[0] == 0
    code, out, _ = run_cli(capsys, acme, "remember", "Acme's release notes live in Confluence", "--data", '{"k": 1}')
    assert code == 0
    memory_id = out.strip()
    run_cli(capsys, acme, "remember", "Acme's design docs live in Notion")
    code, out, _ = run_cli(capsys, acme, "recall", "--where", '{"k": {"$gte": 1}}', "--json")
    assert code == 0 and [(m["id"], m["data"]) for m in json.loads(out)["memories"]] == [(memory_id, {"k": 1})]
    code, _, err = run_cli(capsys, acme, "remember", "x", "--data", "{k: 1}")
    assert code == 2 and "--data must be JSON" in err
    code, _, err = run_cli(capsys, acme, "recall", "docs", "--where", '{"k": {"$matches": 1}}')
    assert code == 2 and "unknown operator '$matches'" in err


def test_a_held_write_keeps_its_data_shows_it_to_the_person_and_lands_with_it(fake_service):
    for name in ("acme", "globex"):
        fake_service.operator.create_space(name)
    fake_service.remember(fake_service.caller("seeder", space="acme"), "acme's staging vault path is secret/stg")
    token, _ = fake_service.operator.create_token(ai="cursor")
    caller = fake_service.caller(space="acme", transport="http", token=token)
    assert fake_service.recall(caller, "staging vault path").memories  # the run now carries acme
    held = fake_service.remember(caller, "vault: secret/stg", personal=True, hold=True, data={"kind": "pointer-61"})
    assert isinstance(held, Held)
    (view,) = fake_service.operator.approvals()
    assert "Data: " in view.message and '"kind":"pointer-61"' in view.message  # the person sees it
    decided = fake_service.operator.decide_approval(held.id, approve=True, by="operator tok_test")
    globex = fake_service.caller("someone", space="globex")
    assert fake_service.get(globex, decided.result).data == {"kind": "pointer-61"}
    assert [m.id for m in fake_service.recall(globex, None, where={"kind": "pointer-61"}).memories] == [decided.result]
    assert fake_service._parts.catalog.one("SELECT data FROM approvals WHERE id = ?", (held.id,))["data"] is None


TRICKY = ["a%b", "a_b", "axb", "back\\slash", 'quo"te', "Ünïcode ✓", "Rare", "rare", "x'y"]


def test_the_catalogs_narrowing_never_loses_a_matching_memory(fake_service):
    """The catalog is asked only for rows whose stored data holds the filter's strings (LIKE
    patterns); wildcards, escapes, quotes, case and non-ASCII in them must neither lose a match
    nor let one through that the exact match refuses."""
    acme = _acme(fake_service)
    ids = {v: fake_service.remember(acme, f"fact about {v}", data={"v": v, "under_key": 1}).id for v in TRICKY}
    for value in TRICKY:
        got = fake_service.recall(acme, None, limit=100, where={"v": value}).memories
        assert [m.id for m in got] == [ids[value]], value
        ranked = fake_service.recall(acme, "fact", limit=100, where={"v": {"$in": [value, "absent"]}}).memories
        assert [m.id for m in ranked] == [ids[value]], value
    assert len(fake_service.recall(acme, None, limit=100, where={"under_key": {"$exists": True}}).memories) == len(
        TRICKY
    )
    assert fake_service.recall(acme, None, limit=100, where={"under%key": {"$exists": True}}).memories == []


def test_the_same_fact_under_other_data_is_another_memory(fake_service):
    """One fact once (issue 62) holds within the same data: a remember of a fact the space holds
    under other data stores it (its data would be lost otherwise), and recall folds no copies
    across data, so a filter finds each."""
    acme = _acme(fake_service)
    first = fake_service.remember(acme, "the billing service deploys on fridays", data={"env": "prod"})
    again = fake_service.remember(acme, "the billing service deploys on fridays", data={"env": "prod"})
    other = fake_service.remember(acme, "the billing service deploys on fridays", data={"env": "staging"})
    assert again.duplicate_of == first.id and other.duplicate_of is None and other.id != first.id
    for env, wanted in (("prod", first.id), ("staging", other.id)):
        found = fake_service.recall(acme, "when does billing deploy?", where={"env": env}).memories
        assert [m.id for m in found] == [wanted]
    assert {m.id for m in fake_service.recall(acme, "when does billing deploy?").memories} == {first.id, other.id}


@pytest.mark.sqlite  # as tests/test_backup.py; PostgreSQL's backup is pg_dump of every column
def test_backup_and_restore_carry_data_and_a_forget_since_takes_it(fake_service, home, tmp_path):
    from server.facade import restore_home
    from tests.catalogs import settings_for

    acme = _acme(fake_service)
    kept = fake_service.remember(acme, "acme builds with bazel", data={"tool": "bazel-61"})
    gone = fake_service.remember(acme, "acme's ledger id", data={"ledger": "ledger-7f3a9c-61"})
    fake_service.operator.backup(tmp_path / "backup")
    fake_service.forget(acme, gone.id)
    restored = tmp_path / "restored"
    report = restore_home(
        tmp_path / "backup",
        settings_for(restored),
        forgets_from=str(home),
        key_file=home / "backup.key",
    )
    assert report.forgets_applied == 1
    svc = open_service(settings_for(restored), embedder=HashingEmbedder())
    try:
        there = svc.caller("cli", space="acme")
        assert svc.get(there, kept.id).data == {"tool": "bazel-61"}
        assert [m.id for m in svc.recall(there, None, where={"tool": "bazel-61"}).memories] == [kept.id]
        assert svc.recall(there, None, where={"ledger": {"$exists": True}}).memories == []
    finally:
        svc.close()
    assert files_containing(restored, "ledger-7f3a9c-61") == []
