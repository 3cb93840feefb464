"""Replace over HTTP: the new memory keeps the old one's space, or moves to ``new_space`` when
that space is in the caller's reach and may hold the old one's data (up the tree, or under a
grant); a space out of reach answers alike whether it exists."""

from __future__ import annotations

from http_support import remember


def test_replace_inherits_the_space_or_moves_within_reach(server, agent, operator):
    assert operator.post("/v1/spaces", json={"name": "acme/platform"}).status_code == 201
    writer = server.client(server.agent_token())  # writes apart: the agent's run carries what it replaces
    old = remember(writer, "acme CI runs on Jenkins", space="acme")
    kept = agent.post(f"/v1/memories/{old}/replace", json={"text": "acme CI runs on Buildkite", "space": "acme"})
    assert kept.status_code == 201 and kept.json()["space"] == "acme"
    below = remember(writer, "platform CI runs on Jenkins", space="acme/platform")
    moved = agent.post(
        f"/v1/memories/{below}/replace",
        json={"text": "all of acme's CI runs on Jenkins", "space": "acme", "new_space": "acme"},
    )
    assert moved.status_code == 201 and moved.json()["space"] == "acme"
    assert moved.json()["labels"]["from"] == ["acme/platform"]
    # Down the tree, acme's data would reach readers of acme/platform who never reached acme.
    other = remember(writer, "platform CI runs on Jenkins too", space="acme")
    body = {"text": "platform CI runs on GitHub Actions", "space": "acme", "new_space": "acme/platform"}
    refused = agent.post(f"/v1/memories/{other}/replace", json=body)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "data_barrier"
    grant = operator.post("/v1/grants", json={"from": "acme", "to": "acme/platform"})
    assert grant.status_code == 201, grant.text
    moved = agent.post(f"/v1/memories/{other}/replace", json=body)
    assert moved.status_code == 201 and moved.json()["space"] == "acme/platform"
    assert operator.delete(f"/v1/grants/{grant.json()['id']}").status_code == 200
    writer.close()


def test_replace_into_a_space_out_of_reach_says_nothing_about_it(server, agent):
    old = remember(agent, "acme deploys on fridays", space="acme")
    foreign = agent.post(f"/v1/memories/{old}/replace", json={"text": "x", "space": "acme", "new_space": "globex"})
    missing = agent.post(f"/v1/memories/{old}/replace", json={"text": "x", "space": "acme", "new_space": "initech"})
    assert foreign.status_code == missing.status_code == 403
    assert foreign.json()["error"]["message"].replace("globex", "S") == missing.json()["error"]["message"].replace(
        "initech", "S"
    )
