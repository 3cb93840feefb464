"""Metadata on memories over HTTP, on the real model and a real ``esfis serve`` (one for the
module): ``data`` on remember, replace, get and recall; recall's ``filter`` applied before
relevance (the best matches by meaning carry none of the data asked for, yet ``limit`` matching
memories come back), without a query (the newest that match), never past the caller's reach;
and bad data or a malformed filter answered 422 naming what is wrong, with nothing stored."""

from __future__ import annotations

import pytest
from http_support import error_of, remember

SERVICES = [
    "billing",
    "search",
    "auth",
    "gateway",
    "ledger",
    "mailer",
    "reports",
    "uploads",
    "chat",
    "admin",
    "metrics",
    "export",
    "imports",
    "checkout",
    "catalog",
]


@pytest.fixture(scope="module")
def acme(server):
    with server.client(server.agent_token(space="acme")) as client:
        yield client


@pytest.fixture(scope="module")
def written(server, acme):
    """Deploy notes (what the query is about) and a few decisions about other things."""
    with server.client(server.agent_token(space="globex")) as globex:
        for i in range(4):
            remember(globex, f"globex deploys with Spinnaker, rollout {i}", space="globex", data={"kind": "decision"})
    notes = [
        remember(acme, text, space="acme", data={"kind": "note", "rank": i})
        for i, text in enumerate(
            [
                "acme deploys to production with ArgoCD",
                "acme's deploy pipeline runs on Buildkite",
                "acme deploys every weekday at ten",
                "rolling back an acme deploy uses argocd app rollback",
                "acme deploy approvals come from the release manager",
                "acme staging deploys happen on every merge",
            ]
            # More deploy notes than a recall's limit and its runners-up: a filter applied to the
            # best candidates after ranking would find no decision among them.
            + [f"acme deploy of service {name} goes through ArgoCD" for name in SERVICES]
        )
    ]
    decisions = [
        remember(acme, text, space="acme", data={"kind": "decision", "at": f"2026-0{i + 1}-01T00:00:00Z"})
        for i, text in enumerate(
            [
                "the team lunch is on fridays",
                "new laptops are ordered through IT",
                "the office plants are watered on mondays",
            ]
        )
    ]
    return notes, decisions


def test_data_comes_back_on_every_answer_that_shows_a_memory(acme, written):
    notes, _ = written
    got = acme.get(f"/v1/memories/{notes[0]}", params={"space": "acme"})
    assert got.status_code == 200 and got.json()["data"] == {"kind": "note", "rank": 0}
    plain = remember(acme, "acme keeps its runbooks in the wiki", space="acme")
    assert acme.get(f"/v1/memories/{plain}", params={"space": "acme"}).json()["data"] == {}
    replaced = acme.post(
        f"/v1/memories/{plain}/replace",
        json={"text": "acme keeps runbooks in Notion", "space": "acme", "data": {"v": 2}},
    )
    assert replaced.status_code == 201 and replaced.json()["data"] == {"v": 2}


def test_filter_runs_before_relevance_on_the_real_model(acme, written):
    notes, decisions = written
    best = acme.post("/v1/recall", json={"query": "how does acme deploy?", "space": "acme", "limit": 3})
    assert {m["id"] for m in best.json()["memories"]} <= set(notes)  # meaning alone finds deploy notes
    filtered = acme.post(
        "/v1/recall",
        json={"query": "how does acme deploy?", "space": "acme", "limit": 3, "filter": {"kind": "decision"}},
    )
    assert filtered.status_code == 200, filtered.text
    memories = filtered.json()["memories"]
    assert len(memories) == 3 and {m["id"] for m in memories} == set(decisions)
    assert all(m["data"]["kind"] == "decision" and m["space"] == "acme" for m in memories)  # never globex's
    since = {"kind": "decision", "at": {"$gte": "2026-02-01T00:00:00+00:00"}}
    newest = acme.post("/v1/recall", json={"space": "acme", "filter": since})
    assert [m["id"] for m in newest.json()["memories"]] == decisions[:0:-1]  # no query: newest first


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"query": "deploy", "filter": {"kind": {"$like": "dec%"}}}, "unknown operator '$like'"),
        ({"query": "deploy", "filter": {"kind": {"$lt": "z"}}}, "$lt compares numbers or ISO 8601 times"),
        ({"query": "deploy", "filter": {"$or": []}}, "is not a field"),
        ({"filter": {}}, "query"),
    ],
    ids=["unknown-operator", "range-on-text", "operator-at-top", "neither-query-nor-filter"],
)
def test_malformed_filter_answers_422_naming_what_is_wrong(acme, written, body, says):
    refused = acme.post("/v1/recall", json={**body, "space": "acme"})
    assert refused.status_code == 422, refused.text
    error = error_of(refused)
    assert error["code"] == "invalid_input" and says in error["message"]


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"a": {"b": {"c": {"d": {"e": 1}}}}}, "nested too deep"),
        ({"blob": "x" * 5000}, "the limit is 4 KiB"),
        ({"$set": 1}, "may not start with $"),
        ("not an object", "data"),
    ],
    ids=["too-deep", "too-large", "dollar-key", "not-an-object"],
)
def test_bad_data_answers_422_and_stores_nothing(acme, written, data, says):
    text = f"a memory whose data is refused: {says}"
    refused = acme.post("/v1/memories", json={"text": text, "space": "acme", "data": data})
    assert refused.status_code == 422, refused.text
    assert says in error_of(refused)["message"]
    found = acme.post("/v1/recall", json={"query": text, "space": "acme", "limit": 100}).json()["memories"]
    assert text not in {m["text"] for m in found}
