"""Small calls shared by the web tests: signing in, reading forms, minting cookies."""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 360, "height": 740}
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found, html[:2000]
    return found.group(1)


def signed_in(url: str, token: str) -> httpx.Client:
    """An httpx client with an operator session, signed in through the form like a browser."""
    client = httpx.Client(base_url=url, follow_redirects=False, timeout=60.0)
    form = client.get("/settings/sign-in")
    answer = client.post("/settings/sign-in", data={"csrf": csrf_of(form.text), "token": token, "next": ""})
    assert answer.status_code == 303 and answer.headers["location"] == "/settings/spaces", answer.text
    assert "esfis_session" in client.cookies
    return client


def browser_sign_in(page, url: str, token: str) -> None:
    page.goto(f"{url}/settings/")
    assert "/settings/sign-in" in page.url
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/settings/spaces")


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
