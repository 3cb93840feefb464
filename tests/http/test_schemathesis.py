"""Property-based fuzzing of the whole API from its OpenAPI document (schemathesis): valid and
invalid inputs alike never answer 5xx, every answer matches the documented status codes and
schemas, and every error has the one shape.

The document is built in-process (no server needed to collect one test per operation) and
checked to be the one the live server serves; the cases run against the live server.
(schemathesis's lazy ``from_fixture`` loader does not run under pytest 9.)
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from http_support import error_of, remember
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from server.http.app import create_app

MAX_EXAMPLES = 25
schemathesis.serializer.alias("application/x-ndjson", "text/plain")
DOCUMENT = create_app(lambda: None).openapi()  # type: ignore[arg-type, return-value]
schema = schemathesis.openapi.from_dict(
    DOCUMENT, config=schemathesis.Config.from_dict({"generation": {"max-examples": MAX_EXAMPLES, "mode": "all"}})
).exclude(path="/v1/backup")  # it writes a folder wherever it is told: tests/http/test_http_backup.py


@pytest.fixture(scope="module")
def seeded(server):
    with server.client(server.agent_token()) as agent:
        remember(agent, "Acme authentication uses Auth0", space="acme")
        assert agent.post("/v1/recall", json={"query": "login", "space": "acme"}).status_code == 200
    return server


def test_the_live_server_serves_this_document(server):
    assert httpx.get(f"{server.url}/openapi.json").json() == DOCUMENT


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_never_answers_5xx_and_every_error_has_one_shape(case, seeded):
    operator = "operators" in (case.operation.tags or [])
    token = seeded.tokens["operator" if operator else "claude-code"]
    response = case.call(base_url=seeded.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    case.validate_response(
        response,
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )
    if response.status_code >= 400:
        error_of(response)
