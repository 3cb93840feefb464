"""POST /v1/import: JSON Lines streamed into the importer (lines may straddle chunks), the
report answered as JSON, bad rows reported by line while the rest go in, and a re-run that adds
nothing twice."""

from __future__ import annotations

import json

from http_support import error_of, texts

ROWS = [
    {"text": "Acme deploys on Fridays", "space": "acme"},
    "{not json",
    {"text": "Globex deploys on Mondays", "space": "globex", "key": "globex-deploy"},
    {"text": "I review deploys in the morning"},
    {"text": "Initech deploys daily", "space": "initech"},
]


def _body() -> bytes:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in ROWS]
    return ("\n".join(lines) + "\n").encode()


def _chunks(data: bytes, size: int = 7):
    for start in range(0, len(data), size):
        yield data[start : start + size]


def test_import_streams_reports_bad_lines_and_imports_the_rest(operator, agent):
    response = operator.post(
        "/v1/import",
        params={"ai": "migration"},
        content=_chunks(_body()),
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text
    report = response.json()
    assert (report["imported"], report["skipped"], report["failed"]) == (3, 0, 2)
    assert [e["line"] for e in report["errors"]] == [2, 5]
    assert "initech" in report["errors"][1]["reason"]

    got = texts(agent.post("/v1/recall", json={"query": "when do we deploy?", "space": "acme"}))
    assert "Acme deploys on Fridays" in got and "I review deploys in the morning" in got
    assert not any("Globex" in t for t in got)


def test_a_rerun_adds_nothing_twice(operator):
    response = operator.post("/v1/import", content=_body(), headers={"Content-Type": "application/x-ndjson"})
    assert response.status_code == 200
    assert (response.json()["imported"], response.json()["skipped"]) == (0, 3)


def test_an_empty_body_imports_nothing(operator):
    response = operator.post("/v1/import", content=b"")
    assert response.status_code == 200
    assert response.json()["imported"] == 0 and response.json()["errors"] == []


def test_an_ai_token_cannot_import(agent):
    response = agent.post("/v1/import", content=_body())
    assert response.status_code == 403
    assert error_of(response)["code"] == "forbidden"
