"""The agents' listings over HTTP, against a real ``esfis serve`` (one for the module):
``GET /v1/browse/spaces`` and ``POST /v1/browse/memories`` page through what an agent token
reads and nothing else; a listed memory is in the delivery log before the answer leaves, and the
run that listed it carries it (403 ``data_barrier`` where a recall's reader would be refused);
a bad page answers 422 naming its field; and the operator's ``GET /v1/memories`` stays the
operator's, the agents' listings the agents'."""

from __future__ import annotations

import pytest
from http_support import error_of, remember

TEAMS = [f"acme/team-{i:02d}" for i in range(12)]
SECRET = "the acme/platform staging password is in vault path secret/acme-stg"


@pytest.fixture(scope="module")
def spaces(server, operator):
    for name in ["acme/platform", "acme/finance", "globex/platform", *TEAMS]:
        made = operator.post("/v1/spaces", json={"name": name})
        assert made.status_code == 201, made.text
    with server.client(server.agent_token(ai="seeder", space="globex")) as seeder:  # a run seals where it starts
        remember(seeder, "Globex authentication uses Clerk", space="globex")
        remember(seeder, "Globex deploys on Fly", space="globex/platform", data={"kind": "decision"})
    with server.client(server.agent_token(ai="seeder", space="acme")) as seeder:
        ids = [
            remember(seeder, f"acme decision {i}", space="acme", data={"kind": "decision", "n": i}) for i in range(5)
        ]
        ids.append(remember(seeder, SECRET, space="acme/platform"))
    return ids[::-1]  # newest first


@pytest.fixture
def acme(server, spaces):
    """claude-code on a token of its own, scoped to acme: a standing run that carries nothing yet."""
    with server.client(server.agent_token(space="acme")) as client:
        yield client


def pages(client, method: str, path: str, key: str, **fields):
    """Every page of a listing, its cursor followed; and how many pages it took."""
    found, cursor, count = [], None, 0
    while True:
        sent = {**fields, **({"cursor": cursor} if cursor else {})}
        response = client.get(path, params=sent) if method == "GET" else client.post(path, json=sent)
        assert response.status_code == 200, response.text
        body = response.json()
        found += body[key]
        count += 1
        if body["next_cursor"] is None:
            return found, count
        cursor = body["next_cursor"]


def test_an_agent_pages_through_the_spaces_it_reads(acme):
    first = acme.get("/v1/browse/spaces", params={"limit": 5}).json()
    assert first["personal"] is False  # a token scoped to acme does not reach personal memories
    assert [s["name"] for s in first["spaces"]] == ["acme", "acme/finance", "acme/platform", *TEAMS[:2]]
    assert first["next_cursor"] == TEAMS[1]
    names, count = pages(acme, "GET", "/v1/browse/spaces", "spaces", limit=5)
    assert [s["name"] for s in names] == ["acme", "acme/finance", "acme/platform", *TEAMS] and count == 3
    within = acme.get("/v1/browse/spaces", params={"within": "acme/platform"}).json()
    assert within == {"personal": False, "spaces": [{"name": "acme/platform"}], "next_cursor": None}


def test_an_unscoped_agent_reads_personal_and_where_it_stands(server, spaces):
    with server.client(server.agent_token()) as agent:
        nowhere = agent.get("/v1/browse/spaces").json()
        assert nowhere == {"personal": True, "spaces": [], "next_cursor": None}
        platform = agent.get("/v1/browse/spaces", params={"space": "acme/platform"}).json()
        assert [s["name"] for s in platform["spaces"]] == ["acme/platform"]


def test_an_agent_pages_through_the_memories_it_reads_newest_first(acme, spaces):
    memories, count = pages(acme, "POST", "/v1/browse/memories", "memories", limit=2)
    assert [m["id"] for m in memories] == spaces and count == 3
    assert all(m["superseded_by"] is None and m["labels"]["space"].startswith("acme") for m in memories)
    decided, _ = pages(acme, "POST", "/v1/browse/memories", "memories", filter={"n": {"$gte": 3}})
    assert [m["data"]["n"] for m in decided] == [4, 3]
    only_acme, _ = pages(acme, "POST", "/v1/browse/memories", "memories", within="acme", below=False)
    assert SECRET not in [m["text"] for m in only_acme] and len(only_acme) == 5


def test_an_acme_agent_never_sees_a_globex_space_or_memory(acme):
    names, _ = pages(acme, "GET", "/v1/browse/spaces", "spaces", limit=3)
    memories, _ = pages(acme, "POST", "/v1/browse/memories", "memories", filter={"kind": "decision"})
    assert not any(s["name"].startswith("globex") for s in names)
    assert not any("Globex" in m["text"] or m["space"].startswith("globex") for m in memories)
    for within in ("globex", "globex/platform", "acme2", "no-such-space"):  # the same answer, there or not
        for response in (
            acme.get("/v1/browse/spaces", params={"within": within}),
            acme.post("/v1/browse/memories", json={"within": within}),
        ):
            assert response.status_code == 403, response.text
            assert error_of(response) == {
                "code": "out_of_reach",
                "message": f"space {within!r} is not reachable from here",
            }
    # Standing in globex is outside this token's subtree: refused, before anything is read.
    assert acme.post("/v1/browse/memories", json={"space": "globex"}).status_code == 403
    assert acme.get("/v1/browse/spaces", params={"space": "globex"}).status_code == 403


def test_listed_memories_are_in_the_delivery_log_before_the_answer(server, operator, acme, spaces):
    listed = acme.post("/v1/browse/memories", json={"limit": 3}).json()["memories"]
    delivery = operator.get("/v1/deliveries", params={"ai": "claude-code", "last": 1}).json()["deliveries"][0]
    assert [i["memory_id"] for i in delivery["items"] if i["outcome"] == "delivered"] == [m["id"] for m in listed]
    assert delivery["transport"] == "http" and delivery["cut"]["space"] >= 2  # Globex's two, counted, never read
    assert "acme decision" not in str(delivery) and "vault" not in str(delivery)


def test_a_run_that_listed_a_memory_may_not_write_it_where_its_readers_would_not_reach(server, spaces):
    with (
        server.client(server.agent_token(space="acme")) as run,
        server.client(server.agent_token(space="acme")) as other,
    ):
        listed = run.post("/v1/browse/memories", json={"within": "acme/platform"}).json()["memories"]
        assert [m["text"] for m in listed] == [SECRET]
        refused = run.post("/v1/memories", json={"text": "staging password: secret/acme-stg", "space": "acme/finance"})
        assert refused.status_code == 403, refused.text
        assert error_of(refused)["code"] == "data_barrier" and "space:acme/platform" in error_of(refused)["message"]
        # A run that only listed spaces carries nothing: it writes there.
        assert other.get("/v1/browse/spaces").status_code == 200
        assert (
            other.post("/v1/memories", json={"text": "finance closes on the 5th", "space": "acme/finance"}).status_code
            == 201
        )


@pytest.mark.parametrize(
    ("method", "path", "fields", "field"),
    [
        ("GET", "/v1/browse/spaces", {"limit": 0}, "limit"),
        ("GET", "/v1/browse/spaces", {"limit": 201}, "limit"),
        ("GET", "/v1/browse/spaces", {"limit": "many"}, "limit"),
        ("GET", "/v1/browse/spaces", {"cursor": "../globex"}, "cursor"),
        ("GET", "/v1/browse/spaces", {"within": "Acme"}, "within"),
        ("POST", "/v1/browse/memories", {"limit": 201}, "limit"),
        ("POST", "/v1/browse/memories", {"limit": "50"}, "limit"),
        ("POST", "/v1/browse/memories", {"cursor": "last-tuesday"}, "cursor"),
        ("POST", "/v1/browse/memories", {"filter": {"n": {"$near": 1}}}, "filter"),
        ("POST", "/v1/browse/memories", {"within": "acme/"}, "within"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_bad_page_answers_422_naming_its_field(acme, method, path, fields, field):
    response = acme.get(path, params=fields) if method == "GET" else acme.post(path, json=fields)
    assert response.status_code == 422, response.text
    assert field in error_of(response)["message"]


def test_the_agents_listings_and_the_operators_stay_apart(server, operator, acme):
    for response in (operator.get("/v1/browse/spaces"), operator.post("/v1/browse/memories", json={})):
        assert response.status_code == 403 and "acts as an AI" in error_of(response)["message"]
    assert acme.get("/v1/memories", params={"space": "acme"}).status_code == 403
    assert operator.get("/v1/memories", params={"space": "acme"}).status_code == 200
    assert [s["name"] for s in operator.get("/v1/spaces").json()["spaces"]][:1] == ["acme"]
