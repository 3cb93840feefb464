"""One fact once and recall as of a time over HTTP (issue 62): ``dedupe`` on remember, its
``duplicate_of`` and ``similar`` answer, ``as_of`` on recall; bad values answer 422 by name."""

from __future__ import annotations

from datetime import UTC, datetime

from http_support import error_of, remember, texts


def test_remember_answers_duplicate_of_and_similar_and_dedupe_false_opts_out(server, agent):
    first = agent.post("/v1/memories", json={"text": "Initech's builds run on TeamCity", "space": "acme"})
    assert first.status_code == 201 and first.json()["duplicate_of"] is None and first.json()["similar"] == []
    again = agent.post("/v1/memories", json={"text": "initech's builds run on teamcity.", "space": "acme"})
    assert again.status_code == 201, again.text
    assert again.json()["id"] == first.json()["id"] == again.json()["duplicate_of"]
    update = agent.post("/v1/memories", json={"text": "Initech's builds run on Jenkins", "space": "acme"})
    assert update.json()["duplicate_of"] is None
    assert [s["id"] for s in update.json()["similar"]][:1] == [first.json()["id"]]
    assert set(update.json()["similar"][0]) == {"id", "score"}
    copy = remember(agent, "Initech's builds run on TeamCity", space="acme", dedupe=False)
    assert copy != first.json()["id"]


def test_recall_as_of_before_a_replace_answers_the_old_text(server, agent):
    before = datetime.now(UTC).isoformat()
    old = agent.post("/v1/memories", json={"text": "Initech's office plant is a fern", "space": "acme"}).json()
    replaced = agent.post(
        f"/v1/memories/{old['id']}/replace", json={"text": "Initech's office plant is a cactus", "space": "acme"}
    )
    assert replaced.status_code == 201

    def recalled(**extra: str) -> list[str]:
        return texts(agent.post("/v1/recall", json={"query": "initech office plant", "space": "acme", **extra}))

    assert "Initech's office plant is a cactus" in recalled() and "Initech's office plant is a fern" not in recalled()
    then = recalled(as_of=old["created_at"])
    assert "Initech's office plant is a fern" in then and "Initech's office plant is a cactus" not in then
    assert not {"Initech's office plant is a fern", "Initech's office plant is a cactus"} & set(recalled(as_of=before))


def test_bad_dedupe_and_as_of_are_refused_by_name(server, agent):
    bad = agent.post("/v1/memories", json={"text": "x", "space": "acme", "dedupe": "no"})
    assert bad.status_code == 422 and "dedupe" in error_of(bad)["message"]
    future = agent.post("/v1/recall", json={"query": "x", "space": "acme", "as_of": "2999-01-01T00:00:00Z"})
    assert future.status_code == 422 and "as_of" in error_of(future)["message"]


def test_operator_dedupe_over_http_counts_then_folds_within_the_space(server, agent, operator):
    first = remember(agent, "Initech's invoices are sent on the 3rd", space="acme")
    copy = remember(agent, "initech's invoices are sent on the 3rd.", space="acme", dedupe=False)
    theirs = remember(agent, "Initech's invoices are sent on the 3rd", space="globex", dedupe=False)
    dry = operator.post("/v1/dedupe", json={"space": "acme"})
    assert dry.status_code == 200 and dry.json()["dry_run"] is True and dry.json()["copies"] >= 1, dry.text
    assert agent.get(f"/v1/memories/{copy}", params={"space": "acme"}).json()["superseded_by"] is None
    done = operator.post("/v1/dedupe", json={"space": "acme", "dry_run": False}).json()
    assert done["copies"] == dry.json()["copies"] and done["dry_run"] is False
    assert agent.get(f"/v1/memories/{copy}", params={"space": "acme"}).json()["superseded_by"] == first
    assert agent.get(f"/v1/memories/{theirs}", params={"space": "globex"}).json()["superseded_by"] is None
    assert agent.post("/v1/dedupe", json={"space": "acme"}).status_code in (401, 403)
    missing = operator.post("/v1/dedupe", json={"space": "initech"})
    assert missing.status_code == 404 and "initech" in error_of(missing)["message"]
