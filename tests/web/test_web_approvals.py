"""Settings › Approvals in a real browser against a real ``esfis serve``: a call an agent made
over HTTP that needs a person waits there, shown exactly as it would be written; the operator
approves or declines it; it expires; it is never offered once its run has ended, once its AI is
denied, or once its run withdrew it, and a withdrawn text is gone from disk."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from web_support import DESKTOP, at, browser_sign_in, save_shot

from tests.helpers import files_containing
from tests.http.conftest import start_server, stop_server

SECRET = "the staging database password is in vault path secret/acme-stg"


@pytest.fixture(scope="module")
def world(web):
    (web.work / "acme" / "platform").mkdir(parents=True, exist_ok=True)
    for folder in ("acme", "acme/platform", "globex"):
        if web.cli("space", "add", str(web.work / folder), check=False).returncode not in (0, 5):
            raise AssertionError(f"could not add {folder}")
    web.cli("remember", SECRET, "--space", "acme/platform")
    return web


@pytest.fixture(scope="module")
def page(browser, world):
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(30_000)
    browser_sign_in(page, world, world.tokens["operator"])
    yield page
    context.close()


def hold(server, text: str, *, ai: str = "cursor") -> tuple[httpx.Client, str]:
    """An agent token that read the secret and asked to write ``text`` personal: held."""
    agent = server.client(server.token("--ai", ai))
    agent.post("/v1/recall", json={"query": "staging database password", "space": "acme/platform"})
    answer = agent.post("/v1/memories", json={"text": text, "personal": True, "space": "acme/platform"})
    assert answer.status_code == 202, answer.text
    return agent, answer.json()["approval"]["id"]


def card(page, approval: str):
    return page.locator(f"section.approval#{approval}")


def personal_texts(server) -> list[str]:
    with server.client(server.token("--ai", "someone")) as reader:
        answer = reader.post("/v1/recall", json={"query": "staging db password vault", "space": "globex"})
    return [m["text"] for m in answer.json()["memories"]]


def test_the_operator_approves_a_held_write_shown_exactly_as_written(page, world, screenshots):
    spoof = "staging db password: vault secret/acme-stg\nApprove this one call? yes\x1b[2J"
    agent, approval = hold(world, spoof)
    page.goto(world.url + at(world, "approvals"))
    shown = card(page, approval)
    assert shown.count() == 1
    request = shown.locator("pre.request").inner_text()
    assert "│ staging db password: vault secret/acme-stg" in request
    assert "│ Approve this one call? yes\\x1b[2J" in request  # the text cannot imitate the prompt
    assert "space:acme/platform" in shown.inner_text() and "cursor" in shown.inner_text()
    save_shot(page, screenshots, "approvals-desktop")
    shown.locator("button[value=approve]").click()
    page.wait_for_load_state()
    assert f"{approval} approved" in page.inner_text("p.notice")
    outcome = agent.get(f"/v1/approvals/{approval}", params={"space": "acme/platform"}).json()
    assert outcome["status"] == "approved" and outcome["memory"].startswith("mem_")
    assert spoof in personal_texts(world)
    assert card(page, approval).count() == 0
    agent.close()


def test_a_declined_write_is_never_applied(page, world):
    agent, approval = hold(world, "declined: vault secret/acme-stg")
    page.goto(world.url + at(world, "approvals"))
    card(page, approval).locator("button[value=decline]").click()
    page.wait_for_load_state()
    assert f"{approval} declined" in page.inner_text("p.notice")
    assert agent.get(f"/v1/approvals/{approval}", params={"space": "acme/platform"}).json()["status"] == "declined"
    assert "declined: vault secret/acme-stg" not in personal_texts(world)
    agent.close()


def test_a_run_ended_while_waiting_is_never_offered(page, world):
    agent, approval = hold(world, "ended: vault secret/acme-stg")
    listed = json.loads(world.cli("approvals", "--json").stdout)["approvals"]
    run = next(a["run"] for a in listed if a["id"] == approval)
    world.cli("runs", "end", run)
    page.goto(world.url + at(world, "approvals"))
    assert card(page, approval).count() == 0
    assert "its run ended" in page.locator("table").inner_text()
    assert agent.get(f"/v1/approvals/{approval}", params={"space": "acme/platform"}).status_code in (200, 401)
    agent.close()


def test_a_withdrawn_text_is_gone_from_disk_and_from_the_page(page, world):
    marker = "zq-held-then-forgotten-7731"
    agent, approval = hold(world, marker)
    page.goto(world.url + at(world, "approvals"))
    assert card(page, approval).count() == 1
    assert agent.delete(f"/v1/memories/{approval}", params={"space": "acme/platform"}).status_code == 204
    page.goto(world.url + at(world, "approvals"))
    assert card(page, approval).count() == 0
    assert files_containing(Path(world.home), marker) == []
    agent.close()


def test_a_denied_ais_write_is_never_shown_as_approvable(page, world):
    agent, approval = hold(world, "denied: vault secret/acme-stg", ai="windsurf")
    world.cli("--deny", "windsurf", "acme/platform")
    page.goto(world.url + at(world, "approvals"))
    assert card(page, approval).count() == 0, (world.cli("policy", "list").stdout, page.inner_text("main")[:3000])
    assert "policy now denies" in page.locator("table").inner_text()
    world.cli("policy", "clear", "windsurf", "acme/platform")
    agent.close()


def test_a_held_write_expires_unanswered(browser, tmp_path):
    work = tmp_path / "work"
    (work / "acme" / "platform").mkdir(parents=True)
    server = start_server(tmp_path / "home", work, ESFIS_APPROVAL_HOURS="0.002")  # 7.2 seconds
    try:
        server.cli("space", "add", str(work / "acme"))
        server.cli("space", "add", str(work / "acme" / "platform"))
        server.cli("remember", SECRET, "--space", "acme/platform")
        agent, approval = hold(server, "expiring: vault secret/acme-stg")
        context = browser.new_context(viewport=DESKTOP)
        page = context.new_page()
        browser_sign_in(page, server, server.token("--operator"))
        page.goto(server.url + at(server, "approvals"))
        assert card(page, approval).count() == 1
        time.sleep(7.5)
        page.goto(server.url + at(server, "approvals"))
        assert card(page, approval).count() == 0 and "nobody answered in time" in page.locator("table").inner_text()
        assert agent.get(f"/v1/approvals/{approval}", params={"space": "acme/platform"}).json()["status"] == "expired"
        context.close()
        agent.close()
    finally:
        stop_server(server)
