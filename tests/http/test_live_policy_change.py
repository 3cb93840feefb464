"""Policies, spaces and tokens changed by the CLI while the server runs apply to its next
request, without a restart: the core caches none of them."""

from __future__ import annotations

from http_support import error_of, remember, texts

QUERY = {"query": "how does login work?", "space": "acme"}


def test_a_deny_added_by_the_cli_applies_to_the_next_request(server, agent):
    remember(agent, "Acme authentication uses Auth0", space="acme")
    assert "Acme authentication uses Auth0" in texts(agent.post("/v1/recall", json=QUERY))

    server.cli("--deny", "claude-code", "acme")
    assert texts(agent.post("/v1/recall", json=QUERY)) == []
    refused = agent.post("/v1/memories", json={"text": "Acme uses SSO", "space": "acme"})
    assert refused.status_code == 403 and error_of(refused)["code"] == "policy_denied"

    server.cli("policy", "clear", "claude-code", "acme")
    assert "Acme authentication uses Auth0" in texts(agent.post("/v1/recall", json=QUERY))


def test_a_deny_for_everyone_then_an_allow_for_one(server, agent):
    server.cli("--deny", "*", "acme")
    server.cli("--allow", "claude-code", "acme")
    try:
        assert "Acme authentication uses Auth0" in texts(agent.post("/v1/recall", json=QUERY))
        with server.client(server.token("--ai", "cursor")) as cursor:
            assert texts(cursor.post("/v1/recall", json=QUERY)) == []
    finally:
        server.cli("policy", "clear", "*", "acme")
        server.cli("policy", "clear", "claude-code", "acme")


def test_a_space_added_by_the_cli_is_usable_at_once(server, agent):
    folder = server.folder("initech")
    missing = agent.post("/v1/recall", json={"query": "x", "space": "initech"})
    assert missing.status_code == 404
    server.cli("space", "add", str(folder))
    remember(agent, "Initech uses Okta for login", cwd=str(folder))
    got = texts(agent.post("/v1/recall", json={"query": "how does login work?", "space": "initech"}))
    assert got == ["Initech uses Okta for login"]
