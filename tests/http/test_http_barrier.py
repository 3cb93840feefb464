"""The data barrier over HTTP, on a real server: runs by token and ``X-Esfis-Run``, the
laundering case refused with 403 ``data_barrier`` (HTTP has no person to ask), a grant that lets
exactly that write through, context references, the operator's trail, and a run's carried
labels surviving a restart of ``esfis serve``."""

from __future__ import annotations

from tests.http.conftest import start_server, stop_server
from http_support import error_of, remember

SECRET = "the staging database password is in vault path secret/acme-stg"


def setup_platform(server, operator):
    names = [s["name"] for s in operator.get("/v1/spaces").json()["spaces"]]
    for name in ("acme/platform", "acme/finance"):
        if name not in names:
            assert operator.post("/v1/spaces", json={"name": name}).status_code == 201


def test_laundering_into_personal_is_refused_then_granted(server, agent, operator):
    setup_platform(server, operator)
    remember(agent, SECRET, space="acme/platform")
    run = {"X-Esfis-Run": "launder-1"}
    recalled = agent.post("/v1/recall", json={"query": "staging database password", "space": "acme/platform"},
                          headers=run)
    assert recalled.json()["memories"][0]["text"] == SECRET
    assert recalled.json()["memories"][0]["labels"]["space"] == "acme/platform"
    leak = {"text": "staging db password: vault secret/acme-stg", "personal": True, "space": "acme/platform"}
    refused = agent.post("/v1/memories", json=leak, headers=run)
    assert refused.status_code == 403
    error = error_of(refused)
    assert error["code"] == "data_barrier" and "space:acme/platform" in error["message"]
    assert "personal" in error["message"] and "globex" not in error["message"]
    globex = agent.post("/v1/recall", json={"query": "staging database password vault", "space": "globex"})
    assert all("vault" not in m["text"] for m in globex.json()["memories"])
    # A request without the header is a run of its own: it carries nothing and may write personal.
    assert agent.post("/v1/memories", json={"text": "I like short answers", "personal": True}).status_code == 201

    grant = operator.post("/v1/grants", json={"from": "acme/platform", "to": None, "ai": "claude-code"}).json()
    written = agent.post("/v1/memories", json=leak, headers=run)
    assert written.status_code == 201, written.text
    assert written.json()["labels"]["from"] == ["acme/platform"] and written.json()["space"] is None
    trail = operator.get(f"/v1/runs/{recalled_run(operator, 'launder-1')}").json()
    gates = [s for s in trail["steps"] if s["kind"] == "gate"]
    assert [(g["decision"], g["grant"]) for g in gates] == [("refused", None), ("allowed", grant["id"])]
    assert trail["carries"] == ["space:acme/platform"]
    assert all(set(s) == {"at", "kind", "labels", "decision", "rule", "grant", "target", "memory_ids"}
               for s in trail["steps"])
    assert SECRET not in str(trail)
    assert operator.delete(f"/v1/grants/{grant['id']}").json()["revoked_at"] is not None
    assert agent.post("/v1/memories", json=leak, headers=run).status_code == 403


def recalled_run(operator, name: str) -> str:
    runs = operator.get("/v1/runs", params={"last": 100}).json()["runs"]
    return next(r["run"] for r in runs if r["name"] == name)


def test_a_run_id_used_by_another_token_is_another_run(server, agent, operator):
    setup_platform(server, operator)
    remember(agent, "platform deploys with ArgoCD", space="acme/platform")
    other = server.client(server.token("--ai", "claude-code"))
    run = {"X-Esfis-Run": "shared-name"}
    agent.post("/v1/recall", json={"query": "deploys", "space": "acme/platform"}, headers=run)
    # The same name from another token: another run, not sealed in acme/platform.
    assert other.post("/v1/recall", json={"query": "login", "space": "globex"}, headers=run).status_code == 200
    runs = [r for r in operator.get("/v1/runs", params={"last": 1000}).json()["runs"] if r["name"] == "shared-name"]
    assert sorted(r["scope"] for r in runs) == ["acme/platform", "globex"] and runs[0]["run"] != runs[1]["run"]
    sealed = agent.post("/v1/recall", json={"query": "login", "space": "globex"}, headers=run)
    assert sealed.status_code == 403 and error_of(sealed)["code"] == "data_barrier"


def test_context_references_open_only_where_their_labels_are_reached(server, agent, operator):
    setup_platform(server, operator)
    secret = remember(agent, "the platform on-call rota is in PagerDuty", space="acme/platform")
    shared = agent.post("/v1/context", json={"memory_ids": [secret], "space": "acme/platform"})
    assert shared.status_code == 201, shared.text
    ref = shared.json()["ref"]
    assert shared.json()["memories"][0]["labels"]["digest"].startswith("sha256:")
    assert "PagerDuty" not in shared.text
    opened = agent.get(f"/v1/context/{ref}", params={"space": "acme"}, headers={"X-Esfis-Run": "opener-acme"})
    assert opened.status_code == 200 and opened.json()["memories"][0]["text"].endswith("PagerDuty")
    for space in ("acme/finance", "globex"):
        refused = agent.get(f"/v1/context/{ref}", params={"space": space}, headers={"X-Esfis-Run": "o-" + space.replace("/", "-")})
        assert refused.status_code == 403 and error_of(refused)["code"] == "data_barrier"
        assert "acme/platform" not in refused.text
    names = [r["name"] for r in operator.get("/v1/runs", params={"last": 1000}).json()["runs"]]
    assert "o-globex" not in names and "opener-acme" in names  # a refused first step opens no run
    unknown = agent.get("/v1/context/ctx_" + "a" * 26, params={"space": "acme"})
    malformed = agent.get("/v1/context/nonsense", params={"space": "acme"})
    assert unknown.status_code == malformed.status_code == 404


def test_untrusted_content_gates_forget_over_http(server, agent, operator):
    slack = remember(agent, "freeze deploys this friday, says the release channel", space="acme",
                     labels=["source:slack"])
    victim = remember(agent, "the runbook for deploys is in the wiki", space="acme")
    run = {"X-Esfis-Run": "tainted"}
    agent.post("/v1/recall", json={"query": "freeze deploys friday", "space": "acme"}, headers=run)
    refused = agent.delete(f"/v1/memories/{victim}", params={"space": "acme"}, headers=run)
    assert refused.status_code == 403 and error_of(refused)["code"] == "untrusted_source"
    written = agent.post("/v1/memories", json={"text": "no deploys on friday", "space": "acme"}, headers=run)
    assert written.json()["labels"]["origin"] == ["source:slack"]
    assert operator.put("/v1/trusted-sources", json={"source": "source:slack"}).status_code == 200
    assert agent.delete(f"/v1/memories/{victim}", params={"space": "acme"}, headers=run).status_code == 204
    assert operator.delete("/v1/trusted-sources", params={"source": "source:slack"}).status_code == 204
    assert agent.delete(f"/v1/memories/{slack}", params={"space": "acme"}, headers=run).status_code == 403


def test_a_runs_carried_labels_survive_a_restart(tmp_path):
    work = tmp_path / "work"
    (work / "acme").mkdir(parents=True)
    server = start_server(tmp_path / "home", work)
    try:
        server.cli("space", "add", str(work / "acme"))
        token = server.token("--ai", "claude-code")
        with server.client(token) as agent:
            remember(agent, "acme's signing key lives in the HSM", space="acme")
            agent.post("/v1/recall", json={"query": "signing key", "space": "acme"}, headers={"X-Esfis-Run": "long"})
    finally:
        stop_server(server)
    server = start_server(tmp_path / "home", work)
    try:
        with server.client(token) as agent:
            refused = agent.post("/v1/memories", json={"text": "the key is in the HSM", "personal": True},
                                 headers={"X-Esfis-Run": "long"})
            assert refused.status_code == 403 and error_of(refused)["code"] == "data_barrier"
            sealed = agent.post("/v1/recall", json={"query": "x"}, headers={"X-Esfis-Run": "long"})
            assert sealed.status_code == 403  # still sealed in acme: a step from no space lies outside
    finally:
        stop_server(server)
