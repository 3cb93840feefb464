"""Sign-out is the catalog's, not a process's: a signed-out cookie stays dead after ``esfis serve``
restarts, and on another server over the same home. Real servers, cookies replayed by httpx."""

from __future__ import annotations

from contextlib import closing

import httpx
from web_support import csrf_of, signed_in

from tests.web.conftest import start_server, stop_server


def replay(url: str, cookie: str) -> httpx.Response:
    with httpx.Client(base_url=url, follow_redirects=False, timeout=60.0, cookies={"esfis_session": cookie}) as client:
        return client.get("/settings/spaces")


def signed_out_cookie(url: str, token: str) -> str:
    with closing(signed_in(url, token)) as client:
        cookie = client.cookies["esfis_session"]
        assert replay(url, cookie).status_code == 200  # control: the copy works while signed in
        answer = client.post("/settings/sign-out", data={"csrf": csrf_of(client.get("/settings/spaces").text)})
        assert answer.status_code == 303
    return cookie


def test_a_signed_out_cookie_stays_dead_across_a_restart_and_on_another_server(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    first = start_server(tmp_path / "home", work)
    second = None
    try:
        token = first.token("--operator")
        second = start_server(tmp_path / "home", work)  # another server over the same home
        cookie = signed_out_cookie(first.url, token)
        answer = replay(second.url, cookie)
        assert answer.status_code == 303 and answer.headers["location"].startswith("/settings/sign-in")
        still = signed_in(second.url, token)  # a live session on the second server, signed out on the first
        live = still.cookies["esfis_session"]
        still.close()
        stop_server(first)
        first = start_server(tmp_path / "home", work)
        for url in (first.url, second.url):
            answer = replay(url, cookie)
            assert answer.status_code == 303 and answer.headers["location"].startswith("/settings/sign-in")
            assert replay(url, live).status_code == 200
    finally:
        stop_server(first)
        if second is not None:
            stop_server(second)
