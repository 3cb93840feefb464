"""The settings session belongs to the settings origin: a page served on another port of
127.0.0.1 gets nothing it can use. Browsers do not isolate cookies by port, and SameSite does not
separate two ports of one host, so that page's ``<img>`` to its own port would carry a cookie
whose Path it can guess; replayed from its server, such a cookie would read every settings page
and mint an operator token on Settings › Tokens.

A real ``esfis serve``, a real Chromium signed in at the address the server printed, and a tiny
server of the test's own on another port that records what the browser sends it.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import closing
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx
import pytest
from web_support import DESKTOP, SESSION, at, csrf_of, printed_settings_url, signed_in

from tests.web.conftest import start_server, stop_server

PIXEL = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b")
# Where a page on another port would point its images: every settings path it can know or
# guess, on its own port (a browser sends a cookie to any port of the host it was set for).
GUESSES = ["/", "/pixel.gif", "/settings", "/settings/", "/settings/spaces", "/settings/tokens", "/settings/x/"]
PAGES = ["spaces", "everywhere", "deliveries", "runs", "grants", "tokens"]


class Catcher(ThreadingHTTPServer):
    """The other port's server: serves one page of images pointing back at itself, and keeps the
    ``Cookie`` header of every request it is sent."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[str, str]] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Catcher

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get("Cookie", "")))
        if self.path == "/page":
            body = "".join(f'<img src="{path}" alt="">' for path in GUESSES).encode()
            kind = "text/html"
        else:
            body, kind = PIXEL, "image/gif"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def catcher() -> Iterator[Catcher]:
    server = Catcher()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def operator_tokens(web) -> list[str]:
    tokens = json.loads(web.cli("token", "list", "--json").stdout)["tokens"]
    return [t["id"] for t in tokens if t["operator"]]


def replayed(web, cookies: dict[str, str], base: str) -> list[str]:
    """What the cookies do when the other port's server replays them to esfis: the settings pages
    they read, and the operator token they mint (with the form's CSRF field, if a page gave it)."""
    done = []
    with httpx.Client(follow_redirects=False, timeout=60.0, cookies=cookies) as client:
        for path in PAGES:
            answer = client.get(base + path)
            if answer.status_code == 200 and "Sign out" in answer.text:
                done.append(f"read {path}")
        tokens = client.get(base + "tokens")
        csrf = csrf_of(tokens.text) if 'name="csrf" value="' in tokens.text else ""
        before = operator_tokens(web)
        answer = client.post(base + "tokens", data={"csrf": csrf, "kind": "operator", "ai": "", "space": ""})
        if operator_tokens(web) != before or re.search(r"esfis_[A-Za-z0-9_-]{43}", answer.text):
            done.append("minted an operator token")
    return done


def test_a_page_on_another_port_gets_no_usable_session(browser, web, catcher):
    base = printed_settings_url(web)  # what esfis serve printed, as a person would open it
    context = browser.new_context(viewport=DESKTOP)
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(base)
        page.fill("#token", web.tokens["operator"])
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/spaces$"))
        assert page.locator("h1").inner_text() == "Spaces"  # control: the browser's own session works

        page.goto(f"{catcher.url}/page")  # the other port's page; its images load from its own port
        page.wait_for_load_state("load")
        asked = {path for path, _ in catcher.seen}
        assert set(GUESSES) <= asked, asked  # control: the browser did send every request
        received: dict[str, str] = {}
        for _, header in catcher.seen:
            received.update({name: morsel.value for name, morsel in SimpleCookie(header).items()})

        assert replayed(web, received, base) == [], f"the other port received {sorted(received)}"
        page.goto(base + "tokens")  # and the session itself is still the browser's
        assert page.locator("h1").inner_text() == "Tokens"
    finally:
        context.close()


def test_the_replay_would_work_with_the_browsers_own_cookies(browser, web):
    """Control for the test above: the same replay, given the cookies the browser holds for
    esfis, reads the pages; so an empty answer there means the other port got nothing usable."""
    base = printed_settings_url(web)
    context = browser.new_context(viewport=DESKTOP)
    try:
        page = context.new_page()
        page.goto(base)
        page.fill("#token", web.tokens["operator"])
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/spaces$"))
        held = {c["name"]: c["value"] for c in context.cookies()}
        with closing(httpx.Client(follow_redirects=False, timeout=60.0, cookies=held)) as client:
            assert client.get(base + "spaces").status_code == 200
    finally:
        context.close()


# -- the address: without the segment, nothing is read or set ---------------------------------


def _session_cookies(web) -> dict[str, str]:
    with closing(signed_in(web, web.tokens["operator"])) as client:
        return {SESSION: client.cookies[SESSION]}


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/settings", 200),
        ("/settings/", 200),
        ("/settings/spaces", 404),
        ("/settings/sign-in", 404),
        ("/settings/tokens", 404),
        (f"/settings/{'a' * 26}/spaces", 404),
        (f"/settings/{'a' * 26}/sign-in", 404),
        (f"/settings/{'a' * 26}/", 404),
        ("/settings/x/y/z", 404),
    ],
)
def test_without_the_segment_a_page_says_where_to_look_and_touches_no_cookie(web, path, status):
    cookies = _session_cookies(web)
    with httpx.Client(base_url=web.url, follow_redirects=False, timeout=60.0, cookies=cookies) as client:
        answer = client.get(path)
        posted = client.post(path, data={"csrf": "x", "token": web.tokens["operator"]})
        assert client.get(at(web, "spaces")).status_code == 200  # control: the same cookie, at the address
    for said in (answer, posted):
        assert said.status_code == status
        assert "esfis settings-url" in said.text and "Sign out" not in said.text
        assert at(web).split("/")[2] not in said.text  # never the segment
        assert "set-cookie" not in said.headers
        assert said.headers["content-security-policy"].startswith("default-src 'none'")


def test_a_cookie_is_good_at_its_own_address_only(web):
    """The signature is bound to the segment: deleting ``web-path.key`` moves the pages to a new
    address, where every cookie signed for the old one is refused."""
    cookies = _session_cookies(web)

    def get(path: str) -> httpx.Response:
        with httpx.Client(base_url=web.url, follow_redirects=False, timeout=60.0, cookies=cookies) as client:
            return client.get(path)

    assert get(at(web, "spaces")).status_code == 200  # control
    moved = web.home / "web-path.key"
    kept = moved.read_text()
    moved.unlink()
    try:
        fresh = printed_path_now(web)  # esfis settings-url makes the new address
        assert fresh != at(web)
        answer = get(fresh + "spaces")
        assert answer.status_code == 303 and answer.headers["location"].startswith(fresh + "sign-in")
        assert "esfis settings-url" in get(at(web, "spaces")).text  # the old address is no more
    finally:
        moved.write_text(kept)
    assert get(at(web, "spaces")).status_code == 200


def printed_path_now(web) -> str:
    """The settings path as ``esfis settings-url`` prints it now."""
    out = web.cli("settings-url").stdout.strip()
    assert out.startswith("http://127.0.0.1:8765/settings/"), out
    return out.removeprefix("http://127.0.0.1:8765")


# -- behind a proxy: __Host- cookies -----------------------------------------------------------


@pytest.fixture(scope="module")
def proxied(tmp_path_factory) -> Iterator:
    """A server whose public address is https (ESFIS_PUBLIC_URL), reached here directly."""
    root = tmp_path_factory.mktemp("proxied")
    (root / "work").mkdir()
    server = start_server(root / "home", root / "work", ESFIS_PUBLIC_URL="https://esfis.example.com")
    try:
        server.tokens["operator"] = server.token("--operator")
        yield server
    finally:
        stop_server(server)


def test_behind_https_the_cookies_are_host_prefixed_secure_and_the_address_public(proxied):
    printed = printed_settings_url(proxied)
    assert re.fullmatch(r"https://esfis\.example\.com/settings/[a-z2-7]{26}/", printed), printed
    path = urlsplit(printed).path
    with httpx.Client(base_url=proxied.url, follow_redirects=False, timeout=60.0) as client:
        form = client.get(path + "sign-in")
    signin = form.headers["set-cookie"]
    assert signin.startswith("__Host-esfis_settings_signin=")
    # httpx keeps a Secure cookie for https only: handed over by hand, as the proxy would pass it.
    handed = {"__Host-esfis_settings_signin": signin.split(";")[0].split("=", 1)[1]}
    with httpx.Client(base_url=proxied.url, follow_redirects=False, timeout=60.0, cookies=handed) as client:
        answer = client.post(path + "sign-in", data={"csrf": csrf_of(form.text), "token": proxied.tokens["operator"]})
    assert answer.status_code == 303, answer.text
    cookie = next(
        v
        for k, v in answer.headers.multi_items()
        if k == "set-cookie" and v.startswith("__Host-esfis_settings_session=")
    )
    attributes = {a.strip().split("=")[0].lower(): a.strip() for a in cookie.split(";")[1:]}
    assert attributes["path"] == "Path=/" and "secure" in attributes and "domain" not in attributes
    assert attributes["samesite"].lower() == "samesite=strict" and "httponly" in attributes
    session = {"__Host-esfis_settings_session": cookie.split(";")[0].split("=", 1)[1]}
    with httpx.Client(base_url=proxied.url, follow_redirects=False, timeout=60.0, cookies=session) as client:
        assert client.get(path + "spaces").status_code == 200  # the session, at the address
        # Path=/ sends it everywhere on the host; without the segment it still reads nothing.
        for elsewhere in ("/settings/spaces", "/settings/", f"/settings/{'a' * 26}/spaces"):
            answer = client.get(elsewhere)
            assert answer.status_code in (200, 404) and "Sign out" not in answer.text
        csrf = csrf_of(client.get(path + "spaces").text)
        deny = {"ai": "cursor", "space": "", "effect": "deny", "csrf": csrf}
        origin = {"Origin": proxied.url}  # the address it listens on is not the public origin
        assert client.post(path + "access", data=deny, headers=origin).status_code == 403
        public = {"Origin": "https://esfis.example.com"}
        assert client.post(path + "access", data=deny, headers=public).status_code == 303
        deny["effect"] = "inherit"
        assert client.post(path + "access", data=deny, headers=public).status_code == 303
        # A cookie that leaked with the segment still mints no operator token: that takes the token.
        mint = {"csrf": csrf, "kind": "operator", "ai": "", "space": ""}
        made = client.post(path + "tokens", data=mint, headers=public)
        assert made.status_code == 403 and 'id="secret"' not in made.text
        mint["confirm"] = proxied.tokens["operator"]
        assert 'id="secret"' in client.post(path + "tokens", data=mint, headers=public).text  # control
