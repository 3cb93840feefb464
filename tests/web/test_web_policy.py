"""Every HTML answer of ``esfis serve`` carries a strict Content-Security-Policy: the settings
pages (signed in or not, errors and the page that says where they are), and ``/docs``, whose
Swagger UI comes from a packaged copy — never a CDN — and renders in Chromium under its policy.

The settings pages are crawled from the address the server printed, so a page added later (and
linked from the others) is checked too.
"""

from __future__ import annotations

import os
import re
from collections import deque
from contextlib import closing
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from web_support import DESKTOP, at, csrf_of, signed_in

LINK = re.compile(r'(?:href|action)="([^"#]*)"')


def policy(answer: httpx.Response) -> dict[str, str]:
    """The Content-Security-Policy's directives (an empty dict when there is none)."""
    header = answer.headers.get("content-security-policy", "")
    return {
        d.split(" ", 1)[0]: d.split(" ", 1)[1] if " " in d else "" for d in (p.strip() for p in header.split(";")) if d
    }


def assert_strict(path: str, answer: httpx.Response, *, script: str | None = None) -> None:
    directives = policy(answer)
    assert directives, f"{path} ({answer.status_code}) is HTML with no Content-Security-Policy"
    assert directives.get("default-src") == "'none'", (path, directives)
    assert directives.get("frame-ancestors") == "'none'" and directives.get("base-uri") == "'none'", (path, directives)
    assert directives.get("form-action") == "'self'", (path, directives)
    assert directives.get("script-src") == script, (path, directives)  # settings pages: none at all
    text = answer.headers["content-security-policy"]
    assert "unsafe" not in text and "*" not in text and "http" not in text, (path, text)


def crawl(client: httpx.Client, start: str, limit: int = 80) -> dict[str, httpx.Response]:
    """Every page of this server reachable by links and GET forms from ``start``."""
    seen: dict[str, httpx.Response] = {}
    queue = deque([start])
    while queue and len(seen) < limit:
        path = queue.popleft()
        if path in seen or path.endswith(("/sign-out",)):
            continue
        answer = client.get(path)
        seen[path] = answer
        if answer.headers.get("content-type", "").startswith("text/html"):
            for found in LINK.findall(answer.text):
                target = urljoin(path, found.replace("&amp;", "&"))
                if urlsplit(target).netloc == "" and target not in seen:
                    queue.append(target)
    return seen


@pytest.fixture(scope="module")
def site(web):
    """acme registered, one memory and one recall of it: a delivery, a run, a trail to crawl."""
    web.cli("space", "add", str(web.work / "acme"))
    with web.client(web.tokens["claude-code"]) as agent:
        assert agent.post("/v1/memories", json={"text": "Acme deploys on Fridays", "space": "acme"}).status_code == 201
        assert agent.post("/v1/recall", json={"query": "deploys", "space": "acme"}).status_code == 200
    return web


def test_every_html_answer_carries_a_strict_policy(site):
    answers: dict[str, httpx.Response] = {}
    with closing(signed_in(site, site.tokens["operator"])) as operator:
        answers.update(crawl(operator, at(site, "spaces")))
        csrf = csrf_of(operator.get(at(site, "spaces")).text)
        answers["POST spaces/name (an error page)"] = operator.post(
            at(site, "spaces/name"), data={"csrf": csrf, "name": "Bad Name"}
        )
        answers["POST access without csrf"] = operator.post(at(site, "access"), data={"ai": "x"})
        answers["POST tokens without the token"] = operator.post(
            at(site, "tokens"), data={"csrf": csrf, "kind": "operator"}
        )
    with httpx.Client(base_url=site.url, follow_redirects=False, timeout=60.0) as anonymous:
        for path in (
            at(site, "sign-in"),
            at(site, "no-such-page"),
            at(site, "deliveries/abc"),
            "/settings",
            "/settings/",
            "/settings/spaces",
            f"/settings/{'a' * 26}/spaces",
            "/docs",
            "/redoc",
            "/docs/oauth2-redirect",
            "/no-such-path",
            "/openapi.json",
            "/healthz",
        ):
            answers[path] = anonymous.get(path)
        answers["POST sign-in, bad form"] = anonymous.post(at(site, "sign-in"), data={"token": "x"})
    html = {p: a for p, a in answers.items() if a.headers.get("content-type", "").startswith("text/html")}
    assert len(html) >= 25, sorted(html)  # the crawl reached the pages: never a vacuous pass
    for path, answer in html.items():
        assert_strict(path, answer, script="'self'" if path == "/docs" else None)
    assert "/docs" in html and html["/docs"].status_code == 200


def test_fastapi_pages_that_load_from_a_cdn_are_gone(site):
    with httpx.Client(base_url=site.url, timeout=60.0) as client:
        docs = client.get("/docs")
        assert docs.status_code == 200 and "http" not in re.sub(r"<!doctype html>", "", docs.text, flags=re.I)
        for path in ("/redoc", "/docs/oauth2-redirect"):
            assert client.get(path).status_code == 404
        for asset in re.findall(r'(?:src|href)="(/docs/[^"]+)"', docs.text):
            answer = client.get(asset)
            assert answer.status_code == 200 and len(answer.content) > 100, asset
            assert answer.headers["x-content-type-options"] == "nosniff"


def test_docs_render_swagger_ui_under_its_policy_with_nothing_from_elsewhere(browser, site):
    context = browser.new_context(viewport=DESKTOP)
    refused: list[str] = []
    asked: list[str] = []
    try:
        page = context.new_page()
        page.on("console", lambda m: refused.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: refused.append(str(e)))
        page.on("request", lambda r: asked.append(r.url))
        page.goto(f"{site.url}/docs")
        page.wait_for_selector(".opblock", timeout=30_000)
        operations = page.locator(".opblock").count()
        assert operations > 20, operations  # the API's routes, rendered from /openapi.json
        assert any("/v1/recall" in path for path in page.locator(".opblock-summary-path").all_inner_texts())
        if shot := os.environ.get("ESFIS_DOCS_SHOT"):
            page.screenshot(path=shot)
    finally:
        context.close()
    assert refused == [], refused  # no Content-Security-Policy refusal, no script error
    elsewhere = [u for u in asked if not u.startswith(site.url) and not u.startswith("data:")]
    assert elsewhere == [], elsewhere
