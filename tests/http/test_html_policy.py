"""``HtmlPolicy``: an HTML answer with no Content-Security-Policy of its own gets the strict one;
one that names its own keeps it; anything else is left as it is."""

from __future__ import annotations

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from server.http.html_policy import STRICT, HtmlPolicy

OWN = "default-src 'none'; script-src 'self'"
ANSWERS = {
    "/bare": lambda: HTMLResponse("<p>a page that forgot its policy</p>"),
    "/charset": lambda: Response("<p>x</p>", media_type="Text/HTML; charset=utf-8"),
    "/own": lambda: HTMLResponse("<p>x</p>", headers={"Content-Security-Policy": OWN}),
    "/json": lambda: JSONResponse({"ok": True}),
    "/text": lambda: PlainTextResponse("<p>not html</p>"),
}


def _get(path: str) -> httpx.Response:
    async def endpoint(request: Request) -> Response:
        return ANSWERS[request.url.path]()

    app = Starlette(routes=[Route(p, endpoint) for p in ANSWERS])
    app.add_middleware(HtmlPolicy)

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await client.get(path)

    return anyio.run(go)


@pytest.mark.parametrize("path", ["/bare", "/charset"])
def test_an_html_answer_without_a_policy_gets_the_strict_one(path):
    assert _get(path).headers.get_list("content-security-policy") == [STRICT]
    assert STRICT.startswith("default-src 'none';") and "frame-ancestors 'none'" in STRICT
    assert "script-src" not in STRICT and "unsafe" not in STRICT


def test_an_html_answer_keeps_its_own_policy():
    assert _get("/own").headers.get_list("content-security-policy") == [OWN]


@pytest.mark.parametrize("path", ["/json", "/text"])
def test_other_answers_are_left_as_they_are(path):
    assert "content-security-policy" not in _get(path).headers
