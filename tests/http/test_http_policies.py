"""Policies over HTTP, on every verb: a deny keeps an AI out of a space entirely, and an id the
caller cannot see (denied, or in another space) answers exactly like an id that never was."""

from __future__ import annotations

import pytest
from http_support import error_of, remember, texts

RANDOM_ID = "mem_aaaaaaaaaaaaaaaaaaaaaaaaaa"


@pytest.fixture(scope="module")
def world(server, operator):
    """acme and globex memories written before claude-code is denied acme."""
    with server.client(server.agent_token()) as writer:
        ids = {
            "acme": remember(writer, "Acme authentication uses Auth0", space="acme"),
            "globex": remember(writer, "Globex authentication uses Clerk", space="globex"),
            "personal": remember(writer, "I like terse commit messages", personal=True),
        }
    rule = operator.put("/v1/policies", json={"ai": "claude-code", "space": "acme", "effect": "deny"})
    assert rule.status_code == 200 and rule.json() == {"ai": "claude-code", "space": "acme", "effect": "deny"}
    return ids


def _same_except_id(response, reference, id_: str) -> None:
    assert response.status_code == reference.status_code == 404
    assert response.content.replace(id_.encode(), RANDOM_ID.encode()) == reference.content
    assert error_of(response)["code"] == "not_found"


def test_recall_returns_nothing_from_a_denied_space(world, agent):
    got = texts(agent.post("/v1/recall", json={"query": "how does login work?", "space": "acme"}))
    assert got == ["I like terse commit messages"]  # personal still reaches; acme does not


def test_remember_into_a_denied_space_is_403(world, agent):
    response = agent.post("/v1/memories", json={"text": "Acme rotates keys monthly", "space": "acme"})
    assert response.status_code == 403
    error = error_of(response)
    assert error["code"] == "policy_denied"
    assert "globex" not in error["message"]


@pytest.mark.parametrize("verb", ["get", "replace", "forget"])
def test_a_denied_id_answers_exactly_like_a_random_id(world, agent, operator, verb):
    def call(id_):
        if verb == "get":
            return agent.get(f"/v1/memories/{id_}", params={"space": "acme"})
        if verb == "replace":
            return agent.post(f"/v1/memories/{id_}/replace", json={"text": "Acme moved to Okta", "space": "acme"})
        return agent.delete(f"/v1/memories/{id_}", params={"space": "acme"})

    _same_except_id(call(world["acme"]), call(RANDOM_ID), world["acme"])
    # Nothing happened to it: acme still holds its one memory.
    spaces = operator.get("/v1/spaces").json()["spaces"]
    assert {s["name"]: s["memories"] for s in spaces}["acme"] == 1


@pytest.mark.parametrize("verb", ["get", "replace", "forget"])
def test_a_foreign_id_answers_exactly_like_a_random_id(world, server, verb):
    """From cwd in acme (allowed for this AI), a globex id is simply unknown."""
    with server.client(server.token("--ai", "windsurf")) as windsurf:
        where = {"cwd": str(server.work / "acme" / "src")}

        def call(id_):
            if verb == "get":
                return windsurf.get(f"/v1/memories/{id_}", params=where)
            if verb == "replace":
                return windsurf.post(f"/v1/memories/{id_}/replace", json={"text": "Globex moved", **where})
            return windsurf.delete(f"/v1/memories/{id_}", params=where)

        _same_except_id(call(world["globex"]), call(RANDOM_ID), world["globex"])
        assert windsurf.get(f"/v1/memories/{world['acme']}", params=where).status_code == 200


def test_another_ai_is_not_affected_by_the_deny(world, server):
    with server.client(server.token("--ai", "cursor")) as cursor:
        got = texts(cursor.post("/v1/recall", json={"query": "how does login work?", "space": "acme"}))
        assert "Acme authentication uses Auth0" in got and not any("Clerk" in t for t in got)


def test_deny_for_everyone_then_allow_one_ai(world, server, operator):
    assert operator.put("/v1/policies", json={"ai": "*", "space": "globex", "effect": "deny"}).status_code == 200
    assert operator.put("/v1/policies", json={"ai": "cursor", "space": "globex", "effect": "allow"}).status_code == 200
    try:
        with (
            server.client(server.token("--ai", "cursor")) as cursor,
            server.client(server.token("--ai", "aider")) as aider,
        ):
            query = {"query": "how does login work?", "space": "globex"}
            assert "Globex authentication uses Clerk" in texts(cursor.post("/v1/recall", json=query))
            assert not any("Clerk" in t for t in texts(aider.post("/v1/recall", json=query)))
    finally:
        for ai in ("*", "cursor"):
            assert operator.delete("/v1/policies", params={"ai": ai, "space": "globex"}).status_code == 204
    assert operator.delete("/v1/policies", params={"ai": "cursor", "space": "globex"}).status_code == 404


def test_clearing_the_deny_lets_the_ai_back_in(world, agent, operator):
    assert operator.delete("/v1/policies", params={"ai": "claude-code", "space": "acme"}).status_code == 204
    try:
        got = texts(agent.post("/v1/recall", json={"query": "how does login work?", "space": "acme"}))
        assert "Acme authentication uses Auth0" in got
        assert agent.get(f"/v1/memories/{world['acme']}", params={"space": "acme"}).status_code == 200
    finally:
        operator.put("/v1/policies", json={"ai": "claude-code", "space": "acme", "effect": "deny"})
