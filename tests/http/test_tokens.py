"""Tokens: made by the CLI, stored hashed; every bad or near-miss token is one identical 401;
an AI token scoped to a space acts only inside its subtree; AI and operator tokens each keep to
their own endpoints; a revocation by the CLI applies to the server's next request."""

from __future__ import annotations

import re
import secrets

import httpx
import pytest
from http_support import error_of, remember, texts

from tests.helpers import files_containing

TOKEN = re.compile(r"esfis_[A-Za-z0-9_-]{43}")


@pytest.fixture(scope="module")
def scoped(server):
    """cursor, confined to acme's subtree."""
    with server.client(server.token("--ai", "cursor", "--space", "acme")) as client:
        yield client


@pytest.fixture(scope="module")
def revoked(server) -> str:
    token = server.token("--ai", "revoked-ai")
    server.cli("token", "revoke", server.token_id(ai="revoked-ai"))
    return token


def _bad_headers(good: str, revoked: str) -> dict[str, dict[str, str]]:
    secret = good.removeprefix("esfis_")
    return {
        "missing": {},
        "malformed": {"Authorization": "Bearer not-a-token"},
        "scheme only": {"Authorization": "Bearer"},
        "unknown": {"Authorization": "Bearer esfis_" + secrets.token_urlsafe(32)},
        "revoked": {"Authorization": f"Bearer {revoked}"},
        "prefix": {"Authorization": f"Bearer {good[:-1]}"},
        "extended": {"Authorization": f"Bearer {good}x"},
        "wrong case": {"Authorization": f"Bearer esfis_{secret.swapcase()}"},
        "upper-case prefix": {"Authorization": f"Bearer ESFIS_{secret}"},
        "two spaces": {"Authorization": f"Bearer  {good}"},
        "tab": {"Authorization": f"Bearer\t{good}"},
        "space inside": {"Authorization": f"Bearer {good[:20]} {good[20:]}"},
        "no scheme": {"Authorization": good},
        "Basic scheme": {"Authorization": f"Basic {good}"},
        "Token scheme": {"Authorization": f"Token {good}"},
        "query string instead": {},
    }


BAD = list(_bad_headers("esfis_" + "a" * 43, "r").keys())


@pytest.mark.parametrize("variant", BAD)
def test_every_bad_token_is_one_identical_401(server, revoked, variant):
    good = server.tokens["claude-code"]
    headers = _bad_headers(good, revoked)[variant]
    params = {"token": good} if variant == "query string instead" else None
    reference = httpx.post(f"{server.url}/v1/recall", json={"query": "x"})
    response = httpx.post(f"{server.url}/v1/recall", json={"query": "x"}, headers=headers, params=params)
    assert response.status_code == 401
    assert response.content == reference.content
    assert error_of(response)["code"] == "unauthorized"
    # The same challenge for every failure: where a host that speaks OAuth gets a token (RFC 9728).
    assert (
        response.headers["WWW-Authenticate"]
        == f'Bearer resource_metadata="{server.url}/.well-known/oauth-protected-resource"'
    )


def test_bad_token_is_401_before_anything_else_is_looked_at(server):
    # Invalid body, unknown route, operator route: the caller without a token learns nothing.
    reference = httpx.post(f"{server.url}/v1/recall", json={"query": "x"}).content
    for method, path, body in [
        ("POST", "/v1/recall", b"{not json"),
        ("GET", "/v1/no-such-route", None),
        ("DELETE", "/v1/spaces/acme", None),
        ("GET", "/v1/memories/mem_aaaaaaaaaaaaaaaaaaaaaaaaaa", None),
    ]:
        response = httpx.request(method, f"{server.url}{path}", content=body)
        assert (response.status_code, response.content) == (401, reference), path


def test_two_authorization_headers_are_refused(server):
    good = server.tokens["claude-code"]
    response = httpx.post(
        f"{server.url}/v1/recall",
        json={"query": "x"},
        headers=[("Authorization", f"Bearer {good}"), ("Authorization", f"Bearer {good}")],
    )
    assert response.status_code == 400 and error_of(response)["code"] == "bad_request"


def test_scheme_name_is_case_insensitive(server):
    # RFC 9110 §11.1: the scheme is case-insensitive; the token itself is matched exactly.
    good = server.tokens["claude-code"]
    response = httpx.post(f"{server.url}/v1/recall", json={"query": "x"}, headers={"Authorization": f"bearer {good}"})
    assert response.status_code == 200


def test_token_create_prints_only_the_token_and_stores_only_its_hash(server):
    done = server.cli("token", "create", "--ai", "printer")
    assert TOKEN.fullmatch(done.stdout.rstrip("\n")) and done.stdout.count("\n") == 1
    secret = done.stdout.strip()
    assert secret not in server.cli("token", "list").stdout
    assert secret not in server.cli("token", "list", "--json").stdout
    assert files_containing(server.home, secret) == []


def test_scoped_token_cannot_read_or_write_globex(server, agent, scoped):
    globex_id = remember(agent, "Globex deploys with Kubernetes", space="globex")
    acme_id = remember(scoped, "Acme deploys with Nomad")  # no context: the token's own space

    outside = [
        ("POST", "/v1/recall", {"json": {"query": "how do we deploy?", "space": "globex"}}),
        ("POST", "/v1/recall", {"json": {"query": "how do we deploy?", "cwd": str(server.work / "globex")}}),
        ("POST", "/v1/memories", {"json": {"text": "Globex uses Terraform", "space": "globex"}}),
        ("POST", "/v1/memories", {"json": {"text": "personal note", "personal": True}}),
        ("GET", f"/v1/memories/{globex_id}", {"params": {"space": "globex"}}),
        ("POST", f"/v1/memories/{globex_id}/replace", {"json": {"text": "x", "space": "globex"}}),
        ("DELETE", f"/v1/memories/{globex_id}", {"params": {"space": "globex"}}),
    ]
    bodies = set()
    for method, path, kwargs in outside:
        response = scoped.request(method, path, **kwargs)
        assert response.status_code == 403, (method, path, response.text)
        assert "globex" not in response.text.lower()
        bodies.add(response.content)
    # The answer for a space that exists is the answer for one that does not.
    missing = scoped.post("/v1/recall", json={"query": "x", "space": "initech"})
    assert missing.status_code == 403 and missing.content in bodies

    # Inside its own subtree it works, and a globex id is just unknown there.
    assert texts(scoped.post("/v1/recall", json={"query": "how do we deploy?"})) == ["Acme deploys with Nomad"]
    assert scoped.get(f"/v1/memories/{acme_id}").status_code == 200
    assert scoped.get(f"/v1/memories/{globex_id}").status_code == 404
    assert agent.get(f"/v1/memories/{globex_id}", params={"space": "globex"}).status_code == 200


OPERATOR_CALLS = [
    ("GET", "/v1/spaces", None),
    ("POST", "/v1/spaces", {"name": "initech"}),
    ("DELETE", "/v1/spaces/acme", None),
    ("GET", "/v1/policies", None),
    ("PUT", "/v1/policies", {"ai": "*", "space": "acme", "effect": "deny"}),
    ("DELETE", "/v1/policies?ai=cursor", None),
    ("GET", "/v1/deliveries", None),
    ("GET", "/v1/deliveries/1", None),
    ("GET", "/v1/deliveries/1/why", None),
    ("POST", "/v1/import", None),
]


@pytest.mark.parametrize(("method", "path", "body"), OPERATOR_CALLS, ids=[f"{m} {p}" for m, p, _ in OPERATOR_CALLS])
def test_ai_token_cannot_call_operator_endpoints(server, agent, operator, method, path, body):
    response = agent.request(method, path, json=body)
    assert response.status_code == 403
    assert error_of(response)["code"] == "forbidden"
    assert [s["name"] for s in operator.get("/v1/spaces").json()["spaces"]] == ["acme", "globex"]
    assert operator.get("/v1/policies").json() == {"policies": []}


def test_operator_token_cannot_act_as_an_ai(operator):
    response = operator.post("/v1/recall", json={"query": "x", "space": "acme"})
    assert response.status_code == 403
    assert error_of(response)["code"] == "forbidden"


def test_revocation_by_the_cli_applies_to_the_next_request(server):
    token = server.token("--ai", "short-lived")
    with server.client(token) as client:
        assert client.post("/v1/recall", json={"query": "x"}).status_code == 200
        server.cli("token", "revoke", server.token_id(ai="short-lived"))
        response = client.post("/v1/recall", json={"query": "x"})
        assert response.status_code == 401
        assert error_of(response)["code"] == "unauthorized"
    listed = server.cli("token", "list").stdout
    assert re.search(r"ai short-lived .* revoked", listed)


def test_revoking_an_unknown_token_is_an_error(server):
    done = server.cli("token", "revoke", "tok_000000000000", check=False)
    assert done.returncode == 3 and "no token" in done.stderr


# -- tokens of removed spaces -----------------------------------------------------------------


def _token_for(server, ai: str, space: str) -> str:
    return server.token("--ai", ai, "--space", space)


def test_a_token_of_a_removed_space_never_works_on_a_new_space_of_that_name(server, operator):
    assert operator.post("/v1/spaces", json={"name": "initrode"}).status_code == 201
    token = _token_for(server, "old-tenant", "initrode")
    with server.client(token) as client:
        remember(client, "initrode's vpn password is tiger-42")
        assert operator.delete("/v1/spaces/initrode", params={"purge": "true"}).status_code == 200
        assert operator.post("/v1/spaces", json={"name": "initrode"}).status_code == 201
        for response in (
            client.post("/v1/recall", json={"query": "vpn password"}),
            client.post("/v1/memories", json={"text": "the new tenant's secret"}),
        ):
            assert response.status_code == 401, response.text
            assert error_of(response)["code"] == "unauthorized"
    assert re.search(r"ai old-tenant in initrode .* revoked", server.cli("token", "list").stdout)
    assert operator.delete("/v1/spaces/initrode").status_code == 200


def test_removing_a_space_keeps_tokens_of_the_spaces_below_it_that_survive(server, operator):
    for name in ("umbrella", "umbrella/labs"):
        assert operator.post("/v1/spaces", json={"name": name}).status_code == 201
    parent = _token_for(server, "parent-scoped", "umbrella")
    child = _token_for(server, "child-scoped", "umbrella/labs")
    assert operator.delete("/v1/spaces/umbrella").status_code == 200
    with server.client(child) as client:  # its space is untouched
        remember(client, "labs keep samples at minus eighty")
        assert texts(client.post("/v1/recall", json={"query": "samples"})) == ["labs keep samples at minus eighty"]
    with server.client(parent) as client:  # confined to a space that is gone: revoked, not widened
        response = client.post("/v1/recall", json={"query": "samples", "space": "umbrella/labs"})
        assert response.status_code == 401, response.text
    assert operator.delete("/v1/spaces/umbrella/labs", params={"purge": "true"}).status_code == 200
