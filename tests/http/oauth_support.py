"""The OAuth 2.1 flow against a real ``esfis serve``, step by step over plain HTTP, for the tests
that break one step at a time; the consent given as the operator through the real pages (an
httpx client that keeps cookies, as a browser does)."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import httpx

CALLBACK = "http://127.0.0.1:9/callback"  # never opened: the tests read the redirect's Location
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def register(url: str, *, redirect: str = CALLBACK, name: str = "Test host", **extra: object) -> httpx.Response:
    body = {
        "client_name": name,
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **extra,
    }
    return httpx.post(f"{url}/register", json=body, timeout=30)


def authorize(
    url: str,
    client_id: str,
    challenge: str,
    *,
    redirect: str = CALLBACK,
    state: str = "state-1",
    resource: str | None = "",
    method: str = "S256",
) -> httpx.Response:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": method,
        "resource": f"{url}/mcp" if resource == "" else resource,
    }
    return httpx.get(f"{url}/authorize", params={k: v for k, v in params.items() if v is not None}, timeout=30)


def consent(url: str, landing: str, operator: str, *, ai: str, space: str | None, decision: str = "approve") -> str:
    """As the operator: the landing page, the sign-in, the consent page, the decision. Answers
    where the browser is sent back (the client's redirect URI, with the answer)."""
    with httpx.Client(base_url=url, follow_redirects=False, timeout=30) as browser:
        assert browser.get(landing).status_code == 200
        signed = browser.post(landing, data={"token": operator})
        assert signed.status_code == 303, signed.text
        page = browser.get(signed.headers["location"])
        assert page.status_code == 200, page.text
        found = CSRF.search(page.text)
        assert found, page.text[:1000]
        form = {"csrf": found.group(1), "decision": decision, "ai": ai, "space": space or ""}
        decided = browser.post(signed.headers["location"], data=form)
        assert decided.status_code == 303, decided.text
        return decided.headers["location"]


def query_of(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def exchange(url: str, client_id: str, code: str, verifier: str | None, **extra: str) -> httpx.Response:
    form = {"grant_type": "authorization_code", "code": code, "client_id": client_id, "redirect_uri": CALLBACK}
    if verifier is not None:
        form["code_verifier"] = verifier
    return httpx.post(f"{url}/token", data={**form, **extra}, timeout=30)


def refresh(url: str, client_id: str, token: str) -> httpx.Response:
    form = {"grant_type": "refresh_token", "refresh_token": token, "client_id": client_id}
    return httpx.post(f"{url}/token", data=form, timeout=30)


@dataclass
class Connection:
    client_id: str
    access: str
    refresh: str
    code: str
    verifier: str


def approved_code(url: str, operator: str, *, ai: str = "claude-ai", space: str | None = "acme", resource: str = ""):
    """A registered client, an authorization, the operator's yes: (client id, code, verifier).
    ``resource``: what the authorization asks for ("": ``/mcp``'s, as a host does)."""
    client_id = register(url).json()["client_id"]
    verifier, challenge = pkce()
    started = authorize(url, client_id, challenge, resource=resource)
    assert started.status_code == 302, started.text
    back = consent(url, started.headers["location"], operator, ai=ai, space=space)
    answer = query_of(back)
    assert answer["state"] == "state-1"
    return client_id, answer["code"], verifier


def connect(
    url: str, operator: str, *, ai: str = "claude-ai", space: str | None = "acme", resource: str = ""
) -> Connection:
    client_id, code, verifier = approved_code(url, operator, ai=ai, space=space, resource=resource)
    issued = exchange(url, client_id, code, verifier, **({"resource": resource} if resource else {}))
    assert issued.status_code == 200, issued.text
    body = issued.json()
    return Connection(client_id, body["access_token"], body["refresh_token"], code, verifier)


def oauth_error(response: httpx.Response) -> str:
    body = response.json()
    assert "error" in body and isinstance(body["error"], str), body
    return body["error"]
