"""What the client tests share: a real ``esfis serve``, the one the HTTP tests start
(``tests/http/conftest.py``: its own ESFIS_HOME, a free port, the real model loaded before the
first request), with the spaces acme, acme/platform and globex and an operator token; and a client
on an agent token of its own."""

from __future__ import annotations

import pytest
from esfis_client import Esfis

from tests.http.conftest import Server, start_server, stop_server

ACME_AUTH = "Acme authentication uses Auth0"
GLOBEX_AUTH = "Globex authentication uses Clerk"
QUESTION = "how does login work?"


def serve(tmp_path_factory: pytest.TempPathFactory, **env: str) -> Server:
    root = tmp_path_factory.mktemp("client")
    work = root / "work"
    for name in ("acme/platform", "globex"):
        (work / name).mkdir(parents=True)
    server = start_server(root / "esfis-home", work, **env)
    try:
        for name in ("acme", "acme/platform", "globex"):
            server.cli("space", "add", str(work / name))
        server.tokens["operator"] = server.token("--operator")
    except BaseException:
        stop_server(server)
        raise
    return server


def agent(server: Server, *, ai: str = "claude-code", space: str | None = None, **options) -> Esfis:
    """A client on a new agent token of its own (a standing run that carries nothing yet)."""
    return Esfis(server.url, server.agent_token(ai=ai, space=space), **options)
