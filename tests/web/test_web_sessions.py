"""Sign-out is the catalog's, not a process's: a signed-out cookie stays dead after ``esfis serve``
restarts, and on another server over the same home. Real servers, cookies replayed by httpx."""

from __future__ import annotations

from contextlib import closing

import httpx
from web_support import SESSION, at, csrf_of, signed_in

from tests.web.conftest import start_server, stop_server


def replay(server, cookie: str) -> httpx.Response:
    with httpx.Client(base_url=server.url, follow_redirects=False, timeout=60.0, cookies={SESSION: cookie}) as client:
        return client.get(at(server, "spaces"))


def signed_out_cookie(server, token: str) -> str:
    with closing(signed_in(server, token)) as client:
        cookie = client.cookies[SESSION]
        assert replay(server, cookie).status_code == 200  # control: the copy works while signed in
        answer = client.post(at(server, "sign-out"), data={"csrf": csrf_of(client.get(at(server, "spaces")).text)})
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
        cookie = signed_out_cookie(first, token)
        answer = replay(second, cookie)
        assert answer.status_code == 303 and answer.headers["location"].startswith(at(second, "sign-in"))
        still = signed_in(second, token)  # a live session on the second server, signed out on the first
        live = still.cookies[SESSION]
        still.close()
        stop_server(first)
        first = start_server(tmp_path / "home", work)
        for server in (first, second):
            answer = replay(server, cookie)
            assert answer.status_code == 303 and answer.headers["location"].startswith(at(server, "sign-in"))
            assert replay(server, live).status_code == 200
    finally:
        stop_server(first)
        if second is not None:
            stop_server(second)
