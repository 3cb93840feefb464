"""Small calls shared by the web tests: signing in, reading forms, minting cookies."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from server.web.session import SESSION_COOKIE as SESSION  # its name on plain HTTP

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 360, "height": 740}
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found, html[:2000]
    return found.group(1)


def signed_in(server, token: str) -> httpx.Client:
    """An httpx client with an operator session, signed in through the form like a browser."""
    client = httpx.Client(base_url=server.url, follow_redirects=False, timeout=60.0)
    form = client.get(at(server, "sign-in"))
    answer = client.post(at(server, "sign-in"), data={"csrf": csrf_of(form.text), "token": token, "next": ""})
    assert answer.status_code == 303 and answer.headers["location"] == at(server, "spaces"), answer.text
    assert SESSION in client.cookies
    return client


def browser_sign_in(page, server, token: str) -> None:
    page.goto(server.url + at(server))
    assert at(server, "sign-in") in page.url
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(server.url + at(server, "spaces"))


def save_shot(page, folder: Path, name: str) -> Path:
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    publish = os.environ.get("ESFIS_WEB_SCREENSHOTS")
    if publish and name.endswith("-desktop"):
        from PIL import Image  # with matplotlib, in the test extra

        Path(publish).mkdir(parents=True, exist_ok=True)
        # A palette of 128 colours: a third of the size, and the pages are flat colour anyway.
        Image.open(path).convert("RGB").quantize(colors=128).save(Path(publish) / path.name, optimize=True)
    return path


def printed_settings_url(server) -> str:
    """The settings page's address as ``esfis serve`` printed it when it started."""
    found = re.search(r"esfis: settings page: (\S+)", server.log.read_text())
    assert found, server.log.read_text()[-2000:]
    return found.group(1)


def at(server, page: str = "") -> str:
    """The path of a settings page of this server: ``/settings/SEGMENT/`` + ``page``, the
    segment as the address ``esfis serve`` printed has it."""
    path = urlsplit(printed_settings_url(server)).path
    assert re.fullmatch(r"/settings/[a-z2-7]{26}/", path), path
    return path + page
