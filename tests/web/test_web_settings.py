"""Settings › Spaces end to end, in a real browser against a real ``esfis serve``: what a person
who never used the CLI does — sign in, add Acme's and Globex's folders, make cursor a token, deny
cursor in Acme and watch its recall over HTTP come back empty, allow it back, read why a recall
returned what it did, look at runs and grants, remove a space, revoke a token — and screenshots
of every page at desktop and at 360 px.

The tests run in order and share one signed-in page (one server, one browser per module).
"""

from __future__ import annotations

import json
import re

import httpx
import pytest
from web_support import DESKTOP, PHONE, at, browser_sign_in, printed_settings_url, save_shot

AUTH0 = "Acme authentication uses Auth0"
CLERK = "Globex authentication uses Clerk"
QUESTION = "how does login work?"
state: dict[str, str] = {}


@pytest.fixture(scope="module")
def page(browser, web):
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


def go(web, page: str = "") -> str:
    """The full address of a settings page of this server."""
    return web.url + at(web, page)


def recall(web, token: str, space: str) -> list[str]:
    with web.client(token) as client:
        answer = client.post("/v1/recall", json={"query": QUESTION, "space": space})
    assert answer.status_code == 200, answer.text
    return [m["text"] for m in answer.json()["memories"]]


def row(page, ai: str):
    """The who-sees-what row of one AI."""
    return page.locator(
        "table.access tbody tr", has=page.locator("td strong", has_text=re.compile(f"^{re.escape(ai)}$"))
    )


def test_sign_in_with_an_operator_token_opens_the_spaces_page(page, web, screenshots):
    assert printed_settings_url(web) == go(web)  # what esfis serve printed: this server's pages
    page.goto(go(web, "deliveries"))
    assert page.url.startswith(go(web, "sign-in"))  # no session: the sign-in form, and back here after it
    save_shot(page, screenshots, "sign-in-desktop")
    page.fill("#token", web.tokens["operator"])
    page.click("button[type=submit]")
    page.wait_for_url(go(web, "deliveries"))
    page.click("nav >> text=Spaces")
    assert page.locator("h1").inner_text() == "Spaces"
    assert "No spaces yet" in page.inner_text("main")


def test_adding_a_folder_creates_the_space_named_as_the_cli_names_it(page, web):
    for name in ("acme", "globex"):
        page.goto(go(web, "spaces"))
        page.fill("#folder", str(web.work / name))
        page.click("text=Add folder")
        page.wait_for_url(go(web, f"spaces/{name}"))
        assert page.locator("h1").inner_text() == name
    listed = json.loads(web.cli("space", "list", "--json").stdout)["spaces"]
    assert {s["name"]: s["folders"] for s in listed} == {
        "acme": [str((web.work / "acme").resolve())],
        "globex": [str((web.work / "globex").resolve())],
    }
    page.goto(go(web, "spaces"))
    tree = page.inner_text("ul.tree")
    assert "acme" in tree and "globex" in tree and str(web.work / "acme") in tree

    # The same name rules and the same words as the CLI.
    bad = web.folder("Acme Corp")
    cli_error = web.cli("space", "add", str(bad), check=False).stderr.strip().removeprefix("esfis: error: ")
    page.fill("#folder", str(bad))
    page.click("text=Add folder")
    assert page.inner_text("[role=alert]") == cli_error
    assert "is not a valid space name" in cli_error

    # Agents start working: claude-code remembers a fact in each client's space.
    with web.client(web.tokens["claude-code"]) as agent:
        for space, text in (("acme", AUTH0), ("globex", CLERK)):
            assert agent.post("/v1/memories", json={"text": text, "space": space}).status_code == 201


def test_a_token_made_on_the_page_is_shown_once_and_works(page, web):
    page.goto(go(web, "tokens"))
    page.fill("#tai", "cursor")
    page.click("text=Make token")
    secret = page.inner_text("#secret").strip()
    assert re.fullmatch(r"esfis_[A-Za-z0-9_-]{43}", secret)
    state["cursor"] = secret
    assert recall(web, secret, "acme") == [AUTH0]
    page.goto(go(web, "tokens"))
    assert secret not in page.content()  # never again
    assert "cursor" in page.inner_text("table")


def test_denying_cursor_in_acme_leaves_its_recall_from_acme_empty(page, web):
    page.goto(go(web, "spaces/acme"))
    row(page, "cursor").locator("button[value=deny]").click()
    page.wait_for_url(go(web, "spaces/acme"))
    cursor = row(page, "cursor")
    assert cursor.locator("button[value=deny]").get_attribute("aria-pressed") == "true"
    assert cursor.locator(".badge").inner_text() == "denied"
    assert cursor.locator(".reason").inner_text() == "deny cursor acme (1. this AI in this space)"
    assert row(page, "claude-code").locator(".badge").inner_text() == "allowed"

    assert recall(web, state["cursor"], "acme") == []  # the next request over HTTP
    assert recall(web, web.tokens["claude-code"], "acme") == [AUTH0]  # only cursor
    cli = web.cli("recall", QUESTION, "--ai", "cursor", "--json", cwd=web.work / "acme")  # and the CLI
    assert json.loads(cli.stdout)["memories"] == []


def test_everyone_row_and_everywhere_rules_decide_below_an_ais_own_rule(page, web):
    page.goto(go(web, "everywhere"))
    row(page, "everyone (*)").locator("button[value=deny]").click()
    page.wait_for_url(go(web, "everywhere"))
    page.goto(go(web, "spaces/acme"))
    assert row(page, "claude-code").locator(".reason").inner_text() == "deny * everywhere (4. everyone everywhere)"
    assert row(page, "everyone (*)").locator(".badge").inner_text() == "denied"
    assert recall(web, web.tokens["claude-code"], "acme") == []
    page.goto(go(web, "everywhere"))
    row(page, "everyone (*)").locator("button[value=inherit]").click()
    page.wait_for_url(go(web, "everywhere"))
    assert recall(web, web.tokens["claude-code"], "acme") == [AUTH0]


def test_allowing_cursor_back_gives_it_acme_again(page, web):
    page.goto(go(web, "spaces/acme"))
    row(page, "cursor").locator("button[value=inherit]").click()
    page.wait_for_url(go(web, "spaces/acme"))
    assert row(page, "cursor").locator(".reason").inner_text() == "no rule: allowed by default"
    assert recall(web, state["cursor"], "acme") == [AUTH0]


def test_a_delivery_page_shows_why_the_recall_returned_what_it_did(page, web):
    page.goto(go(web, "deliveries?ai=cursor&space=acme"))
    rows = page.locator("table tbody tr")
    # Newest first: allowed again (HTTP), denied (the CLI, then HTTP), the first recall (HTTP).
    assert rows.locator("td[data-label=Via]").all_inner_texts() == ["http", "cli", "http", "http"]
    rows.nth(0).locator("td >> nth=0").locator("a").click()
    page.wait_for_url(re.compile(re.escape(go(web, "deliveries/")) + r"\d+$"))
    went = page.locator("section", has=page.locator("h2", has_text="What went in")).inner_text()
    assert AUTH0 in went and CLERK not in went
    unseen = page.inner_text("section.unseen")
    assert "Never seen by the agent" in unseen and CLERK in unseen and "outside the caller's reach" in unseen

    page.go_back()
    page.locator("table tbody tr").nth(1).locator("a").first.click()  # the recall made while denied
    page.wait_for_url(re.compile(re.escape(go(web, "deliveries/")) + r"\d+$"))
    assert "Nothing went in" in page.inner_text("main")
    assert "denied to this AI by policy" in page.inner_text("section.unseen")
    assert AUTH0 in page.inner_text("section.unseen")
    state["why"] = page.url


def test_deliveries_come_newest_first_a_page_at_a_time(page, web):
    with web.client(web.tokens["claude-code"]) as agent:
        for n in range(27):
            assert agent.post("/v1/recall", json={"query": f"question {n}", "space": "globex"}).status_code == 200
    page.goto(go(web, "deliveries?ai=claude-code&space=globex"))
    queries = page.locator("td[data-label=Query]").all_inner_texts()
    assert queries == [f"question {n}" for n in range(26, 1, -1)]  # 25 a page, newest first
    assert "page 1 of 2 · 27 in all" in page.inner_text("nav.pager")
    page.click("text=Older →")
    assert page.locator("td[data-label=Query]").all_inner_texts() == ["question 1", "question 0"]
    assert "ai=claude-code" in page.url and "space=globex" in page.url  # the filters stay


def test_runs_have_trails_and_grants_can_be_added_and_revoked(page, web):
    page.goto(state["why"])
    page.locator(f"dd a[href^='{at(web, 'runs/')}']").click()
    assert page.locator("h1").inner_text() == "Trail of a run"
    assert "cursor" in page.inner_text("dl") and "recall" in page.inner_text("table")
    page.goto(go(web, "runs?ai=cursor"))
    assert page.locator("table tbody tr").count() == 2  # its token's requests (one standing run) and one CLI recall

    page.goto(go(web, "grants"))
    page.select_option("#from", "acme")
    page.select_option("#to", "globex")
    page.fill("#until", "1h")
    page.click("text=Add grant")
    grant = re.search(r"grant (gr_[a-z0-9]{12})", page.inner_text("[role=status]")).group(1)
    assert [g["id"] for g in json.loads(web.cli("grant", "list", "--json").stdout)["grants"]] == [grant]
    page.locator("tr", has_text=grant).locator("text=Revoke").click()
    assert f"grant {grant} revoked" in page.inner_text("[role=status]")
    assert json.loads(web.cli("grant", "list", "--json").stdout)["grants"] == []


def test_removing_a_space_with_memories_asks_before_purging(page, web):
    page.goto(go(web, "spaces"))
    page.fill("#sname", "scratch")
    page.click("text=Add space")
    page.wait_for_url(go(web, "spaces/scratch"))
    with web.client(web.agent_token()) as agent:  # a run that read nothing elsewhere
        assert agent.post("/v1/memories", json={"text": "a scratch note", "space": "scratch"}).status_code == 201
    page.reload()
    page.click("text=Remove scratch")
    cli_words = "space 'scratch' holds 1 memory;"
    assert cli_words in page.inner_text("[role=alert]")  # the core's refusal, in words
    page.fill("#confirm", "scratc")
    page.click("text=Forget 1 and remove")
    assert "type the space's name" in page.inner_text("[role=alert]")
    assert "scratch" in web.cli("space", "list").stdout
    page.fill("#confirm", "scratch")
    page.click("text=Forget 1 and remove")
    page.wait_for_url(go(web, "spaces"))
    assert "forgotten for good" in page.inner_text("[role=status]")
    assert "scratch" not in web.cli("space", "list").stdout


def test_revoking_a_token_on_the_page_refuses_its_next_request(page, web):
    page.goto(go(web, "tokens"))
    cursor = page.locator("tbody tr", has_text="cursor")
    token_id = cursor.locator("code").first.inner_text()
    cursor.locator("text=Revoke").click()
    assert f"token {token_id} revoked" in page.inner_text("[role=status]")
    answer = httpx.post(
        f"{web.url}/v1/recall",
        json={"query": QUESTION, "space": "acme"},
        headers={"Authorization": f"Bearer {state['cursor']}"},
    )
    assert answer.status_code == 401


PAGES = [
    ("sign-in", None),
    ("spaces", "spaces"),
    ("space", "spaces/acme"),
    ("everywhere", "everywhere"),
    ("deliveries", "deliveries"),
    ("why", "why"),
    ("runs", "runs"),
    ("trail", "trail"),
    ("grants", "grants"),
    ("tokens", "tokens"),
    ("not-found", "no-such-page"),
    ("elsewhere", "/settings/"),  # without the pages' segment: where to find them
]


@pytest.mark.one_catalog  # a page's layout: no catalog changes it
def test_every_page_fits_a_desktop_and_a_360_px_screen(browser, page, web, screenshots):
    phone = browser.new_context(viewport=PHONE, device_scale_factor=1, is_mobile=True, has_touch=True)
    small = phone.new_page()
    try:
        small.goto(go(web, "sign-in"))
        save_shot(small, screenshots, "sign-in-360")
        browser_sign_in(small, web, web.tokens["operator"])
        page.goto(go(web, "spaces/acme"))  # the pages as the README tells them: cursor denied in acme
        row(page, "cursor").locator("button[value=deny]").click()
        page.wait_for_url(go(web, "spaces/acme"))
        page.goto(go(web, "runs"))
        trail = web.url + page.locator("table tbody a").first.get_attribute("href")
        for name, path in PAGES[1:]:
            url = {"why": state["why"], "trail": trail}.get(path) or (
                web.url + path if path.startswith("/") else go(web, path)
            )
            for view, tag, width in ((page, "desktop", DESKTOP["width"]), (small, "360", PHONE["width"])):
                view.goto(url)
                assert "Traceback" not in view.content()
                # Against the screen's width: a phone browser would zoom out to fit a wider page.
                overflow = view.evaluate("document.documentElement.scrollWidth") - width
                assert overflow <= 0, f"{name} is {overflow}px too wide at {tag}"
                save_shot(view, screenshots, f"{name}-{tag}")
    finally:
        phone.close()
    assert len(list(screenshots.glob("*.png"))) == 2 * len(PAGES)
