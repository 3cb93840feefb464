"""The Settings pages' guards, against a real ``esfis serve`` over plain HTTP (a browser adds
nothing to these): no cookie, a forged or expired cookie, a POST without its CSRF token or from
another site, an AI token at the sign-in form, a revoked operator token, sign-out — and no page
shows a memory's text to anyone but a signed-in operator.

Each refusal has its control beside it: the same request, done right, goes through.
"""

from __future__ import annotations

import base64
import json
import re
import stat
import time
from contextlib import closing
from urllib.parse import quote

import httpx
import pytest
from web_support import SESSION, at, csrf_of, signed_in

from server.web.session import Signer

SECRET_TEXT = "The Acme staging password lives in vault path secret/acme-stg"  # nothing HTML escapes
PAGES = ["spaces", "spaces/acme", "everywhere", "deliveries", "deliveries/1", "runs", "grants", "tokens"]


@pytest.fixture(scope="module")
def site(web):
    """acme registered, a memory with a recognisable text, one recall of it (delivery 1)."""
    web.cli("space", "add", str(web.work / "acme"))
    with web.client(web.tokens["claude-code"]) as agent:
        assert agent.post("/v1/memories", json={"text": SECRET_TEXT, "space": "acme"}).status_code == 201
        found = agent.post("/v1/recall", json={"query": "staging password", "space": "acme"}).json()["memories"]
        assert [m["text"] for m in found] == [SECRET_TEXT]
    return web


@pytest.fixture(scope="module")
def operator(site):
    with closing(signed_in(site, site.tokens["operator"])) as client:
        yield client


def anonymous(site, **kwargs) -> httpx.Client:
    return httpx.Client(base_url=site.url, follow_redirects=False, timeout=60.0, **kwargs)


def key_of(site) -> bytes:
    return bytes.fromhex((site.home / "web-session.key").read_text().strip())


def signer(site, key: bytes | None = None, segment: str | None = None) -> Signer:
    """A signer of this site's cookies (its key, its pages' segment), or of another's."""
    return Signer(key or key_of(site), segment or at(site).split("/")[2])


def session_cookie(site, *, token_id: str, expires: int, key: bytes | None = None) -> str:
    return signer(site, key).sign("session", {"t": token_id, "n": "ab" * 16, "e": expires})


def goes_to_sign_in(site, answer: httpx.Response) -> bool:
    return answer.status_code == 303 and answer.headers["location"].startswith(at(site, "sign-in"))


# -- no session -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES)
def test_without_a_cookie_every_page_sends_you_to_sign_in(site, operator, path):
    with anonymous(site) as client:
        answer = client.get(at(site, path))
    assert goes_to_sign_in(site, answer), (answer.status_code, answer.text[:200])
    assert answer.headers["location"] == at(site, "sign-in?next=") + quote(at(site, path), safe="")
    assert operator.get(at(site, path)).status_code == 200  # control: with a session, the page is there


def test_a_post_without_a_session_changes_nothing(site):
    with anonymous(site) as client:
        answer = client.post(at(site, "access"), data={"ai": "cursor", "space": "acme", "effect": "deny"})
    assert goes_to_sign_in(site, answer)
    assert "cursor" not in site.cli("policy", "list").stdout


# -- forged and expired cookies -------------------------------------------------------------


def _forgeries(site, operator) -> dict[str, str]:
    genuine = operator.cookies[SESSION]
    version, payload, mac = genuine.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    other_id = site.token_id(ai="claude-code")
    swapped = base64.urlsafe_b64encode(json.dumps({**data, "t": other_id}).encode()).rstrip(b"=").decode()
    later = base64.urlsafe_b64encode(json.dumps({**data, "e": data["e"] + 86400}).encode()).rstrip(b"=").decode()
    return {
        "garbage": "not-a-session",
        "the token itself": site.tokens["operator"],
        # One character changed, never to itself (ending it in "AA" matched 1 genuine MAC in 256).
        "bad mac": f"{version}.{payload}.{'B' if mac[0] != 'B' else 'C'}{mac[1:]}",
        "payload swapped to another token": f"{version}.{swapped}.{mac}",
        "expiry pushed back": f"{version}.{later}.{mac}",
        "signed by another key": session_cookie(
            site, token_id=data["t"], expires=int(time.time()) + 3600, key=b"\x01" * 32
        ),
        "signed for another purpose": signer(site).sign("flash", data),
        "signed for another address": signer(site, segment="a" * 26).sign("session", data),
        "another version": f"v2.{payload}.{mac}",
    }


@pytest.mark.parametrize(
    "variant",
    [
        "garbage",
        "the token itself",
        "bad mac",
        "payload swapped to another token",
        "expiry pushed back",
        "signed by another key",
        "signed for another purpose",
        "signed for another address",
        "another version",
    ],
)
def test_a_forged_cookie_is_refused(site, operator, variant):
    forged = _forgeries(site, operator)[variant]
    with anonymous(site, cookies={SESSION: forged}) as client:
        answer = client.get(at(site, "deliveries/1"))
    assert goes_to_sign_in(site, answer)
    assert SECRET_TEXT not in answer.text


def test_an_expired_cookie_is_refused_though_genuinely_signed(site):
    token_id = site.token_id(operator=True)
    expired = session_cookie(site, token_id=token_id, expires=int(time.time()) - 1)
    fresh = session_cookie(site, token_id=token_id, expires=int(time.time()) + 600)
    with anonymous(site, cookies={SESSION: expired}) as client:
        assert goes_to_sign_in(site, client.get(at(site, "spaces")))
    with anonymous(site, cookies={SESSION: fresh}) as client:  # control: the same, unexpired
        assert client.get(at(site, "spaces")).status_code == 200


def test_a_genuine_cookie_naming_an_ai_token_is_refused(site):
    with anonymous(
        site,
        cookies={
            SESSION: session_cookie(site, token_id=site.token_id(ai="claude-code"), expires=int(time.time()) + 600)
        },
    ) as client:
        assert goes_to_sign_in(site, client.get(at(site, "spaces")))


def test_the_session_cookie_is_httponly_strict_and_holds_no_token(site):
    with anonymous(site) as client:
        form = client.get(at(site, "sign-in"))
        answer = client.post(at(site, "sign-in"), data={"csrf": csrf_of(form.text), "token": site.tokens["operator"]})
    cookie = next(v for k, v in answer.headers.multi_items() if k == "set-cookie" and v.startswith(f"{SESSION}="))
    attributes = {a.strip().split("=")[0].lower(): a.strip() for a in cookie.split(";")[1:]}
    assert {"httponly", "samesite", "path", "max-age"} <= set(attributes)
    assert attributes["samesite"].lower() == "samesite=strict"
    assert attributes["path"] == "Path=" + at(site).rstrip("/")  # the pages' address, never /settings
    value = cookie.split(";")[0].removeprefix(f"{SESSION}=")
    payload = value.split(".")[1]
    data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert set(data) == {"t", "n", "e"} and data["t"].startswith("tok_")
    assert site.tokens["operator"] not in value and site.tokens["operator"].removeprefix("esfis_") not in value
    assert stat.S_IMODE((site.home / "web-session.key").stat().st_mode) == 0o600


# -- CSRF and cross-site posts --------------------------------------------------------------


def _deny_cursor(site, client: httpx.Client, **fields: str) -> httpx.Response:
    return client.post(
        at(site, "access"), data={"ai": "cursor", "space": "acme", "effect": "deny", "back": "space", **fields}
    )


def test_a_post_without_its_csrf_token_is_refused_and_changes_nothing(site, operator):
    answer = _deny_cursor(site, operator)
    assert answer.status_code == 403 and "reload the page" in answer.text
    assert "cursor" not in site.cli("policy", "list").stdout


def test_a_post_with_another_sessions_csrf_token_is_refused(site, operator):
    with closing(signed_in(site, site.tokens["operator"])) as other:
        theirs = csrf_of(other.get(at(site, "spaces")).text)
    assert theirs != csrf_of(operator.get(at(site, "spaces")).text)
    assert _deny_cursor(site, operator, csrf=theirs).status_code == 403
    assert "cursor" not in site.cli("policy", "list").stdout


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://127.0.0.1:1"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ],
    ids=["other origin", "opaque origin", "other port", "cross-site", "same-site"],
)
def test_a_cross_site_post_is_refused_even_with_a_good_csrf_token(site, operator, headers):
    token = csrf_of(operator.get(at(site, "spaces")).text)
    answer = operator.post(
        at(site, "access"), headers=headers, data={"ai": "cursor", "space": "acme", "effect": "deny", "csrf": token}
    )
    assert answer.status_code == 403 and "another site" in answer.text
    assert "cursor" not in site.cli("policy", "list").stdout


def test_the_same_post_done_right_goes_through(site, operator):
    token = csrf_of(operator.get(at(site, "spaces")).text)
    origin = {"Origin": site.url, "Sec-Fetch-Site": "same-origin"}
    answer = operator.post(
        at(site, "access"),
        headers=origin,
        data={"ai": "cursor", "space": "acme", "effect": "deny", "csrf": token, "back": "space"},
    )
    assert answer.status_code == 303 and answer.headers["location"] == at(site, "spaces/acme")
    assert "deny cursor acme" in site.cli("policy", "list").stdout
    operator.post(at(site, "access"), data={"ai": "cursor", "space": "acme", "effect": "inherit", "csrf": token})
    assert "cursor" not in site.cli("policy", "list").stdout


def test_the_sign_in_form_needs_its_own_csrf_token(site):
    with anonymous(site) as client:
        client.get(at(site, "sign-in"))
        answer = client.post(at(site, "sign-in"), data={"token": site.tokens["operator"], "csrf": "x"})
    assert answer.status_code == 403 and SESSION not in answer.headers.get("set-cookie", "")


# -- who may sign in ------------------------------------------------------------------------


def _sign_in(site, token: str, next_: str = "") -> httpx.Response:
    with anonymous(site) as client:
        form = client.get(at(site, "sign-in"))
        return client.post(at(site, "sign-in"), data={"csrf": csrf_of(form.text), "token": token, "next": next_})


def test_an_ai_token_cannot_sign_in(site):
    answer = _sign_in(site, site.tokens["claude-code"])
    assert answer.status_code == 403
    assert "only an operator token signs in" in answer.text
    assert f"{SESSION}=" not in answer.headers.get("set-cookie", "")


@pytest.mark.parametrize("token", ["", "esfis_" + "a" * 43, "Bearer x", "tok_0123456789ab"])
def test_a_bad_token_cannot_sign_in_and_every_one_reads_alike(site, token):
    answer = _sign_in(site, token)
    assert answer.status_code == 401 and "not a valid token, or it was revoked" in answer.text
    assert f"{SESSION}=" not in answer.headers.get("set-cookie", "")


def test_after_sign_in_you_land_where_you_were_going_and_never_off_the_site(site):
    assert _sign_in(site, site.tokens["operator"], at(site, "runs")).headers["location"] == at(site, "runs")
    others = (
        "//evil.example/settings/",
        "https://evil.example/",
        at(site, "../v1/spaces"),
        "/v1/spaces",
        "/settings/runs",
    )
    for elsewhere in others:
        assert _sign_in(site, site.tokens["operator"], elsewhere).headers["location"] == at(site, "spaces")


def test_the_sign_in_form_sends_a_signed_in_operator_straight_on(site, operator):
    answer = operator.get(at(site, "sign-in"), params={"next": at(site, "tokens")})
    assert answer.status_code == 303 and answer.headers["location"] == at(site, "tokens")


def test_a_revoked_operator_token_ends_its_sessions_at_the_next_request(site):
    secret = site.token("--operator")
    with closing(signed_in(site, secret)) as client, closing(signed_in(site, secret)) as second:
        assert client.get(at(site, "spaces")).status_code == 200
        site.cli("token", "revoke", _newest_operator(site))  # by the CLI: another process
        assert goes_to_sign_in(site, client.get(at(site, "spaces")))
        assert goes_to_sign_in(site, second.get(at(site, "tokens")))


def _newest_operator(site) -> str:
    tokens = json.loads(site.cli("token", "list", "--json").stdout)["tokens"]
    return [t for t in tokens if t["operator"] and t["revoked_at"] is None][-1]["id"]


def test_sign_out_ends_the_session_even_for_a_copy_of_its_cookie(site):
    with closing(signed_in(site, site.tokens["operator"])) as client:
        copy = client.cookies[SESSION]
        answer = client.post(at(site, "sign-out"), data={"csrf": csrf_of(client.get(at(site, "spaces")).text)})
        assert answer.status_code == 303 and answer.headers["location"] == at(site, "sign-in")
        assert SESSION not in client.cookies
    with anonymous(site, cookies={SESSION: copy}) as replay:
        assert goes_to_sign_in(site, replay.get(at(site, "spaces")))


# -- what pages show, and to whom -----------------------------------------------------------


def test_pages_show_a_memory_text_to_a_signed_in_operator_only(site, operator):
    assert SECRET_TEXT in operator.get(at(site, "deliveries/1")).text  # control: the why shows it
    agent = {"Authorization": f"Bearer {site.tokens['claude-code']}"}
    operator_bearer = {"Authorization": f"Bearer {site.tokens['operator']}"}
    attempts = [
        anonymous(site),
        anonymous(site, headers=agent),
        anonymous(site, headers=operator_bearer),  # a bearer header is no session
        anonymous(site, cookies={SESSION: site.tokens["claude-code"]}),
        anonymous(
            site,
            cookies={
                SESSION: session_cookie(site, token_id=site.token_id(ai="claude-code"), expires=int(time.time()) + 600)
            },
        ),
    ]
    for client in attempts:
        with client:
            for path in PAGES + ["deliveries?ai=claude-code", "no-such-page"]:
                answer = client.get(at(site, path), follow_redirects=True)
                assert SECRET_TEXT not in answer.text, (path, client.headers, client.cookies)
                assert "secret/acme-stg" not in answer.text


def test_pages_are_never_cached_or_framed(site, operator):
    answer = operator.get(at(site, "deliveries/1"))
    assert answer.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert "script-src" not in answer.headers["content-security-policy"]  # default-src 'none': no script at all


# -- errors are pages, in words -------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "no-such-page",
        "deliveries/999999",
        "deliveries/abc",
        "spaces/no-such-space",
        "runs/run_0123",
    ],
)
def test_a_missing_page_is_a_404_page(site, operator, path):
    answer = operator.get(at(site, path))
    assert answer.status_code == 404 and answer.headers["content-type"].startswith("text/html")
    assert "<h1>Not found</h1>" in answer.text and "Traceback" not in answer.text


def test_an_unknown_page_is_a_404_page_without_a_session_too(site):
    with anonymous(site) as client:
        answer = client.get(at(site, "no-such-page"))
    assert answer.status_code == 404 and "<h1>Not found</h1>" in answer.text


def test_errors_are_the_cores_words_on_the_page(site, operator):
    token = csrf_of(operator.get(at(site, "spaces")).text)
    answer = operator.post(at(site, "spaces/name"), data={"csrf": token, "name": "Acme Corp"})
    cli = site.cli("space", "remove", "Acme Corp", check=False).stderr.strip().removeprefix("esfis: error: ")
    assert answer.status_code == 422 and cli.replace("'", "&#39;") in answer.text
    assert "Traceback" not in answer.text and "<h1>Spaces</h1>" in answer.text
    json_body = operator.post(at(site, "spaces/name"), json={"csrf": token, "name": "x"})
    assert json_body.status_code == 415 and "urlencoded" in json_body.text


def test_the_web_pages_stay_out_of_the_openapi_schema(site):
    paths = httpx.get(f"{site.url}/openapi.json").json()["paths"]
    assert paths and not [p for p in paths if p.startswith("/settings")]


def test_a_memory_text_is_shown_as_text_never_as_markup(site, operator):
    hostile = "<script>alert('x')</script><img src=x onerror=alert(1)> Acme login notes"
    with site.client(site.tokens["claude-code"]) as agent:
        assert agent.post("/v1/memories", json={"text": hostile, "space": "acme"}).status_code == 201
        assert agent.post("/v1/recall", json={"query": "Acme login notes", "space": "acme"}).status_code == 200
    newest = operator.get(at(site, "deliveries")).text
    number = re.search(r'href="' + re.escape(at(site, "deliveries/")) + r'(\d+)"', newest).group(1)
    why = operator.get(at(site, f"deliveries/{number}")).text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in why
    assert "<script" not in why and "<img" not in why


# -- an operator token is made only by one who can type the session's token --------------------


def _operator_tokens(site) -> list[str]:
    tokens = json.loads(site.cli("token", "list", "--json").stdout)["tokens"]
    return [t["id"] for t in tokens if t["operator"] and t["revoked_at"] is None]


def _make_operator_token(site, client: httpx.Client, **fields: str) -> httpx.Response:
    csrf = csrf_of(client.get(at(site, "tokens")).text)
    return client.post(at(site, "tokens"), data={"csrf": csrf, "kind": "operator", "ai": "", "space": "", **fields})


@pytest.mark.parametrize(
    "typed",
    ["nothing", "blank", "another operator token", "an AI token", "a near miss", "the token's id"],
)
def test_a_session_alone_cannot_make_an_operator_token(site, typed):
    """A stolen session cookie (and its CSRF field) is not enough: the form asks for the
    operator token this session signed in with, and refuses anything else."""
    mine = site.token("--operator")
    theirs = site.token("--operator")
    given = {
        "nothing": None,
        "blank": "",
        "another operator token": theirs,
        "an AI token": site.tokens["claude-code"],
        "a near miss": mine[:-1] + ("A" if mine[-1] != "A" else "B"),
        "the token's id": _operator_tokens(site)[-2],
    }[typed]
    with closing(signed_in(site, mine)) as client:
        before = _operator_tokens(site)
        answer = _make_operator_token(site, client, **({} if given is None else {"confirm": given}))
        assert answer.status_code == 403, answer.text[:300]
        assert "the operator token you signed in with" in answer.text
        assert not re.search(r'id="secret"', answer.text) and _operator_tokens(site) == before
        done = _make_operator_token(site, client, confirm=mine)  # control: typed right, it is made
        assert done.status_code == 200 and re.search(r'id="secret">esfis_[A-Za-z0-9_-]{43}<', done.text)
        assert len(_operator_tokens(site)) == len(before) + 1
    assert mine not in answer.text and mine not in done.text  # what was typed is never shown back


def test_an_ai_token_is_made_without_retyping(site, operator):
    csrf = csrf_of(operator.get(at(site, "tokens")).text)
    answer = operator.post(at(site, "tokens"), data={"csrf": csrf, "kind": "ai", "ai": "cursor", "space": ""})
    assert answer.status_code == 200 and 'id="secret"' in answer.text
