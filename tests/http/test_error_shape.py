"""One error shape everywhere: {"error": {"code", "message"}} and nothing else, for the core's
errors, FastAPI's own validation, unknown routes and wrong methods; and no 5xx for bad input."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx
import pytest
from http_support import error_of, remember

RANDOM_ID = "mem_aaaaaaaaaaaaaaaaaaaaaaaaaa"


def test_401_shape(server):
    response = httpx.get(f"{server.url}/v1/spaces")
    assert response.status_code == 401
    assert error_of(response)["code"] == "unauthorized"


def test_403_shape(agent):
    response = agent.get("/v1/spaces")
    assert response.status_code == 403
    assert error_of(response)["code"] == "forbidden"


def test_404_shape_for_a_missing_memory(agent):
    response = agent.get(f"/v1/memories/{RANDOM_ID}")
    assert response.status_code == 404
    assert error_of(response) == {"code": "not_found", "message": f"no memory {RANDOM_ID}"}


def test_404_shape_for_an_unknown_route(agent, server):
    for path in ("/v1/nothing-here", "/nothing-here", "/v1/memories/a/b/c"):
        response = agent.get(path)
        assert response.status_code == 404, path
        assert error_of(response)["code"] == "not_found"


def test_405_shape_for_a_wrong_method(agent):
    response = agent.patch("/v1/recall", json={"query": "x"})
    assert response.status_code == 405
    assert error_of(response)["code"] == "method_not_allowed"
    assert "POST" in response.headers["allow"]


def test_409_shape_for_a_conflict(agent, operator):
    old = remember(agent, "Acme's staging database is Postgres 15", space="acme")
    assert agent.post(f"/v1/memories/{old}/replace", json={"text": "Postgres 16", "space": "acme"}).status_code == 201
    again = agent.post(f"/v1/memories/{old}/replace", json={"text": "Postgres 17", "space": "acme"})
    assert again.status_code == 409
    assert error_of(again)["code"] == "superseded"

    dup = operator.post("/v1/spaces", json={"name": "acme"})
    assert dup.status_code == 409
    assert error_of(dup)["code"] == "space_exists"

    busy = operator.delete("/v1/spaces/acme")
    assert busy.status_code == 409
    assert error_of(busy)["code"] == "space_not_empty"


def test_413_shape_and_the_stated_limit(agent):
    response = agent.post("/v1/recall", json={"query": "x" * (64 * 1024)})
    assert response.status_code == 413
    error = error_of(response)
    assert error["code"] == "too_large" and "64 KiB" in error["message"]


def test_413_for_a_chunked_body_over_the_limit(agent):
    def chunks():
        yield b'{"query": "'
        for _ in range(80):
            yield b"x" * 1024
        yield b'"}'

    response = agent.post("/v1/recall", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert error_of(response)["code"] == "too_large"


def test_413_for_an_import_declared_over_its_limit(server):
    """The import limit (1 GiB) is checked on Content-Length before a byte is read."""
    url = urlsplit(server.url)
    request = (
        "POST /v1/import HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {server.tokens['operator']}\r\n"
        "Content-Type: application/x-ndjson\r\nContent-Length: 1073741825\r\n\r\n"
    ).encode()
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(request)
        raw = b""
        while b"\r\n\r\n" not in raw or not raw.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert b'"too_large"' in body and b"1024 MiB" in body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "query"),
        ({"query": 5}, "query"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "limit": "ten"}, "limit"),
        ({"query": "x", "limit": "7"}, "limit"),
        ({"query": "x", "limit": True}, "limit"),
        ({"query": "x", "limit": 7.0}, "limit"),
        ({"query": "x", "extra": 1}, "extra"),
        ({"query": "x", "space": "Acme"}, "space"),
        ({"query": "x", "space": "acme", "cwd": "/tmp"}, "space"),
        ({"query": "x", "cwd": "relative/path"}, "cwd"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 5000}, "query"),
    ],
    ids=lambda v: str(v)[:40],
)
def test_422_names_the_field(agent, body, field):
    response = agent.post("/v1/recall", json=body)
    assert response.status_code == 422, response.text
    assert field in error_of(response)["message"]


@pytest.mark.parametrize("flag", ["yes", "true", 1], ids=repr)
def test_422_for_a_flag_that_is_not_a_json_boolean(agent, flag):
    response = agent.post("/v1/memories", json={"text": "x", "personal": flag})
    assert response.status_code == 422, response.text
    assert "personal" in error_of(response)["message"]


def test_422_for_a_lone_surrogate(agent):
    for body, field in [(b'{"query": "\\ud800"}', "query"), (b'{"query": "x", "cwd": "/tmp/\\udfff"}', "cwd")]:
        response = agent.post("/v1/recall", content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 422, response.text
        assert field in error_of(response)["message"]


def test_422_for_a_body_that_is_not_json(agent):
    for content, kind in [
        (b"{not json", "application/json"),
        (b"[1, 2]", "application/json"),
        (b"query=x", "text/plain"),
        (b'{"query": "\xff\xfe"}', "application/json"),
    ]:
        response = agent.post("/v1/recall", content=content, headers={"Content-Type": kind})
        assert response.status_code == 422, (content, response.text)
        error_of(response)


def test_422_for_a_malformed_memory_id_and_400_for_a_run_header(agent):
    response = agent.get("/v1/memories/not-an-id")
    assert response.status_code == 422
    assert error_of(response)["code"] == "invalid_id"
    for value in ("bad run id!", "run-1"):  # a caller never names its run, well-formed or not
        response = agent.post("/v1/recall", json={"query": "x"}, headers={"X-Esfis-Run": value})
        assert response.status_code == 400 and error_of(response)["code"] == "bad_request"
        assert "X-Esfis-Run" in error_of(response)["message"]


def test_404_for_a_space_that_does_not_exist(agent):
    response = agent.post("/v1/recall", json={"query": "x", "space": "initech"})
    assert response.status_code == 404
    assert error_of(response)["code"] == "space_not_found"


def test_operator_validation_errors_share_the_shape(operator):
    for response in [
        operator.post("/v1/spaces", json={"name": "Bad Name"}),
        operator.post("/v1/spaces", json={"name": "ok", "folders": ["relative"]}),
        operator.put("/v1/policies", json={"ai": "x", "effect": "maybe"}),
        operator.put("/v1/policies", json={"ai": "Bad AI", "effect": "deny"}),
        operator.get("/v1/deliveries", params={"last": 0}),
        operator.get("/v1/deliveries", params={"ai": "a\x00b"}),  # PostgreSQL's text holds no NUL
        operator.get("/v1/deliveries", params={"space": "\x00"}),
        operator.get("/v1/deliveries/abc"),
        operator.get("/v1/deliveries/0"),
        operator.delete("/v1/policies"),
        operator.post("/v1/import", params={"ai": "Bad AI"}, content=b"{}\n"),
    ]:
        assert response.status_code == 422, response.text
        error_of(response)
    missing = operator.get("/v1/deliveries/999999")
    assert missing.status_code == 404
    error_of(missing)


def test_a_body_that_is_not_json_or_not_an_object_is_said_so(agent):
    """Not "invalid field '0': JSON decode error", nor a dictionary pydantic could not find."""
    not_json = agent.post("/v1/recall", content=b"nope", headers={"Content-Type": "application/json"})
    assert not_json.status_code == 422
    assert error_of(not_json)["message"].startswith("invalid field 'body': the body is not JSON ("), not_json.text
    form = agent.post("/v1/recall", content=b'{"query": "x"}', headers={"Content-Type": "text/plain"})
    assert form.status_code == 422
    assert error_of(form)["message"] == (
        "invalid field 'body': the body must be a JSON object, sent with Content-Type: application/json"
    ), form.text
