"""The catalog's index over memories' data (issue 69, ``server.memories.data_index``): a filter is
answered through it, every write that adds, changes or removes a memory's data keeps it current
(remember, replace, import, import --restore, forget, a forget by filter, a space's purge), and
a home made before it is filled on open. Each filter is checked against ``DataFilter.matches``,
the semantics, over the catalog's rows; the property tests (tests/test_recall_filter_properties.py)
cover the operators' combinations."""

from __future__ import annotations

import io
import json

import pytest

from indexing.embedding.testing import HashingEmbedder
from server.catalog import SCHEMA_VERSION
from server.facade import export_home, open_service
from server.facade.curation import Filter
from server.memories.data import loaded
from server.memories.data_filter import DataFilter, filter_reach, parse_filter
from server.memories.data_index import BUILT, field_rows
from server.settings import Settings
from server.spaces import partition_key
from tests.catalogs import BACKEND, settings_for

DATA = [
    {"n": 1, "team": "core", "due": "2027-01-01T09:00:00+01:00"},
    {"n": 1.0, "team": "Core", "due": "2027-01-01T08:00:00Z"},  # the same instant as the first
    {"n": True, "team": "core", "flag": False},  # a boolean is no number
    {"n": 2.5, "a": {"b": "deep"}, "a.b": "literal"},  # the literal dotted key wins
    {"a": {"b": "deep", "c": None}, "big": 2**60 + 1},
    {"long": "x" * 300, "obj": {"k": [1, 2]}, "big": 2**60},
    {"n": -3, "due": "2027-01-02T00:00:00-05:00", "tags": ["a", "b"]},
    {},
]
FILTERS = [
    {"n": 1},
    {"n": True},
    {"n": {"$ne": 1}},
    {"n": {"$gt": 1}},
    {"n": {"$gte": 1, "$lt": 3}},
    {"n": {"$in": [2.5, -3, True]}},
    {"n": {"$exists": False}},
    {"team": "core"},
    {"team": {"$ne": "core"}},
    {"team": {"$in": ["core", "Core"]}},
    {"due": "2027-01-01T08:00:00+00:00"},
    {"due": {"$gt": "2027-01-01T08:30:00Z"}},
    {"due": {"$lte": "2027-01-01T03:00:00-05:00"}},
    {"a.b": "literal"},
    {"a.b": "deep"},
    {"a.c": None},
    {"a": {"$exists": True}},
    {"a.b": {"$exists": True}, "n": {"$exists": False}},
    {"big": {"$gt": 2**60}},
    {"big": 2**60 + 1},
    {"big": {"$ne": 2**60}},
    {"long": "x" * 300},
    {"long": {"$ne": "x" * 299}},
    {"obj": {"k": [1.0, 2]}},
    {"obj": {"$ne": {"k": [1, 2]}}},
    {"tags": ["a", "b"]},
    {"flag": False},
    {"flag": 0},
]

ACME = partition_key("acme")


@pytest.fixture
def acme(fake_service):
    fake_service.operator.create_space("acme")
    return fake_service.caller("cli", space="acme")


def _fields(svc, memory_id: str) -> list[tuple]:
    return [
        tuple(r)
        for r in svc._parts.catalog.all("SELECT path, kind FROM memory_fields WHERE memory_id = ?", (memory_id,))
    ]


def _expected(svc, data_filter: DataFilter) -> set[str]:
    rows = svc._parts.catalog.all("SELECT id, data FROM memories WHERE forgotten_at IS NULL AND partition = ?", (ACME,))
    return {r["id"] for r in rows if data_filter.matches(loaded(r["data"]))}


def test_a_memorys_fields_are_the_paths_a_filter_names_with_the_value_the_filter_finds():
    rows = {path: (kind, num, txt, instant) for path, kind, num, txt, instant in field_rows(DATA[3])}
    assert rows["a.b"] == ("s", None, "literal", None)  # the literal key, as at_path finds it
    assert rows["a"][0] == "j" and rows["n"] == ("n", 2.5, None, None)
    assert field_rows({"t": True, "u": 1}) == [("t", "b", 1.0, None, None), ("u", "n", 1.0, None, None)]
    one, two = (dict((r[0], r[4]) for r in field_rows(d)) for d in DATA[:2])
    assert one["due"] == two["due"]  # two offsets, one instant
    loose = {path: kind for path, kind, *_ in field_rows(DATA[5])}
    assert loose == {"long": "x", "obj": "j", "obj.k": "j", "big": "n"}  # 2**60 is a double exactly
    assert {p: k for p, k, *_ in field_rows(DATA[4])}["big"] == "x"  # 2**60 + 1 is not


@pytest.mark.parametrize("raw", FILTERS, ids=[json.dumps(f)[:40] for f in FILTERS])
def test_every_operator_answers_through_the_index_exactly_what_the_filter_matches(fake_service, acme, raw):
    ids = [fake_service.remember(acme, f"fact {i}", data=d).id for i, d in enumerate(DATA)]
    data_filter = parse_filter(raw)
    assert data_filter is not None
    wanted = _expected(fake_service, data_filter)
    reach = filter_reach(fake_service._parts.memories, [ACME], data_filter)
    assert set(reach.get(ACME, [])) == wanted
    newest = fake_service.recall(acme, None, limit=100, where=raw).memories
    assert {m.id for m in newest} == wanted and {m.id for m in newest} <= set(ids)
    ranked = fake_service.recall(acme, "fact", limit=100, where=raw).memories
    assert {m.id for m in ranked} == wanted


def test_an_exact_filter_never_reads_a_memorys_data(fake_service, acme, monkeypatch):
    for i in range(30):
        fake_service.remember(acme, f"fact {i}", data={"n": i, "team": "core" if i % 3 else "rare"})
    data_filter = parse_filter({"n": {"$gte": 10}, "team": {"$ne": "rare"}})
    wanted = _expected(fake_service, data_filter)

    def refuse(self, data):
        raise AssertionError("matched in Python")

    monkeypatch.setattr(DataFilter, "matches", refuse)
    reach = filter_reach(fake_service._parts.memories, [ACME], data_filter)
    assert set(reach[ACME]) == wanted and len(wanted) == 14


def test_forget_takes_a_memorys_fields_with_its_data(fake_service, acme):
    kept = fake_service.remember(acme, "acme builds with bazel", data={"tool": "bazel", "v": 6})
    gone = fake_service.remember(acme, "acme's ledger", data={"ledger": "ledger-7f3a", "v": 7, "x": {"y": 1}})
    assert len(_fields(fake_service, gone.id)) == 4
    fake_service.forget(acme, gone.id)
    assert _fields(fake_service, gone.id) == [] and len(_fields(fake_service, kept.id)) == 2
    assert fake_service.recall(acme, None, where={"v": {"$gt": 0}}).memories[0].id == kept.id
    assert fake_service.recall(acme, None, where={"ledger": {"$exists": True}}).memories == []
    assert filter_reach(fake_service._parts.memories, [ACME], parse_filter({"v": {"$ne": 6}})) == {}


def test_a_forget_by_filter_and_a_purged_space_take_their_fields(fake_service, acme):
    fake_service.operator.create_space("globex")
    globex = fake_service.caller("cli", space="globex")
    for i in range(5):
        fake_service.remember(acme, f"acme fact {i}", data={"i": i})
        fake_service.remember(globex, f"globex fact {i}", data={"i": i})
    preview = fake_service.operator.preview_forget(Filter(space="acme"))
    assert fake_service.operator.forget_where(Filter(space="acme"), up_to=preview.up_to) == 5
    count = "SELECT count(*) FROM memory_fields WHERE partition = ?"
    assert fake_service._parts.catalog.one(count, (ACME,))[0] == 0
    assert fake_service._parts.catalog.one(count, (partition_key("globex"),))[0] == 5
    fake_service.operator.remove_space("globex", purge=True)
    assert fake_service._parts.catalog.one("SELECT count(*) FROM memory_fields")[0] == 0


def test_replace_indexes_the_new_memory_and_a_filter_answers_the_current_one(fake_service, acme):
    old = fake_service.remember(acme, "acme deploys on fridays", data={"day": 5})
    new = fake_service.replace(acme, old.id, "acme deploys on thursdays", data={"day": 4})
    assert _fields(fake_service, new.id) == [("day", "n")]
    assert [m.id for m in fake_service.recall(acme, None, where={"day": {"$gte": 4}}).memories] == [new.id]
    assert [m.id for m in fake_service.recall(acme, "deploys", where={"day": {"$gte": 4}}).memories] == [new.id]


def test_an_import_indexes_its_rows(fake_service, acme):
    lines = [{"text": f"imported fact {i}", "space": "acme", "data": {"n": i, "even": i % 2 == 0}} for i in range(50)]
    report = fake_service.operator.import_jsonl(io.BytesIO(b"".join(json.dumps(x).encode() + b"\n" for x in lines)))
    assert report.imported == 50
    assert fake_service._parts.catalog.one("SELECT count(*) FROM memory_fields")[0] == 100
    found = fake_service.recall(acme, None, limit=100, where={"even": True, "n": {"$lt": 10}}).memories
    assert sorted(m.data["n"] for m in found) == [0, 2, 4, 6, 8]


def test_an_import_restore_indexes_the_restored_data(fake_service, acme, tmp_path, clock):
    source = open_service(Settings(home=tmp_path / "source", model=None), embedder=HashingEmbedder(), clock=clock)
    try:
        source.operator.create_space("acme")
        there = source.caller("cli", space="acme")
        ids = [
            source.remember(there, f"restored fact {i}", data={"n": i, "due": f"2027-0{i + 1}-01T00:00:00Z"}).id
            for i in range(4)
        ]
        out = io.BytesIO()
        export_home(out, Settings(home=source.home, model=None))
    finally:
        source.close()
    report = fake_service.operator.import_restore(io.BytesIO(out.getvalue()))
    assert report.imported == 4, report.errors
    found = fake_service.recall(acme, None, where={"due": {"$gte": "2027-02-01T01:00:00+01:00"}}).memories
    assert {m.id for m in found} == set(ids[1:])


def _make_old(catalog) -> None:
    """The catalog as esfis made it before version 14: no memory_fields, schema 13."""
    with catalog.transaction() as tx:
        if BACKEND == "postgresql":
            tx.execute("DROP TABLE memory_fields")
            tx.execute("DROP TRIGGER memory_fields_on_forget ON memories")
            tx.execute("DROP FUNCTION memory_fields_forget()")
        else:
            tx.execute("DROP TRIGGER memory_fields_on_forget")
            tx.execute("DROP TABLE memory_fields")
        tx.execute("DELETE FROM meta WHERE key = ?", (BUILT,))
        tx.execute("UPDATE meta SET value = '13' WHERE key = 'schema'")


def test_a_home_made_before_the_index_is_filled_from_its_data_on_open(home, clock):
    svc = open_service(settings_for(home), embedder=HashingEmbedder(), clock=clock)
    svc.operator.create_space("acme")
    acme = svc.caller("cli", space="acme")
    ids = [
        svc.remember(acme, f"old fact {i}", data={"n": i, "who": {"team": "core" if i % 2 else "ops"}}).id
        for i in range(6)
    ]
    svc.forget(acme, ids[5])
    _make_old(svc._parts.catalog)
    svc.close()
    svc = open_service(settings_for(home), embedder=HashingEmbedder(), clock=clock)
    try:
        acme = svc.caller("cli", space="acme")
        assert svc._parts.catalog.one("SELECT value FROM meta WHERE key = 'schema'")[0] == str(SCHEMA_VERSION)
        assert svc._parts.catalog.one("SELECT count(*) FROM memory_fields")[0] == 5 * 3  # n, who, who.team
        found = svc.recall(acme, None, limit=10, where={"who.team": "core", "n": {"$ne": 3}}).memories
        assert [m.id for m in found] == [ids[1]]
        gone = svc.remember(acme, "new fact", data={"n": 9})
        svc.forget(acme, gone.id)  # the trigger came back with the schema
        assert _fields(svc, gone.id) == []
    finally:
        svc.close()


def _make_15(catalog) -> None:
    """The catalog as esfis made it at version 15: field rows without their memory's time."""
    with catalog.transaction() as tx:
        for name in ("num", "txt", "instant"):
            tx.execute(f"DROP INDEX memory_fields_by_{name}_at")
        tx.execute("ALTER TABLE memory_fields DROP COLUMN created_at")
        tx.execute("CREATE INDEX memory_fields_by_txt ON memory_fields (partition, path, txt) WHERE txt IS NOT NULL")
        tx.execute("UPDATE meta SET value = '15' WHERE key = 'schema'")


def test_a_home_made_at_version_15_has_its_field_rows_dated_on_open(home, clock):
    """Release 16 over a live home: each field row gets its memory's time, the value indexes are
    rebuilt with it, and a filter with no query reads the newest matches through them."""
    from server.memories import newest

    svc = open_service(settings_for(home), embedder=HashingEmbedder(), clock=clock)
    svc.operator.create_space("acme")
    acme = svc.caller("cli", space="acme")
    ids = []
    for i in range(12):
        clock.advance(minutes=1)
        ids.append(svc.remember(acme, f"old fact {i}", data={"team": "rare" if i % 3 == 0 else "core", "n": i}).id)
    _make_15(svc._parts.catalog)
    svc.close()
    svc = open_service(settings_for(home), embedder=HashingEmbedder(), clock=clock)
    try:
        catalog = svc._parts.catalog
        assert catalog.one("SELECT value FROM meta WHERE key = 'schema'")[0] == str(SCHEMA_VERSION)
        dated = catalog.all(
            "SELECT f.created_at, m.created_at FROM memory_fields f JOIN memories m ON m.id = f.memory_id"
        )
        assert len(dated) == 12 * 2 and all(f == m for f, m in dated)
        acme = svc.caller("cli", space="acme")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(newest, "WALK", 1)  # past the walk: the index's newest answers
            patch.setattr(newest, "FIRST_READ", 1)
            found = svc.recall(acme, None, limit=3, where={"team": {"$in": ["rare", "none"]}}).memories
        assert [m.id for m in found] == [ids[9], ids[6], ids[3]]
    finally:
        svc.close()


@pytest.mark.parametrize("walk, small_set", [(2, 2), (2, 1000), (1000, 2)], ids=["deep walk", "set first", "walk"])
def test_no_query_answers_the_newest_matches_whichever_way_it_reads(
    fake_service, acme, monkeypatch, clock, walk, small_set
):
    """The newest-first walk, the deeper walk for a large set and the set read whole answer alike."""
    from server.memories import data_filter, newest

    monkeypatch.setattr(newest, "MOST_READ", 0)  # the reads before the index kept dates (a range here)
    monkeypatch.setattr(newest, "WALK", walk)
    monkeypatch.setattr(data_filter, "SMALL_SET", small_set)
    monkeypatch.setattr(newest, "DEEP_WALK", 40)
    ids = []
    for i in range(60):
        clock.advance(minutes=1)
        ids.append(fake_service.remember(acme, f"event {i}", data={"n": i, "odd": i % 2 == 1}).id)
    found = fake_service.recall(acme, None, limit=5, where={"odd": True, "n": {"$ne": 59}}).memories
    assert [m.id for m in found] == [ids[i] for i in (57, 55, 53, 51, 49)]
    old = fake_service.recall(acme, None, limit=5, where={"n": {"$lt": 3}}).memories  # none among the newest
    assert [m.id for m in old] == [ids[2], ids[1], ids[0]]


def test_rows_an_older_server_wrote_without_a_time_fall_back_to_the_set_and_check_dates_them(fake_service, acme, clock):
    """A server of the release before schema 16, still running over an upgraded home, writes index
    rows without their memory's time: the index's newest read cannot order them, so the set is
    read as before (the same answer), and ``esfis check --repair`` gives them their time."""
    from server.memories import newest

    ids = []
    for i in range(81):
        clock.advance(minutes=1)
        ids.append(fake_service.remember(acme, f"fact {i}", data={"team": "rare" if i % 2 else "core"}).id)
    catalog = fake_service._parts.catalog
    with catalog.transaction() as tx:  # the newest match undated (SQLite sorts it last), and another
        tx.execute("UPDATE memory_fields SET created_at = NULL WHERE memory_id IN (?, ?)", (ids[79], ids[2]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(newest, "WALK", 1)
        patch.setattr(newest, "FIRST_READ", 1)
        found = fake_service.recall(acme, None, limit=3, where={"team": "rare"}).memories
    assert [m.id for m in found] == [ids[79], ids[77], ids[75]]
    report = fake_service.operator.check(repair=True)
    assert report.repaired, report.summary()
    assert catalog.one("SELECT count(*) FROM memory_fields WHERE created_at IS NULL")[0] == 0


def test_an_imports_rows_share_one_time_and_the_newest_of_them_are_the_last_written(fake_service, acme):
    """An import's rows share their time; among them the newest are the last written (rowid), not
    the highest ids: the index's newest read never takes part of such a run as the newest (it
    reads past the whole run, or leaves it to the set)."""
    from server.memories import newest

    lines = [
        {"text": f"imported fact {i}", "space": "acme", "data": {"team": "rare" if i % 2 else "core"}}
        for i in range(80)
    ]
    report = fake_service.operator.import_jsonl(io.BytesIO(b"".join(json.dumps(x).encode() + b"\n" for x in lines)))
    assert report.imported == 80
    rows = fake_service._parts.catalog.all(
        "SELECT id FROM memories WHERE partition = ? AND data LIKE '%rare%' ORDER BY created_at DESC, rowid DESC",
        (ACME,),
    )
    wanted = [r[0] for r in rows][:3]  # by the order of writing; an import's ids follow another order
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(newest, "WALK", 1)
        patch.setattr(newest, "FIRST_READ", 2)
        found = fake_service.recall(acme, None, limit=3, where={"team": {"$in": ["rare", "none"]}}).memories
    assert [m.id for m in found] == wanted


class Rounds:
    """Stands for the upkeep's ``closing`` event: each ``wait`` (one between two rounds) blocks
    until the test lets one round run, so the test knows where the loop is."""

    def __init__(self) -> None:
        import threading

        self._go, self._waiting, self._closed = threading.Semaphore(0), threading.Semaphore(0), False

    def wait(self, timeout: float) -> bool:
        self._waiting.release()
        self._go.acquire()
        return self._closed

    def one(self) -> None:
        """Let one round run (the loop parked in ``wait``), and return once it is over."""
        self._go.release()
        assert self._waiting.acquire(timeout=30)

    def parked(self) -> None:
        """Return once the loop first waits."""
        assert self._waiting.acquire(timeout=30)

    def set(self) -> None:
        self._closed = True
        self._go.release()


def test_a_servers_upkeep_mends_what_an_older_releases_server_left_out_of_the_index(
    fake_service, acme, clock, monkeypatch
):
    """Servers of older releases left running over an upgraded home (an agent's ``esfis mcp``
    started before the upgrade) keep writing as they know how: one from before the index over
    data writes no rows for its memories' data (a filter would miss them), one from before schema
    16 writes rows without a time. A server of this release's upkeep mends both by itself, a
    batch at a time, and ``esfis check`` then finds nothing to mend. Found some, it looks again at
    every round (about a minute) until one finds nothing; then only with the trail's pruning."""
    import threading

    from server.facade import upkeep
    from server.memories import data_mending

    ids = []
    for i in range(23):
        clock.advance(minutes=1)
        ids.append(fake_service.remember(acme, f"fact {i}", data={"team": "core", "i": i}).id)
    fake_service.forget(acme, ids[0])  # its rows are gone with its data: nothing to mend
    catalog = fake_service._parts.catalog

    def unindex(*memories: str) -> None:  # what a release from before the index leaves
        with catalog.transaction() as tx:
            listed = json.dumps(list(memories))
            tx.execute(f"DELETE FROM memory_fields WHERE memory_id IN (SELECT value FROM {tx.sql.values})", (listed,))

    def left() -> tuple[int, int]:
        rows, undated = catalog.one("SELECT count(*), count(*) - count(created_at) FROM memory_fields")
        return 2 * 22 - rows, undated

    unindex(*ids[5:14])
    with catalog.transaction() as tx:  # what a release from before schema 16 leaves
        tx.execute("UPDATE memory_fields SET created_at = NULL WHERE memory_id <> ?", (ids[3],))
    assert left() == (2 * 9, 2 * (21 - 9))
    missed = fake_service.recall(acme, None, limit=50, where={"team": "core"}).memories
    assert not {m.id for m in missed} & set(ids[5:14])  # the harm: a filter misses them
    assert not fake_service.operator.check().whole  # what a person would see before the upkeep ran

    monkeypatch.setattr(data_mending, "MEND_BATCH", 4)  # several batches
    monkeypatch.setattr(upkeep, "UPKEEP_FIRST_S", 0)  # the first round is one that prunes and mends
    rounds = Rounds()
    parts = fake_service._parts
    args = (rounds, fake_service.operator, fake_service.connections, fake_service.rates, parts.deliveries, catalog)
    worker = threading.Thread(target=upkeep.keep_up, args=args, daemon=True)
    worker.start()
    try:
        rounds.parked()
        rounds.one()  # prunes the trail and mends
        assert left() == (0, 0)
        found = fake_service.recall(acme, None, limit=50, where={"team": "core"}).memories
        assert {m.id for m in found} == set(ids[1:])
        report = fake_service.operator.check()
        assert report.whole and not report.found, report.summary()
        unindex(ids[15])  # the older server writes on
        rounds.one()  # no pruning this round: mended because the last round found some
        assert left() == (0, 0)
        rounds.one()  # finds nothing
        unindex(ids[16])
        rounds.one()  # no longer looked for at every round: a scan of the table each
        assert left() == (2, 0)
    finally:
        rounds.set()
        worker.join(10)
    rows = catalog.all(
        "SELECT f.created_at AS dated, m.created_at AS written FROM memory_fields f JOIN memories m ON m.id = f.memory_id"
    )
    assert all(r["dated"] == r["written"] for r in rows)
    assert (data_mending.index_unindexed(catalog), data_mending.date_undated(catalog)) == (1, 0)
