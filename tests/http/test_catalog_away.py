"""A PostgreSQL catalog that goes away under a real server (issue 68): while it cannot be reached,
every call is answered 503 ``catalog_unavailable`` with ``Retry-After`` (never a 500) and
``/healthz`` says the server is not ready; once it is back, the server answers again by itself,
with every acknowledged memory there. The catalog goes away as a restart makes it: its
connections terminated and new ones refused (``ALLOW_CONNECTIONS false``), on a database of its
own in the suite's cluster.
"""

from __future__ import annotations

import secrets

import httpx
import pytest
from http_support import error_of, remember

from tests import catalogs
from tests.http.conftest import start_server, stop_server


def _refused_as_away(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert error_of(response)["code"] == "catalog_unavailable"
    assert int(response.headers["Retry-After"]) >= 1


@pytest.mark.postgresql
def test_a_catalog_that_goes_away_is_answered_503_and_the_server_comes_back_by_itself(tmp_path):
    assert catalogs.CLUSTER is not None
    admin = catalogs.CLUSTER._admin
    name = f"away_{secrets.token_hex(4)}"
    admin.execute(f"CREATE DATABASE {name}")
    folder = tmp_path / "work" / "acme"
    folder.mkdir(parents=True)
    server = start_server(tmp_path / "home", tmp_path / "work", ESFIS_CATALOG=catalogs.CLUSTER.url(name))
    try:
        server.cli("space", "add", "--name", "acme", str(folder))
        with server.client(server.agent_token()) as agent:
            kept = {remember(agent, f"acme keeps fact {i} about its deploy window", space="acme") for i in range(5)}
            admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
            for _ in range(3):  # each call finds it away, whatever it needs of it
                _refused_as_away(agent.post("/v1/recall", json={"query": "deploy window", "space": "acme"}))
                _refused_as_away(agent.post("/v1/memories", json={"text": "acme fact while away", "space": "acme"}))
                _refused_as_away(agent.get(f"/v1/memories/{next(iter(kept))}", params={"space": "acme"}))
            health = httpx.get(f"{server.url}/healthz")
            assert health.status_code == 503 and health.json()["catalog"] == "unavailable", health.text
            admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
            kept.add(remember(agent, "acme fact once it is back", space="acme"))  # by itself, no restart
            assert httpx.get(f"{server.url}/healthz").json()["catalog"] == "ok"
            for id_ in kept:
                assert agent.get(f"/v1/memories/{id_}", params={"space": "acme"}).status_code == 200
    finally:
        admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
        stop_server(server)
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
