"""The seed promise over HTTP: Acme's auth is Auth0, Globex's is Clerk, and a question asked
from one client never brings back the other's answer, whether the caller names its space or
says where it works (cwd)."""

from __future__ import annotations

import json

from http_support import remember, texts

QUESTION = "how does login work?"


def test_recall_from_acme_returns_auth0_never_clerk(server, agent):
    acme = remember(agent, "Acme authentication uses Auth0", space="acme")
    globex = remember(agent, "Globex authentication uses Clerk", cwd=str(server.work / "globex"))
    assert acme != globex

    from_acme = texts(agent.post("/v1/recall", json={"query": QUESTION, "space": "acme"}))
    assert "Acme authentication uses Auth0" in from_acme
    assert not any("Clerk" in t for t in from_acme)

    from_globex = texts(agent.post("/v1/recall", json={"query": QUESTION, "cwd": str(server.work / "globex" / "src")}))
    assert "Globex authentication uses Clerk" in from_globex
    assert not any("Auth0" in t for t in from_globex)


def test_recall_without_context_reaches_personal_only(server, agent):
    remember(agent, "I prefer short answers about login", personal=True)
    got = texts(agent.post("/v1/recall", json={"query": QUESTION}))
    assert got == ["I prefer short answers about login"]


def test_http_recall_answers_exactly_like_cli_recall_json(server, agent):
    over_http = agent.post("/v1/recall", json={"query": QUESTION, "space": "acme"})
    assert over_http.status_code == 200
    cli = server.cli("recall", QUESTION, "--json", "--space", "acme", "--ai", "claude-code")
    assert over_http.json() == json.loads(cli.stdout)
    assert set(over_http.json()) == {"memories"}  # nothing about other spaces or deliveries


def test_recall_is_recorded_as_an_http_delivery_with_its_run(server, agent, operator):
    response = agent.post("/v1/recall", json={"query": QUESTION, "space": "acme"})
    assert response.status_code == 200
    last = operator.get("/v1/deliveries", params={"last": 1}).json()["deliveries"][0]
    assert (last["ai"], last["space"], last["transport"]) == ("claude-code", "acme", "http")
    # The delivery names its run: the token's standing run, whose trail holds this recall.
    run = operator.get(f"/v1/runs/{last['run_id']}").json()
    assert (run["kind"], run["ai"], run["scope"]) == ("standing", "claude-code", "*")
    assert run["steps"][-1]["kind"] == "recall"
    why = operator.get(f"/v1/deliveries/{last['id']}/why").json()
    # The operator sees that Globex would have answered; the agent never did.
    assert any("Clerk" in o["text"] for o in why["other_spaces"]["top"])
