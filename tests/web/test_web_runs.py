"""Settings › Runs lists the run tokens that took no step yet, as ``GET /v1/runs`` and ``esfis
runs`` do: a harness's freshly opened session is visible (and can be ended) before the agent
has done anything with it."""

from __future__ import annotations

from web_support import at, signed_in


def test_a_run_token_that_took_no_step_is_listed_on_the_runs_page(web):
    with web.client(web.token("--ai", "cursor", "--runs-only")) as harness:
        opened = harness.post("/v1/runs", json={}).json()
    client = signed_in(web, web.tokens["operator"])
    try:
        runs = client.get(at(web, "runs"))
        assert runs.status_code == 200
        assert opened["run"] in runs.text and "no step yet" in runs.text
        only_cursor = client.get(at(web, "runs"), params={"ai": "cursor"})
        assert opened["run"] in only_cursor.text
        elsewhere = client.get(at(web, "runs"), params={"ai": "claude-code"})
        assert opened["run"] not in elsewhere.text
    finally:
        client.close()
