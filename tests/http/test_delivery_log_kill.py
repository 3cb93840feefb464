"""Every answer sent is in the delivery log before it is sent, whatever groups its bookkeeping was
committed in: a real ``esfis serve --workers 2`` under concurrent recalls is killed with SIGKILL
(every process of it at once) mid-load, and every query whose answer a client received is
found in the delivery log afterwards.
"""

from __future__ import annotations

import threading
import time

import httpx

from tests.catalogs import catalog_rows
from tests.http.conftest import kill_server, start_server

CLIENTS = 8
LOAD_S = 3.0


def test_no_delivered_recall_is_missing_from_the_log_after_a_kill_9(tmp_path):
    server = start_server(tmp_path / "esfis-home", tmp_path / "work", workers=2)
    try:
        server.cli("space", "add", str(server.folder("acme")))
        seed = server.agent_token("seed", space="acme")
        with server.client(seed) as client:
            for i in range(20):
                client.post(
                    "/v1/memories", json={"text": f"Acme note {i} on deploys", "space": "acme"}
                ).raise_for_status()
        tokens = [server.agent_token(f"agent-{c}", space="acme") for c in range(CLIENTS)]
        delivered: list[list[str]] = [[] for _ in range(CLIENTS)]
        stop = threading.Event()

        def client_loop(c: int) -> None:
            with server.client(tokens[c]) as client:  # one keep-alive connection
                n = 0
                while not stop.is_set():
                    n += 1
                    query = f"kill probe {c}-{n}: how do deploys work?"
                    try:
                        answer = client.post("/v1/recall", json={"query": query, "space": "acme"})
                        if answer.status_code == 200 and "memories" in answer.json():
                            delivered[c].append(query)  # a whole answer came back
                    except (httpx.HTTPError, ValueError):
                        return  # the server is gone

        threads = [threading.Thread(target=client_loop, args=(c,)) for c in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(LOAD_S)
    finally:
        kill_server(server)  # SIGKILL to the supervisor and every worker, mid-load
    stop.set()
    for t in threads:
        t.join(60)
    sent = {q for per_client in delivered for q in per_client}
    assert len(sent) >= 20, f"only {len(sent)} recalls answered before the kill"
    logged = {
        row[0] for row in catalog_rows(server.home, "SELECT query FROM deliveries WHERE query LIKE 'kill probe %'")
    }
    assert sorted(sent - logged) == []
