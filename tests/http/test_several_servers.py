"""Two real ``esfis serve`` processes, as on two machines: their own ESFIS_HOME each (their own
locks, tokens and images), one PostgreSQL catalog and one S3 bucket between them (a real
PostgreSQL started by the session, moto's S3 server). What either server, or the CLI, changes
applies at the other's next request; a forget made through one leaves no object in the bucket
holding the text and nothing on the other; one server killed mid-write leaves the other
carrying on."""

from __future__ import annotations

import os
import signal
import threading

import httpx
import pytest
from http_support import remember, texts

from tests import catalogs
from tests.helpers import files_containing
from tests.http.conftest import Server, start_server, stop_server

pytestmark = pytest.mark.postgresql
QUESTION = "how does login work?"


@pytest.fixture(scope="module")
def pair(tmp_path_factory, s3) -> tuple[Server, Server, str]:
    root = tmp_path_factory.mktemp("several")
    work = root / "work"
    for name in ("acme", "globex"):
        (work / name).mkdir(parents=True)
    bucket = s3.bucket()
    shared = {"ESFIS_CATALOG": catalogs.CLUSTER.new_catalog(), "ESFIS_VECTORS": f"s3://{bucket}/esfis", **s3.env}
    a = start_server(root / "home-a", work, **shared)
    try:
        b = start_server(root / "home-b", work, **shared)
    except BaseException:
        stop_server(a)
        raise
    try:
        a.cli("space", "add", str(work / "acme"))
        b.cli("space", "add", str(work / "globex"))  # the CLI of either machine: one catalog
        for server in (a, b):
            server.tokens["operator"] = a.token("--operator")
        agent = b.token("--ai", "claude-code")
        a.tokens["agent"] = b.tokens["agent"] = agent
        yield a, b, bucket
    finally:
        for server in (a, b):
            if server.process.poll() is None:
                stop_server(server)


@pytest.fixture(autouse=True)
def fresh_agent(pair) -> None:
    """One agent token for both servers, new for each test: a token's requests are one
    standing run whose labels only grow, so tests sharing one would carry each other's reads."""
    a, b, _ = pair
    a.tokens["agent"] = b.tokens["agent"] = a.agent_token()


def agent(server: Server) -> httpx.Client:
    return server.client(server.tokens["agent"])


def test_acme_never_brings_back_globex_whichever_server_wrote_or_answers(pair):
    a, b, _ = pair
    with agent(a) as on_a, agent(b) as on_b:
        remember(on_a, "Acme authentication uses Auth0", space="acme")
        remember(on_b, "Globex authentication uses Clerk", space="globex")
        for client in (on_a, on_b):
            from_acme = texts(client.post("/v1/recall", json={"query": QUESTION, "space": "acme"}))
            from_globex = texts(client.post("/v1/recall", json={"query": QUESTION, "space": "globex"}))
            assert from_acme == ["Acme authentication uses Auth0"]
            assert from_globex == ["Globex authentication uses Clerk"]


def test_a_deny_made_on_one_server_is_obeyed_by_the_other(pair):
    a, b, _ = pair
    query = {"query": QUESTION, "space": "acme"}
    with agent(b) as on_b, a.client(a.tokens["operator"]) as operator_a:
        remember(on_b, "Acme sessions last eight hours", space="acme")
        assert "Acme sessions last eight hours" in texts(on_b.post("/v1/recall", json=query))
        denied = operator_a.put("/v1/policies", json={"ai": "claude-code", "space": "acme", "effect": "deny"})
        assert denied.status_code == 200, denied.text
        try:
            assert texts(on_b.post("/v1/recall", json=query)) == []
            refused = on_b.post("/v1/memories", json={"text": "Acme uses SSO", "space": "acme"})
            assert refused.status_code == 403
        finally:
            assert operator_a.delete("/v1/policies", params={"ai": "claude-code", "space": "acme"}).status_code == 204
        assert "Acme sessions last eight hours" in texts(on_b.post("/v1/recall", json=query))


def test_a_forget_on_one_server_is_purged_from_the_bucket_and_gone_on_the_other(pair, s3):
    a, b, bucket = pair
    secret = "The Acme staging password is tangerine-42"
    query = {"query": "what is the staging password?", "space": "acme"}
    with agent(a) as on_a, agent(b) as on_b:
        victim = remember(on_a, secret, space="acme")
        assert secret in texts(on_b.post("/v1/recall", json=query))  # b holds the partition now
        assert any(secret.encode() in body for body in s3.objects(bucket).values())

        assert on_a.delete(f"/v1/memories/{victim}", params={"space": "acme"}).status_code == 204

        assert [k for k, body in s3.objects(bucket).items() if secret.encode() in body] == []
        assert secret not in texts(on_b.post("/v1/recall", json=query))
        assert on_b.get(f"/v1/memories/{victim}", params={"space": "acme"}).status_code == 404
        assert files_containing(b.home, secret) == [] and files_containing(a.home, secret) == []


def test_a_replace_and_a_token_revocation_on_one_apply_at_the_others_next_request(pair):
    a, b, _ = pair
    query = {"query": "which queue does Acme use?", "space": "acme"}
    with agent(a) as on_a, agent(b) as on_b:
        old = remember(on_b, "Acme jobs run on RabbitMQ", space="acme")
        assert "Acme jobs run on RabbitMQ" in texts(on_b.post("/v1/recall", json=query))
        replaced = on_a.post(f"/v1/memories/{old}/replace", json={"text": "Acme jobs run on SQS", "space": "acme"})
        assert replaced.status_code == 201, replaced.text
        answer = texts(on_b.post("/v1/recall", json=query))
        assert "Acme jobs run on SQS" in answer and "Acme jobs run on RabbitMQ" not in answer

    secret = a.token("--ai", "cursor")
    with b.client(secret) as cursor_on_b:
        assert cursor_on_b.post("/v1/recall", json=query).status_code == 200
        a.cli("token", "revoke", a.token_id(ai="cursor"))  # the CLI of machine a
        assert cursor_on_b.post("/v1/recall", json=query).status_code == 401


def test_two_servers_writing_one_partition_at_once_lose_nothing(pair):
    a, b, _ = pair
    written: dict[str, list[str]] = {"a": [], "b": []}
    errors: list[BaseException] = []

    def write(name: str, server: Server) -> None:
        try:
            with agent(server) as client:
                for i in range(12):
                    written[name].append(remember(client, f"Globex incident {name}-{i}", space="globex"))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(name, server)) for name, server in (("a", a), ("b", b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    every = written["a"] + written["b"]
    assert len(set(every)) == 24
    for server in (a, b):
        with agent(server) as client:
            for id_ in every:
                assert client.get(f"/v1/memories/{id_}", params={"space": "globex"}).status_code == 200, id_


def test_one_server_killed_during_writes_the_other_carries_on(pair):
    """Last in the module: server a stays dead."""
    a, b, _ = pair
    acknowledged: list[str] = []
    stop = threading.Event()

    def write_through_a() -> None:
        with agent(a) as on_a:
            i = 0
            while not stop.is_set():
                try:
                    acknowledged.append(remember(on_a, f"Acme deploy note {i}", space="acme"))
                except (httpx.HTTPError, AssertionError):
                    return  # the server is gone
                i += 1

    writer = threading.Thread(target=write_through_a)
    writer.start()
    try:
        while len(acknowledged) < 5:
            assert writer.is_alive()
            threading.Event().wait(0.05)
        os.kill(a.process.pid, signal.SIGKILL)
        a.process.wait()
    finally:
        stop.set()
        writer.join(timeout=60)

    with agent(b) as on_b:
        after = [remember(on_b, f"Acme note written after the kill {i}", space="acme") for i in range(3)]
        for id_ in acknowledged + after:
            got = on_b.get(f"/v1/memories/{id_}", params={"space": "acme"})
            assert got.status_code == 200, (id_, got.text)
        found = texts(
            on_b.post("/v1/recall", json={"query": "note written after the kill", "space": "acme", "limit": 3})
        )
        assert all(text.startswith("Acme note written after the kill") for text in found) and len(found) == 3
