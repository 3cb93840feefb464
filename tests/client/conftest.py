"""One real ``esfis serve`` per test module, and its operator's client (``client_support``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from esfis_client import Esfis

from tests.client.client_support import serve
from tests.http.conftest import Server, stop_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = serve(tmp_path_factory)
    try:
        yield srv
    finally:
        stop_server(srv)


@pytest.fixture(scope="module")
def operator(server: Server) -> Iterator[Esfis]:
    with Esfis(server.url, server.tokens["operator"]) as client:
        yield client
