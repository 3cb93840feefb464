"""A broad filter's search (``server.memories.filter_search``) answers what the exact one does:
the partition's unfiltered ranking walked, its candidates checked against the filter, against
every allowed row scored exactly (the set read whole), on a real LanceDB store on disk and the
catalog under test, with memories superseded and forgotten among those the filter allows.

- In a partition scanned exactly, the two answers are the same: ids, order and scores, through
  the façade (feedback and the catalog's check included), for a filter that allows a few rows,
  one that allows nearly all, a range, ``$exists``, ``$in`` and a dotted path.
- In a partition served by its IVF image, every allowed row scores what the exact search scores
  it (a filter restricts candidates, never the statistics), the walk answers the unfiltered
  search's ranking less the rows not allowed, and a filter whose few rows the probe misses is
  answered whole, as the exact search answers it.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

import indexing.partitions.image_cache as image_cache
import server.memories.filter_search as filter_search
from indexing.embedding.testing import HashingEmbedder
from server.clock import to_micros
from server.facade import open_service
from server.memories.data_filter import filter_reach, parse_filter, reach_within
from server.memories.filter_search import narrowing, search_narrowed
from server.spaces import partition_key
from tests.catalogs import settings_for

QUERY = "how does the billing service deploy"
FILTERS = {
    "few": {"team": "rare"},
    "nearly all": {"team": {"$ne": "rare"}},
    "half": {"n": {"$lt": 150}},
    "exists": {"opt": {"$exists": True}},
    "in": {"team": {"$in": ["rare", "core"]}},
    "dotted": {"who.team": "core"},
    # Loose values (an integer past a double, a string past the index's length): the index
    # cannot say, the filter's own matches decides, on both paths.
    "loose range": {"big": {"$gte": 2**60}},
    "loose ne": {"long": {"$ne": "y" * 300 + "0"}},
}


def _text(i: int) -> str:
    """Texts near the query by different measures (how often they say its words), so that few
    scores tie: equal scores rank in no set order, and feedback would part them differently."""
    word = "".join(chr(97 + (i // 26**j) % 26) for j in range(3))
    said = "billing " * (1 + i % 5) + "service deploys " * (1 + i % 3) + f"pipeline {i % 7}" + " later" * (i % 11)
    return f"note {word}: {said}" if i % 3 else f"lunch {word} was soup" + " billing" * (i % 4)


@pytest.fixture
def fake_service(home, clock):
    """The hashing embedder over more buckets than the usual fixture's: fewer rows tie."""
    service = open_service(settings_for(home), embedder=HashingEmbedder(dimension=512), clock=clock)
    yield service
    service.close()


def _data(i: int) -> dict:
    data: dict = {"i": i, "team": "rare" if i % 60 == 0 else "core", "n": (i * 37) % 300, "who": {"team": "core"}}
    if i % 4 == 0:
        data["opt"] = i
    if i % 5 == 0:
        data["who"] = {"team": "other"}
    data["big"] = 2**60 + i if i % 9 == 0 else i
    if i % 13 == 0:
        data["long"] = "y" * 300 + str(i % 2)
    return data


def _filled(service, count: int):
    """``count`` memories in acme, imported; then some superseded and some forgotten, among
    them rows every filter above allows."""
    service.operator.create_space("acme")
    acme = service.caller("cli", space="acme")
    lines = [{"text": _text(i), "space": "acme", "data": _data(i)} for i in range(count)]
    report = service.operator.import_jsonl(io.BytesIO(b"".join(json.dumps(x).encode() + b"\n" for x in lines)))
    assert report.imported == count, report.errors
    ids = {json.loads(r["data"])["i"]: r["id"] for r in service._parts.catalog.all("SELECT id, data FROM memories")}
    gone = set()
    for i in (0, 1, 2, 4, 8, 120, 121, 240):  # the best matches of several filters among them
        if i % 2:
            service.forget(acme, ids[i])
        else:
            service.replace(acme, ids[i], f"{_text(i)} (replaced, now on a new pipeline)")
        gone.add(ids[i])
    return acme, gone


def _answers(service, acme, where, limit):
    found = service.recall(acme, QUERY, limit=limit, where=where)
    cut = service.operator.delivery(found.delivery_id).cut
    return [(m.id, m.score) for m in found.memories], cut


def _same_ranking(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> None:
    """The same scores in the same order, and the same ids at each score (equal scores rank in
    no set order; at the last score, the limit may take different ones of them)."""
    assert [s for _, s in a] == [s for _, s in b]
    last = a[-1][1] if a else None
    for score in {s for _, s in a} - {last}:
        assert {i for i, s in a if s == score} == {i for i, s in b if s == score}


def _forced(monkeypatch, broad: bool) -> None:
    """Every set broad (past a bound of one memory), or every set read whole."""
    monkeypatch.setattr(filter_search, "READ_WHOLE", 1 if broad else 10**9)
    monkeypatch.setattr(filter_search, "BROAD_SHARE", 10**9 if broad else 1)


@pytest.mark.parametrize("name", list(FILTERS))
def test_a_broad_filters_walk_answers_what_the_set_read_whole_answers(fake_service, monkeypatch, name):
    acme, gone = _filled(fake_service, 300)
    where = FILTERS[name]
    data_filter = parse_filter(where)
    assert data_filter is not None
    for limit in (3, 10, 100):
        _forced(monkeypatch, broad=False)
        exact, exact_cut = _answers(fake_service, acme, where, limit)
        _forced(monkeypatch, broad=True)
        walked, walked_cut = _answers(fake_service, acme, where, limit)
        _same_ranking(walked, exact)
        assert exact and not {i for i, _ in exact} & gone
        # What the filter left out: all of it when read whole, what the walk saw when broad.
        assert 0 <= walked_cut.get("filter", 0) <= exact_cut.get("filter", 0)
    book = fake_service._parts.memories
    current = [
        r["id"]
        for r in book.catalog.all("SELECT id, data FROM memories WHERE forgotten_at IS NULL AND superseded_by IS NULL")
        if data_filter.matches(json.loads(r["data"]) if r["data"] else {})
    ]
    if len(current) <= 100:  # every allowed current memory, and only those
        assert {i for i, _ in walked} == set(current)


def test_the_filters_count_is_what_the_walk_refused_and_whole_when_read(fake_service, monkeypatch):
    acme, _ = _filled(fake_service, 300)
    _forced(monkeypatch, broad=False)
    _, cut = _answers(fake_service, acme, FILTERS["few"], 10)
    live = fake_service._parts.memories.counts([partition_key("acme")])[0][partition_key("acme")][0]
    allowed = fake_service._parts.catalog.all("SELECT count(*) AS c FROM memory_fields WHERE txt = 'rare'")[0]["c"]
    assert cut["filter"] == live - allowed


@pytest.fixture
def imaged(fake_service, monkeypatch):
    """acme past a lowered IVF threshold: served from its image, IVF lists and all."""
    monkeypatch.setattr(image_cache, "ANN_THRESHOLD", 400)
    acme, gone = _filled(fake_service, 900)
    key = partition_key("acme")
    part = fake_service._parts.memories.store.live_partition(key)
    assert part.base is not None and part.base.lists.nprobe < len(part.base.lists.centroids)
    return fake_service, key, gone


def _exact(book, key, data_filter, query, depth, now):
    ids = filter_reach(book, [key], data_filter).get(key, [])  # the set read whole
    return book.store.search(key, query, depth, now=now, text=QUERY, allow=ids)


@pytest.mark.parametrize("name", ["nearly all", "half", "exists", "dotted"])
def test_in_an_imaged_partition_the_walk_keeps_the_unfiltered_ranking_of_the_allowed_rows(imaged, monkeypatch, name):
    service, key, gone = imaged
    book = service._parts.memories
    data_filter = parse_filter(FILTERS[name])
    assert data_filter is not None
    query = service._parts.embed_query(QUERY)
    now = to_micros(service.clock())
    _forced(monkeypatch, broad=True)
    narrowed = narrowing(book, [key], data_filter, {key: 900})
    assert key in narrowed.broad
    walked, _ = search_narrowed(book, narrowed, key, query, 20, now=now, text=QUERY)
    exact = _exact(book, key, data_filter, query, 10**6, now)
    exact_score = {h.id: h.score for h in exact.hits}
    walked_ids = [h.id for h in walked.hits]
    assert len(walked_ids) == 20 and not set(walked_ids) & gone
    # The same row scores the same either way: the filter changed no statistic.
    for h in walked.hits:
        assert h.score == pytest.approx(exact_score[h.id], abs=1e-5)
    # The unfiltered search's ranking, less the rows the filter refuses.
    unfiltered = book.store.search(key, query, 10**6, now=now, text=QUERY)
    allowed = set(exact_score)
    assert walked_ids == [h.id for h in unfiltered.hits if h.id in allowed][:20]
    # The IVF guarantee, as an unfiltered recall's: most of the exact best are found.
    best = [h.id for h in exact.hits][:20]
    assert len(set(walked_ids) & set(best)) >= 15


def test_in_an_imaged_partition_a_few_rows_the_probe_misses_are_answered_whole(imaged, monkeypatch):
    service, key, gone = imaged
    book = service._parts.memories
    data_filter = parse_filter(FILTERS["few"])
    assert data_filter is not None
    query = service._parts.embed_query(QUERY)
    now = to_micros(service.clock())
    _forced(monkeypatch, broad=True)
    narrowed = narrowing(book, [key], data_filter, {key: 900})
    walked, _ = search_narrowed(book, narrowed, key, query, 20, now=now, text=QUERY)
    exact = _exact(book, key, data_filter, query, 20, now)
    assert [h.id for h in walked.hits] == [h.id for h in exact.hits]
    assert np.allclose(walked.scores, exact.scores)
    current = [
        r["id"]
        for r in book.catalog.all("SELECT id, data FROM memories WHERE forgotten_at IS NULL AND superseded_by IS NULL")
        if data_filter.matches(json.loads(r["data"]) if r["data"] else {})
    ]
    assert sorted(h.id for h in walked.hits) == sorted(current)


def test_a_set_read_up_to_its_bound_is_the_set_read_whole_or_named_too_broad(fake_service):
    _filled(fake_service, 300)
    book, key = fake_service._parts.memories, partition_key("acme")
    for name, where in FILTERS.items():
        data_filter = parse_filter(where)
        assert data_filter is not None
        whole = filter_reach(book, [key], data_filter).get(key, [])
        ids, over = reach_within(book, [key], data_filter, {key: 10_000})  # a bound past every set
        assert sorted(ids.get(key, [])) == sorted(whole) and not over, name
        if len(whole) > 1 and name != "loose range":  # a set only loose rows meet is read whole
            ids, over = reach_within(book, [key], data_filter, {key: len(whole) // 2})
            assert over == {key} and key not in ids, name
