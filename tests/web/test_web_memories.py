"""Settings › Memories end to end, in a real Chromium against a real ``esfis serve`` (the real
model): a space of 10,000 memories browsed and paged, filtered by AI and origin mark, searched
(logged as the operator's), a memory opened and its run's trail followed, replaced, forgotten
(its text gone from disk), a forget by filter with a near miss on each side, a hostile text
shown inert, and an agent token refused. The same through ``GET /v1/memories`` and ``POST
/v1/forget``. Screenshots of each page, as the other web tests take them.

The tests run in order and share one signed-in page (one server, one browser per module).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from web_support import DESKTOP, at, browser_sign_in, save_shot

from tests.helpers import files_containing

ROWS = 10_000
AUTH0 = "Acme authentication uses Auth0"
HOSTILE = "<script>alert(1)</script> deploys \u202egnp.exe\u202c \x1b[31mred\x1b[0m"
state: dict[str, str] = {}


def _lines(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@pytest.fixture(scope="module")
def world(web):
    with web.client(web.tokens["operator"]) as op:
        for name in ("acme", "acme/platform", "globex"):
            assert op.post("/v1/spaces", json={"name": name}).status_code == 201
        # The filler's vectors are given (random, rounded): the page browses them, and no recall
        # here needs them to mean anything; embedding 10,000 texts would be most of this module's
        # time. Every memory a search must find (Auth0's) is written by an agent, embedded by the model.
        filler = np.round(np.random.default_rng(59).normal(size=(ROWS, 384)), 2).tolist()
        rows = [
            {
                "text": f"acme note {i}: the build of service {i % 97} runs on runner {i % 13}",
                "space": "acme",
                "vector": filler[i],
                **({"labels": ["source:slack"]} if i % 1000 == 0 else {}),
            }
            for i in range(ROWS)
        ]
        answer = op.post("/v1/import?ai=importer", content=_lines(rows), timeout=600)
        assert answer.status_code == 200 and answer.json()["imported"] == ROWS, answer.text
        near = [
            {"text": "archived slack says acme deploys on friday", "space": "acme", "labels": ["source:slack-archive"]},
            {"text": "slack says the platform deploys on friday", "space": "acme/platform", "labels": ["source:slack"]},
            {"text": "slack says globex deploys on friday", "space": "globex", "labels": ["source:slack"]},
        ]
        assert op.post("/v1/import?ai=importer", content=_lines(near)).json()["imported"] == 3
    with web.client(web.tokens["claude-code"]) as agent:
        for text, space in (
            ("Globex rotates its signing keys on mondays", "globex"),
            *((t, "acme") for t in (AUTH0, HOSTILE)),
        ):
            extra = {"data": {"ticket": "\u202eexe.gnp", "n": 3}} if text == HOSTILE else {}
            answer = agent.post("/v1/memories", json={"text": text, "space": space, **extra})
            assert answer.status_code == 201, answer.text
            state[text] = answer.json()["id"]
    return web


@pytest.fixture(scope="module")
def page(browser, world):
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(60_000)
    browser_sign_in(page, world, world.tokens["operator"])
    yield page
    context.close()


def go(web, path: str = "") -> str:
    return web.url + at(web, path)


def shown_ids(page) -> list[str]:
    hrefs = page.locator("table#listed tbody a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    return [h.rsplit("/", 1)[1] for h in hrefs]


def test_a_space_of_ten_thousand_is_browsed_newest_first_a_page_at_a_time(page, world, screenshots):
    page.goto(go(world, "memories?space=acme"))
    first = shown_ids(page)
    assert len(first) == 50 and first[0] == state[HOSTILE]  # newest first: the agent's last write
    page.click("a[rel=next]")
    second = shown_ids(page)
    assert len(second) == 50 and not set(first) & set(second)
    save_shot(page, screenshots, "memories-desktop")
    assert len(page.content()) < 200_000  # a page, never a partition, reaches the browser


def test_the_api_pages_through_every_memory_once(world):
    seen, cursor = [], None
    with world.client(world.tokens["operator"]) as op:
        while True:
            answer = op.get(
                "/v1/memories", params={"space": "acme", "limit": 200, **({"cursor": cursor} if cursor else {})}
            )
            assert answer.status_code == 200, answer.text
            seen += [m["id"] for m in answer.json()["memories"]]
            cursor = answer.json()["next_cursor"]
            if cursor is None:
                break
    assert len(seen) == len(set(seen)) == ROWS + 3  # the import, the near miss in acme, the agent's two there


def test_filter_by_ai_and_origin(page, world):
    page.goto(go(world, "memories?space=acme"))
    page.select_option("select#ai", "claude-code")
    page.click("#filters button[type=submit]")
    assert sorted(shown_ids(page)) == sorted([state[HOSTILE], state[AUTH0]])
    page.goto(go(world, "memories?space=acme&origin=source:slack"))
    assert len(shown_ids(page)) == ROWS // 1000  # a whole mark: never source:slack-archive


def test_search_runs_a_recall_as_the_operator(page, world, screenshots):
    page.goto(go(world, "memories?space=acme"))
    page.fill("#q", "how do users log in to acme?")
    page.click("#filters button[type=submit]")
    first = page.locator("table#found tbody tr").first
    assert "Auth0" in first.inner_text()
    assert page.locator("table#found th", has_text="Cosine").count() == 1
    save_shot(page, screenshots, "memories-search-desktop")
    with world.client(world.tokens["operator"]) as op:
        last = op.get("/v1/deliveries", params={"last": 1}).json()["deliveries"][0]
    assert (last["ai"], last["transport"]) == ("operator", "operator")


def test_a_memory_shows_where_it_came_from_and_its_trail(page, world, screenshots):
    page.goto(go(world, f"memories/{state['Acme authentication uses Auth0']}"))
    assert page.locator("#text").inner_text() == "Acme authentication uses Auth0"
    assert page.locator("#deliveries tbody tr").count() >= 1  # the search above included it
    save_shot(page, screenshots, "memory-desktop")
    page.locator("dd a", has_text="run_").click()
    assert "/runs/run_" in page.url and page.locator("h1").count() == 1


def test_replace_supersedes_after_a_confirmation(page, world):
    old = state[AUTH0]
    page.goto(go(world, f"memories/{old}"))
    page.fill("#new-text", "Acme authentication uses Okta since December")
    page.click("text=Replace…")
    assert "supersede" in page.locator(".confirm").inner_text()  # the confirmation names the change
    page.click(".confirm button[type=submit]")
    assert page.locator("#text").inner_text() == "Acme authentication uses Okta since December"
    assert page.locator("#supersedes").inner_text() == old
    page.goto(go(world, f"memories/{old}"))
    assert page.locator("#superseded-by").count() == 1


def test_forget_one_removes_its_text_from_disk(page, world):
    target = "Globex rotates its signing keys on mondays"  # a small partition: one Arrow file, its text plain
    memory_id = state[target]
    assert files_containing(world.home, target) != []  # the check sees a text that is there
    page.goto(go(world, f"memories/{memory_id}"))
    page.click("text=Forget…")
    assert "for good" in page.locator(".confirm").inner_text()  # the confirmation names the change
    page.click(".confirm button[type=submit]")
    assert "forgotten for good" in page.locator(".notice.ok").inner_text()
    assert files_containing(world.home, target) == []
    assert page.goto(go(world, f"memories/{memory_id}")).status == 404


def test_forget_by_filter_touches_nothing_outside_it(page, world, screenshots):
    page.goto(go(world, "memories?space=acme&origin=source:slack"))
    page.click("text=Preview the forget…")
    assert page.locator("#count").inner_text() == str(ROWS // 1000)
    save_shot(page, screenshots, "forget-where-desktop")
    page.click("form button.danger")
    assert f"forgot {ROWS // 1000} memories" in page.locator(".notice.ok").inner_text()
    with world.client(world.tokens["operator"]) as op:
        gone = op.get("/v1/memories", params={"space": "acme", "origin": "source:slack"}).json()["memories"]
    assert gone == []
    with world.client(world.tokens["operator"]) as op:
        for space, text in (
            ("acme", "archived slack says acme deploys on friday"),
            ("acme/platform", "slack says the platform deploys on friday"),
            ("globex", "slack says globex deploys on friday"),
        ):
            kept = op.get("/v1/memories", params={"space": space, "limit": 200}).json()["memories"]
            assert text in [m["text"] for m in kept]
        assert op.post("/v1/forget", json={"space": "acme", "origin": "source:slack"}).json()["matched"] == 0


def test_a_space_page_plots_its_days_without_a_script(page, world, screenshots):
    with world.client(world.tokens["claude-code"]) as agent:
        for query in ("how do users log in to acme?", "zebra migration patterns in antarctica"):
            assert agent.post("/v1/recall", json={"query": query, "space": "acme"}).status_code == 200
    answer = page.goto(go(world, "spaces/acme"))
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    assert page.locator("svg.plot").count() == 2 and page.locator("script").count() == 0
    bars = page.locator("svg.plot rect title").evaluate_all("els => els.map(e => e.textContent)")
    assert any(t.endswith(" importer") for t in bars) and any(t.endswith(" claude-code") for t in bars)
    assert any(t.endswith(" answered") for t in bars)  # the recalls from acme, drawn
    save_shot(page, screenshots, "space-plots-desktop")


def test_duplicates_are_counted_then_folded_into_the_earliest(page, world):
    with world.client(world.agent_token("gemini")) as agent:  # a fresh run: claude-code's has read acme
        ids = [
            agent.post(
                "/v1/memories", json={"text": "Globex bills in euros", "space": "globex", "dedupe": False}
            ).json()["id"]
            for _ in range(2)
        ]
    page.goto(go(world, "memories?space=globex"))
    page.click("text=Count duplicates…")
    assert (
        "1 say" in page.locator("#dedupe-count").inner_text() or "1 says" in page.locator("#dedupe-count").inner_text()
    )
    page.click("form button[type=submit]:has-text('Fold')")
    assert "folded 1 copies" in page.locator(".notice.ok").inner_text()
    page.goto(go(world, f"memories/{ids[1]}"))
    assert page.locator("#superseded-by").inner_text() == ids[0]


def test_a_hostile_text_is_shown_inert(page, world):
    page.goto(go(world, f"memories/{state[HOSTILE]}"))
    shown = page.locator("#text").inner_text()
    assert "<script>alert(1)</script>" in shown  # as text, never as markup
    assert "\u202e" not in shown and "\x1b" not in shown and "\\u202e" in shown and "\\x1b" in shown
    assert page.locator("script").count() == 0
    assert page.locator("#data").inner_text() == '{"n": 3, "ticket": "\\u202eexe.gnp"}'  # its data, inert too


def test_an_agent_token_sees_nothing(world):
    with world.client(world.tokens["claude-code"]) as agent:
        assert agent.get("/v1/memories", params={"space": "acme"}).status_code == 403
        assert agent.post("/v1/forget", json={"space": "acme"}).status_code == 403
        answer = agent.get(at(world, "memories?space=acme"), follow_redirects=False)
        assert answer.status_code == 303 and "sign-in" in answer.headers["location"]
