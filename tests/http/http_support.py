"""Assertions and small calls shared by the HTTP tests."""

from __future__ import annotations

import httpx


def error_of(response: httpx.Response) -> dict[str, str]:
    """The error of a response, after checking it has the one shape and nothing else."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert isinstance(body["error"]["code"], str) and body["error"]["code"]
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def remember(client: httpx.Client, text: str, **fields: object) -> str:
    response = client.post("/v1/memories", json={"text": text, **fields})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def texts(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [m["text"] for m in response.json()["memories"]]


def held(response: httpx.Response) -> str:
    """A call held for the operator's approval (202): nothing was written. Its approval's id."""
    assert response.status_code == 202, response.text
    body = response.json()
    assert set(body) == {"approval", "message"} and body["approval"]["status"] == "pending", body
    assert body["approval"]["id"].startswith("apr_")
    return body["approval"]["id"]


def not_written(response: httpx.Response) -> None:
    """Held (202), or refused because its run already holds one (409 approval_pending)."""
    if response.status_code == 409:
        assert error_of(response)["code"] == "approval_pending"
    else:
        held(response)
