"""The client distribution stands alone: esfis_client imports nothing of the server's packages,
depends on httpx and pydantic only, and has one exception class for each code the server sends,
with the same status. And the retry rule: a read is sent again after 429/503, a write never."""

from __future__ import annotations

import ast
import inspect
import tomllib
from pathlib import Path

import httpx
import pytest
from esfis_client import NO_RETRIES, Esfis, Retries, TooManyRequests, errors

import server.errors as server_errors

pytestmark = pytest.mark.one_catalog  # no catalog: one pass covers it

CLIENT = Path(__file__).resolve().parents[2] / "client"
SERVER_PACKAGES = ("server", "indexing")


def imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


def test_the_client_imports_nothing_of_the_server():
    sources = sorted((CLIENT / "esfis_client").rglob("*.py"))
    assert sources
    wrong = {
        str(p.relative_to(CLIENT)): sorted(m for m in imported(p) if m.split(".")[0] in SERVER_PACKAGES)
        for p in sources
    }
    assert not {p: m for p, m in wrong.items() if m}


def test_the_client_depends_on_httpx_and_pydantic_only():
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    names = {d.split(">")[0].split("=")[0].split("[")[0].strip() for d in project["dependencies"]}
    assert names == {"httpx", "pydantic"}
    assert project["optional-dependencies"]["langgraph"] == ["langgraph==1.2.24"]


def server_codes() -> dict[str, int]:
    codes: dict[str, int] = {}
    for _, cls in inspect.getmembers(server_errors, inspect.isclass):
        if issubclass(cls, server_errors.EsfisError) and cls is not server_errors.EsfisError:
            codes.setdefault(cls.code, cls.status)
    return codes


def test_every_code_the_server_sends_has_its_own_exception_with_the_same_status():
    missing = {code for code in server_codes() if code not in errors.BY_CODE}
    assert not missing
    assert {c: errors.BY_CODE[c].status for c in server_codes()} == server_codes()


def answer(status: int, code: str, **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": f"{code} said the server"}}, headers=headers)


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (403, "data_barrier", errors.DataBarrier),
        (403, "out_of_reach", errors.OutOfReach),
        (409, "approval_pending", errors.ApprovalPending),
        (404, "space_not_found", errors.SpaceNotFound),
        (409, "a_code_of_a_newer_server", errors.Conflict),  # an unknown code lands in its family
    ],
    ids=["barrier", "reach", "pending", "space", "newer"],
)
def test_an_error_answer_becomes_its_class_with_its_message(status, code, expected):
    error = errors.from_response(answer(status, code))
    assert type(error) is expected and error.code == code and error.message == f"{code} said the server"


class Scripted(httpx.BaseTransport):
    """A transport that answers from a script, for the client's own retry rule (no server)."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.sent: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request.method + " " + request.url.path)
        return self.answers.pop(0)


RECALLED = httpx.Response(200, json={"memories": []})


def test_a_recall_is_sent_again_after_429_with_its_retry_after_and_after_503():
    script = Scripted(answer(429, "too_many_requests", **{"Retry-After": "0"}), answer(503, "not_served"), RECALLED)
    with Esfis("http://esfis.test", "tok", transport=script, retries=Retries(backoff=0)) as client:
        assert client.recall("anything") == []
    assert script.sent == ["POST /v1/recall"] * 3


def test_a_write_is_never_sent_again_and_raises_with_its_retry_time():
    script = Scripted(answer(429, "too_many_requests", **{"Retry-After": "7"}), RECALLED)
    with Esfis("http://esfis.test", "tok", transport=script) as client, pytest.raises(TooManyRequests) as refused:
        client.remember("a fact")
    assert refused.value.retry_after == 7 and script.sent == ["POST /v1/memories"]


def test_a_retry_after_longer_than_the_client_waits_is_raised_at_once():
    script = Scripted(answer(429, "too_many_requests", **{"Retry-After": "120"}), RECALLED)
    with Esfis("http://esfis.test", "tok", transport=script) as client, pytest.raises(TooManyRequests):
        client.recall("anything")
    assert len(script.sent) == 1


def test_no_retries_sends_a_read_once():
    script = Scripted(answer(503, "not_served"), RECALLED)
    with Esfis("http://esfis.test", "tok", transport=script, retries=NO_RETRIES) as client:
        with pytest.raises(errors.NotServed):
            client.recall("anything")
    assert len(script.sent) == 1
