"""The data barrier over HTTP, on a real server: each agent session a run token that a
harness opens (``POST /v1/runs``), the laundering case refused with 403 ``data_barrier`` (HTTP
has no person to ask), a grant that lets exactly that write through, context references, the
operator's trail, and a run's carried labels surviving a restart of ``esfis serve``."""

from __future__ import annotations

import pytest
from http_support import error_of, held, not_written, remember

from tests.http.conftest import start_server, stop_server

SECRET = "the staging database password is in vault path secret/acme-stg"


@pytest.fixture
def harness(server):
    """A harness's credential for claude-code: it opens runs and does nothing else. One a test:
    its runs are one principal, which holds one pending call at a time (docs/barrier.md)."""
    with server.client(server.token("--ai", "claude-code", "--runs-only")) as client:
        yield client


def session(server, harness):
    """A new agent session: a client holding only a fresh run token, and the run's id."""
    opened = harness.post("/v1/runs", json={})
    assert opened.status_code == 201, opened.text
    return server.client(opened.json()["token"]), opened.json()["run"]


def setup_platform(server, operator):
    names = [s["name"] for s in operator.get("/v1/spaces").json()["spaces"]]
    for name in ("acme/platform", "acme/finance"):
        if name not in names:
            assert operator.post("/v1/spaces", json={"name": name}).status_code == 201


def test_laundering_into_personal_is_refused_then_granted(server, agent, operator, harness):
    setup_platform(server, operator)
    remember(agent, SECRET, space="acme/platform")
    run, run_id = session(server, harness)
    recalled = run.post("/v1/recall", json={"query": "staging database password", "space": "acme/platform"})
    assert recalled.json()["memories"][0]["text"] == SECRET
    assert recalled.json()["memories"][0]["labels"]["space"] == "acme/platform"
    leak = {"text": "staging db password: vault secret/acme-stg", "personal": True, "space": "acme/platform"}
    approval = held(run.post("/v1/memories", json=leak))  # no person at an HTTP call: held for the operator
    mine = run.get(f"/v1/approvals/{approval}", params={"space": "acme/platform"})
    assert mine.status_code == 200 and mine.json()["status"] == "pending"
    other, _ = session(server, harness)
    globex = other.post("/v1/recall", json={"query": "staging database password vault", "space": "globex"})
    assert all("vault" not in m["text"] for m in globex.json()["memories"])
    # Another session carries nothing of this one's: it may write personal.
    fresh, _ = session(server, harness)
    assert fresh.post("/v1/memories", json={"text": "I like short answers", "personal": True}).status_code == 201

    grant = operator.post("/v1/grants", json={"from": "acme/platform", "to": None, "ai": "claude-code"}).json()
    written = run.post("/v1/memories", json=leak)
    assert written.status_code == 201, written.text
    assert written.json()["labels"]["from"] == ["acme/platform"] and written.json()["space"] is None
    trail = operator.get(f"/v1/runs/{run_id}").json()
    gates = [s for s in trail["steps"] if s["kind"] == "gate"]
    assert [(g["decision"], g["grant"]) for g in gates] == [("allowed", grant["id"])]
    assert [
        (s["kind"], s["decision"], s["memory_ids"]) for s in trail["steps"] if s["kind"] == "approval_requested"
    ] == [("approval_requested", "held", [approval])]
    assert trail["carries"] == ["space:acme/platform"]
    assert all(
        set(s) == {"at", "kind", "labels", "decision", "rule", "grant", "target", "memory_ids", "by"}
        for s in trail["steps"]
    )
    assert SECRET not in str(trail)
    assert operator.delete(f"/v1/grants/{grant['id']}").json()["revoked_at"] is not None
    not_written(run.post("/v1/memories", json=leak))  # its first is still held: one a run
    for client in (run, other, fresh):
        client.close()


def test_two_sessions_are_two_runs_and_each_is_sealed_at_its_first_step(server, agent, operator, harness):
    setup_platform(server, operator)
    remember(agent, "platform deploys with ArgoCD", space="acme/platform")
    one, one_id = session(server, harness)
    two, two_id = session(server, harness)
    one.post("/v1/recall", json={"query": "deploys", "space": "acme/platform"})
    assert two.post("/v1/recall", json={"query": "login", "space": "globex"}).status_code == 200
    runs = {r["run"]: r for r in operator.get("/v1/runs", params={"last": 1000}).json()["runs"]}
    assert (runs[one_id]["scope"], runs[two_id]["scope"]) == ("acme/platform", "globex")
    sealed = one.post("/v1/recall", json={"query": "login", "space": "globex"})
    assert sealed.status_code == 403 and error_of(sealed)["code"] == "data_barrier"
    one.close()
    two.close()


def test_context_references_open_only_where_their_labels_are_reached(server, agent, operator, harness):
    setup_platform(server, operator)
    secret = remember(agent, "the platform on-call rota is in PagerDuty", space="acme/platform")
    shared = agent.post("/v1/context", json={"memory_ids": [secret], "space": "acme/platform"})
    assert shared.status_code == 201, shared.text
    ref = shared.json()["ref"]
    assert shared.json()["memories"][0]["labels"]["digest"].startswith("sha256:")
    assert "PagerDuty" not in shared.text
    opener, opener_id = session(server, harness)
    opened = opener.get(f"/v1/context/{ref}", params={"space": "acme"})
    assert opened.status_code == 200 and opened.json()["memories"][0]["text"].endswith("PagerDuty")
    refused_ids = []
    for space in ("acme/finance", "globex"):
        client, run_id = session(server, harness)
        refused = client.get(f"/v1/context/{ref}", params={"space": space})
        assert refused.status_code == 403 and error_of(refused)["code"] == "data_barrier"
        assert "acme/platform" not in refused.text
        refused_ids.append(run_id)
        client.close()
    runs = {r["run"]: r for r in operator.get("/v1/runs", params={"last": 1000}).json()["runs"]}
    assert runs[opener_id]["opened_at"] is not None
    # A refused first step opens no run: their tokens' runs are listed as not opened, with no step.
    assert all(runs[r]["opened_at"] is None and runs[r]["step_count"] == 0 for r in refused_ids)
    unknown = opener.get("/v1/context/ctx_" + "a" * 26, params={"space": "acme"})
    malformed = opener.get("/v1/context/nonsense", params={"space": "acme"})
    assert unknown.status_code == malformed.status_code == 404
    opener.close()


def test_untrusted_content_gates_forget_over_http(server, agent, operator, harness):
    slack = remember(
        agent, "freeze deploys this friday, says the release channel", space="acme", labels=["source:slack"]
    )
    victim = remember(agent, "the runbook for deploys is in the wiki", space="acme")
    run, _ = session(server, harness)
    run.post("/v1/recall", json={"query": "freeze deploys friday", "space": "acme"})
    withdrawn = held(run.delete(f"/v1/memories/{victim}", params={"space": "acme"}))
    assert run.delete(f"/v1/memories/{withdrawn}", params={"space": "acme"}).status_code == 204  # taken back
    written = run.post("/v1/memories", json={"text": "no deploys on friday", "space": "acme"})
    assert written.json()["labels"]["origin"] == ["source:slack"]
    assert operator.put("/v1/trusted-sources", json={"source": "source:slack"}).status_code == 200
    assert run.delete(f"/v1/memories/{victim}", params={"space": "acme"}).status_code == 204
    assert operator.delete("/v1/trusted-sources", params={"source": "source:slack"}).status_code == 204
    held(run.delete(f"/v1/memories/{slack}", params={"space": "acme"}))
    run.close()


def test_a_runs_carried_labels_survive_a_restart(tmp_path):
    work = tmp_path / "work"
    (work / "acme").mkdir(parents=True)
    server = start_server(tmp_path / "home", work)
    try:
        server.cli("space", "add", str(work / "acme"))
        with server.client(server.token("--ai", "claude-code")) as writer:
            remember(writer, "acme's signing key lives in the HSM", space="acme")
        with server.client(server.token("--ai", "claude-code", "--runs-only")) as harness:
            token = harness.post("/v1/runs", json={"ttl": "1d"}).json()["token"]
        with server.client(token) as run:
            run.post("/v1/recall", json={"query": "signing key", "space": "acme"})
    finally:
        stop_server(server)
    server = start_server(tmp_path / "home", work)
    try:
        with server.client(token) as run:
            held(run.post("/v1/memories", json={"text": "the key is in the HSM", "personal": True, "space": "acme"}))
            sealed = run.post("/v1/recall", json={"query": "x"})
            assert sealed.status_code == 403  # still sealed in acme: a step from no space lies outside
    finally:
        stop_server(server)
