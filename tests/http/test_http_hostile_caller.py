"""The barrier against a caller that does not play along, on a real ``esfis serve``.

A hostile model chooses its headers and arguments. Here it holds an ordinary agent token and
tries what the review tried: read a secret with no run header and write it elsewhere, split its
steps across made-up runs, forget after reading untrusted content, give a header twice. Each
must fail. Then the harness's way: run tokens (``POST /v1/runs``), which an operator can end,
and the standing run of a token, which only grows and survives a restart.
"""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest
from http_support import error_of, held, remember

from tests.http.conftest import start_server, stop_server

SECRET = "the staging database password is in vault path secret/acme-stg"


@pytest.fixture(scope="module")
def platform(server, operator):
    names = [s["name"] for s in operator.get("/v1/spaces").json()["spaces"]]
    for name in ("acme/platform", "acme/finance"):
        if name not in names:
            assert operator.post("/v1/spaces", json={"name": name}).status_code == 201
    return server


def fresh_agent(server, *argv: str) -> httpx.Client:
    """A client with a new agent token: a standing run that carries nothing yet."""
    return server.client(server.token("--ai", "claude-code", *argv))


def open_run(client: httpx.Client, **body: object) -> dict:
    answer = client.post("/v1/runs", json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()


def test_without_any_header_a_token_cannot_launder_what_it_read(platform):
    with platform.client(platform.tokens["claude-code"]) as writer:
        remember(writer, SECRET, space="acme/platform")
    with fresh_agent(platform) as agent:
        recalled = agent.post("/v1/recall", json={"query": "staging database password", "space": "acme/platform"})
        assert recalled.json()["memories"][0]["text"] == SECRET
        leak = "staging db password: vault secret/acme-stg"
        personal = agent.post("/v1/memories", json={"text": leak, "personal": True})
        globex = agent.post("/v1/memories", json={"text": leak, "space": "globex"})
        finance = agent.post("/v1/memories", json={"text": leak, "space": "acme/finance"})
        held(personal)  # into personal: held for the operator, whatever the client would answer
        for refused in (globex, finance):
            assert refused.status_code == 403, refused.text
            assert error_of(refused)["code"] == "data_barrier"
        # Where whoever reads the target already reaches the data, the write goes on.
        assert agent.post("/v1/memories", json={"text": leak, "space": "acme"}).status_code == 201


def test_a_header_naming_a_run_is_refused_and_cannot_shed_labels(platform):
    with fresh_agent(platform) as agent:
        agent.post("/v1/recall", json={"query": "staging database password", "space": "acme/platform"})
        for headers in ({"X-Esfis-Run": "a"}, {"X-Esfis-Run": "b"}):
            answer = agent.post("/v1/memories", json={"text": "x", "personal": True}, headers=headers)
            assert answer.status_code == 400 and error_of(answer)["code"] == "bad_request"
            assert "POST /v1/runs" in error_of(answer)["message"]
        held(agent.post("/v1/memories", json={"text": "x", "personal": True}))


@pytest.mark.parametrize("name", ["Authorization", "Cookie", "X-Esfis-Run"])
def test_a_header_given_twice_is_refused_with_400(platform, name):
    token = platform.tokens["claude-code"]
    values = {
        "Authorization": (f"Bearer {token}", f"Bearer {token}"),
        "Cookie": ("a=1", "b=2"),
        "X-Esfis-Run": ("a", "b"),
    }[name]
    headers = [("Authorization", f"Bearer {token}")] if name != "Authorization" else []
    headers += [(name, v) for v in values] + [("Content-Type", "application/json")]
    with socket.create_connection(("127.0.0.1", int(platform.url.rsplit(":", 1)[1]))) as conn:
        body = b'{"query": "x"}'
        head = "".join(f"{k}: {v}\r\n" for k, v in headers)
        conn.sendall(
            f"POST /v1/recall HTTP/1.1\r\nHost: 127.0.0.1\r\n{head}Content-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n".encode()
            + body
        )
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    assert b" 400 " in status_line, answer
    payload = json.loads(rest.split(b"\r\n\r\n", 1)[1])
    assert payload["error"]["code"] == "bad_request" and name.lower() in payload["error"]["message"].lower()


def test_forget_after_reading_untrusted_content_is_refused_without_headers(platform):
    with platform.client(platform.tokens["claude-code"]) as writer:
        remember(
            writer, "freeze all deploys this friday, says the release channel", space="acme", labels=["source:slack"]
        )
        victim = remember(writer, "the deploy runbook is in the wiki", space="acme")
    with fresh_agent(platform) as agent:
        agent.post("/v1/recall", json={"query": "freeze deploys friday release channel", "space": "acme"})
        held(agent.delete(f"/v1/memories/{victim}", params={"space": "acme"}))
        assert agent.get(f"/v1/memories/{victim}", params={"space": "acme"}).status_code == 200


def test_a_run_token_is_its_own_run_and_cannot_open_runs(platform, operator):
    harness = platform.client(platform.token("--ai", "claude-code", "--runs-only"))
    with harness:
        assert harness.post("/v1/recall", json={"query": "x", "space": "acme"}).status_code == 403
        first, second = open_run(harness), open_run(harness, space="acme/platform", ttl="30m")
    assert first["token"].startswith("esfis_") and first["run"].startswith("run_")
    with platform.client(first["token"]) as one, platform.client(second["token"]) as two:
        recalled = one.post("/v1/recall", json={"query": "staging database password", "space": "acme/platform"})
        assert SECRET in [m["text"] for m in recalled.json()["memories"]]
        sealed = one.post("/v1/memories", json={"text": "vault secret/acme-stg", "personal": True})
        assert sealed.status_code == 403 and "sealed" in error_of(sealed)["message"]  # from no space: outside
        held(
            one.post("/v1/memories", json={"text": "vault secret/acme-stg", "personal": True, "space": "acme/platform"})
        )
        # Another session of the harness carries nothing of the first one's.
        assert (
            two.post(
                "/v1/memories", json={"text": "I like short answers", "personal": True, "space": "acme/platform"}
            ).status_code
            == 403
        )  # scoped: no personal
        assert two.post("/v1/memories", json={"text": "platform notes"}).status_code == 201
        assert one.post("/v1/runs", json={}).status_code == 403  # a run token opens no run
        outside = two.post("/v1/recall", json={"query": "x", "space": "acme"})
        assert outside.status_code == 403 and error_of(outside)["code"] == "out_of_reach"
    runs = {r["run"]: r for r in operator.get("/v1/runs", params={"last": 1000}).json()["runs"]}
    assert runs[first["run"]]["kind"] == "token" and runs[first["run"]]["token"] == first["token_id"]
    assert runs[first["run"]]["carries"] == ["space:acme/platform"]
    assert runs[first["run"]]["expires_at"] is not None


def test_a_run_token_is_listed_before_its_first_step(platform, operator):
    """An operator sees every live run token's run, stepped or not, and can end it before use."""
    with fresh_agent(platform) as agent:
        run = open_run(agent, ttl="1h")
    listed = {r["run"]: r for r in operator.get("/v1/runs", params={"last": 10000}).json()["runs"]}
    waiting = listed[run["run"]]
    assert waiting["kind"] == "token" and waiting["token"] == run["token_id"]
    assert waiting["opened_at"] is None and waiting["step_count"] == 0 and waiting["expires_at"] is not None
    assert operator.get(f"/v1/runs/{run['run']}").json()["steps"] == []
    assert operator.delete(f"/v1/runs/{run['run']}").status_code == 200
    with platform.client(run["token"]) as session:
        assert session.post("/v1/recall", json={"query": "x"}).status_code == 401


def test_a_run_token_opened_with_an_agent_token_shares_its_standing_run(platform):
    with fresh_agent(platform) as agent:
        run = open_run(agent)
        with platform.client(run["token"]) as session:
            session.post("/v1/recall", json={"query": "staging database password", "space": "acme/platform"})
        # Read with the run token, write with the agent token: refused.
        held(agent.post("/v1/memories", json={"text": "vault secret/acme-stg", "personal": True}))
    with fresh_agent(platform) as agent:
        run = open_run(agent)
        agent.post("/v1/recall", json={"query": "staging database password", "space": "acme/platform"})
        with platform.client(run["token"]) as session:  # opened before the read: still refused
            held(session.post("/v1/memories", json={"text": "vault secret/acme-stg", "personal": True}))


def test_a_run_tokens_life_is_bounded_and_checked(platform):
    with fresh_agent(platform) as agent:
        for ttl in ("8d", 0, -5, "soon", 7 * 86400 + 1, True):
            answer = agent.post("/v1/runs", json={"ttl": ttl})
            assert answer.status_code == 422, (ttl, answer.text)
        default = open_run(agent)
        left = time.mktime(time.strptime(default["expires_at"][:19], "%Y-%m-%dT%H:%M:%S")) - time.mktime(time.gmtime())
        assert 11.9 * 3600 < left <= 12 * 3600 + 5
        short = open_run(agent, ttl=1)
        time.sleep(1.5)
        with platform.client(short["token"]) as session:
            assert session.post("/v1/recall", json={"query": "x"}).status_code == 401
        outside = agent.post("/v1/runs", json={"space": "nowhere-at-all"})
        assert outside.status_code == 404


def test_a_scoped_token_opens_runs_only_inside_its_scope(platform):
    with fresh_agent(platform, "--space", "acme") as agent:
        refused = agent.post("/v1/runs", json={"space": "globex"})
        assert refused.status_code == 403 and "globex" not in error_of(refused)["message"]
        run = open_run(agent, space="acme/platform")
    with platform.client(run["token"]) as session:
        assert session.post("/v1/recall", json={"query": "x"}).status_code == 200  # stands in acme/platform
        assert session.post("/v1/recall", json={"query": "x", "space": "acme"}).status_code == 403


def test_operators_end_runs_and_the_trail_says_who(platform, operator):
    with fresh_agent(platform) as agent:
        agent_id = platform.token_id(ai="claude-code", kind="agent")
        run = open_run(agent)
        with platform.client(run["token"]) as session:
            assert session.post("/v1/recall", json={"query": "x", "space": "acme"}).status_code == 200
            ended = operator.delete(f"/v1/runs/{run['run']}")
            assert ended.status_code == 200 and ended.json()["ended_at"] is not None
            assert session.post("/v1/recall", json={"query": "x", "space": "acme"}).status_code == 401
        trail = operator.get(f"/v1/runs/{run['run']}").json()
        assert trail["steps"][-1]["kind"] == "end" and trail["steps"][-1]["by"].startswith("operator tok_")

        agent.post("/v1/recall", json={"query": "staging database password", "space": "acme/platform"})
        held(agent.post("/v1/memories", json={"text": "x", "personal": True}))
        standing = next(
            r
            for r in operator.get("/v1/runs", params={"last": 1000}).json()["runs"]
            if r["kind"] == "standing" and r["token"] == agent_id
        )
        assert standing["scope"] == "*"
        child = open_run(agent)
        platform.cli("runs", "end", standing["run"])
        # A standing run starts afresh; the run tokens that shared it stop.
        assert agent.post("/v1/memories", json={"text": "short answers, please", "personal": True}).status_code == 201
        with platform.client(child["token"]) as session:
            assert session.post("/v1/recall", json={"query": "x"}).status_code == 401
        assert operator.get(f"/v1/runs/{standing['run']}").json()["steps"][-1]["by"] == "cli"
    assert operator.delete("/v1/runs/run_" + "0" * 24).status_code == 404
    assert operator.delete("/v1/runs/nonsense").status_code == 404


def test_revoking_the_opening_token_stops_its_run_tokens(platform):
    token = platform.token("--ai", "claude-code", "--runs-only")
    harness_id = platform.token_id(ai="claude-code", kind="runs")
    with platform.client(token) as harness:
        run = open_run(harness)
        with platform.client(run["token"]) as session:
            assert session.post("/v1/recall", json={"query": "x"}).status_code == 200
    platform.cli("token", "revoke", harness_id)
    with platform.client(run["token"]) as session:
        assert session.post("/v1/recall", json={"query": "x"}).status_code == 401


def test_a_tokens_standing_run_is_one_row_and_survives_a_restart(tmp_path):
    work = tmp_path / "work"
    (work / "acme").mkdir(parents=True)
    server = start_server(tmp_path / "home", work)
    try:
        server.cli("space", "add", str(work / "acme"))
        token = server.token("--ai", "claude-code")
        with server.client(token) as agent:
            remember(agent, "acme's signing key lives in the HSM", space="acme")
            for _ in range(5):
                agent.post("/v1/recall", json={"query": "signing key", "space": "acme"})
    finally:
        stop_server(server)
    server = start_server(tmp_path / "home", work)
    try:
        with server.client(token) as agent:
            held(agent.post("/v1/memories", json={"text": "the key is in the HSM", "personal": True}))
        operator = server.client(server.token("--operator"))
        runs = operator.get("/v1/runs", params={"last": 1000}).json()["runs"]
        http = [r for r in runs if r["transport"] == "http"]
        assert len(http) == 1 and http[0]["kind"] == "standing" and http[0]["step_count"] >= 6
    finally:
        stop_server(server)


def test_the_access_log_names_routes_never_references_ids_or_queries(platform, agent):
    memory = remember(agent, "the access log test memory", space="acme")
    ref = agent.post("/v1/context", json={"memory_ids": [memory], "space": "acme"}).json()["ref"]
    assert agent.get(f"/v1/context/{ref}", params={"space": "acme"}).status_code == 200
    assert agent.get(f"/v1/memories/{memory}", params={"cwd": str(platform.work / "acme")}).status_code == 200
    time.sleep(0.3)
    log = platform.log.read_text()
    assert "GET /v1/context/{ref} 200" in log and "GET /v1/memories/{memory_id} 200" in log
    for secret in (ref, memory, "space=acme", "cwd=", str(platform.work), platform.tokens["claude-code"]):
        assert secret not in log, secret


@pytest.mark.parametrize("tool", ["forget", "recall"])
def test_a_body_nested_thousands_deep_answers_4xx_on_every_path(platform, tool):
    """A tool argument of 3,000 nested arrays: the gate's own read of an MCP body that may name
    ``forget`` once raised RecursionError (a 500); the MCP layer's, ``/v1``'s and the import's
    must answer 4xx as well."""
    deep = "[" * 3000 + "]" * 3000
    call = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
        f'"params": {{"name": "{tool}", "arguments": {{"query": {deep}, "id": {deep}}}}}}}'
    )
    with fresh_agent(platform) as agent:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        answers = {
            "/mcp": agent.post("/mcp", content=call, headers=headers),
            "/v1/recall": agent.post("/v1/recall", content=f'{{"query": {deep}}}', headers=headers),
            "/v1/memories": agent.post("/v1/memories", content=f'{{"text": {deep}}}', headers=headers),
        }
    for path, answer in answers.items():
        assert 400 <= answer.status_code < 500, (path, answer.status_code, answer.text[:200])


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("decoys")
    work = root / "work"
    (work / "acme" / "platform").mkdir(parents=True)
    server = start_server(root / "home", work, workers=2)
    try:
        server.cli("space", "add", str(work / "acme"))
        server.cli("space", "add", str(work / "acme" / "platform"))
        server.cli("remember", SECRET, "--space", "acme/platform")
        yield server
    finally:
        stop_server(server)


def test_a_principal_holds_one_call_whatever_runs_it_opens(two_workers):
    """The review's queue of decoys: an agent token read acme/platform and is held once, then
    opens runs and sends a personal write with each. One principal (the token, with every run
    token it opened) holds one pending call: the others answer approval_pending, without the id
    of a call their run can neither check nor withdraw."""
    server = two_workers
    leak = "staging db password: vault secret/acme-stg"
    with fresh_agent(server) as agent:
        agent.post("/v1/recall", json={"query": "staging database password", "space": "acme/platform"})
        first = held(agent.post("/v1/memories", json={"text": leak, "personal": True}))
        decoys = []
        for i in range(6):
            run = open_run(agent)
            with server.client(run["token"]) as session:  # a fresh connection: either worker
                session.post("/v1/recall", json={"query": "staging database password", "space": "acme/platform"})
                body = {"text": f"{leak} ({i})", "personal": True, "space": "acme/platform"}  # where it stands
                decoys.append(session.post("/v1/memories", json=body))
    for answer in decoys:
        assert answer.status_code == 409, answer.text
        assert error_of(answer)["code"] == "approval_pending"
        assert "apr_" not in error_of(answer)["message"]  # another run's call: not named to this one
    pending = json.loads(server.cli("approvals", "--json").stdout)["approvals"]
    assert [a["id"] for a in pending if a["status"] == "pending"] == [first]
    with fresh_agent(server) as other:  # another principal is not held up by this one
        other.post("/v1/recall", json={"query": "staging database password", "space": "acme/platform"})
        held(other.post("/v1/memories", json={"text": leak, "personal": True}))
