"""Sessions of the operator's web page: signed, expiring cookies, and CSRF tokens bound to them.

A session cookie holds no token, in clear or otherwise: ``v1.PAYLOAD.MAC``, where PAYLOAD is
base64url JSON ``{"t": token id, "n": 128-bit nonce, "e": expiry in unix seconds}`` and MAC is
HMAC-SHA256 of ``scope + "\\n" + purpose + "\\n" + PAYLOAD`` under a 32-byte key kept in
``ESFIS_HOME`` (``web-session.key``, 0600, made on first use); the scope is the pages' secret
address segment (``server.web.site``), so a cookie is good at that address only. The cookie is
HttpOnly, SameSite=Strict, Path=/settings/SEGMENT (Secure over https; a ``__Host-`` cookie with
Path=/ behind an https ESFIS_PUBLIC_URL). Every request checks, in this order: the MAC (constant
time), the expiry, that this session was not signed out, and that its token is still an *active
operator* token, so a token revoked by any interface ends its sessions at the next request. A
session lasts ``SESSION_SECONDS`` from sign-in, whatever is done with it.

CSRF: every state-changing form carries ``HMAC("csrf\\n" + nonce)`` of its session; a POST whose
field is missing or wrong is refused, as is one whose ``Origin`` is another site or whose
``Sec-Fetch-Site`` says cross-site (and SameSite=Strict keeps the cookie off cross-site requests
anyway). The sign-in form, before any session, is bound the same way to a short-lived pre-session
cookie of its own. Sign-out forgets the cookie in the browser and records its nonce as ended in
the catalog until it would have expired, so it holds across restarts and across servers.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

# Named apart from the cookies of Path=/settings that earlier versions set: a browser would send
# both, and the older one would win.
SESSION_COOKIE = "esfis_settings_session"
SIGNIN_COOKIE = "esfis_settings_signin"
FLASH_COOKIE = "esfis_settings_flash"
SESSION_SECONDS = 12 * 3600
SIGNIN_SECONDS = 3600
KEY_NAME = "web-session"
_VERSION = "v1"


@dataclass(frozen=True)
class Session:
    token_id: str
    nonce: str
    expires: int  # unix seconds
    csrf: str


class Signer:
    """Signs and checks small JSON payloads, each for one purpose (session, signin, flash), all
    within one ``scope`` (the settings pages' address segment)."""

    def __init__(self, key: bytes, scope: str) -> None:
        self._key = key
        self._scope = scope

    def _mac(self, purpose: str, payload: str) -> str:
        message = f"{self._scope}\n{purpose}\n{payload}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return _b64(digest)

    def sign(self, purpose: str, data: dict) -> str:
        payload = _b64(json.dumps(data, separators=(",", ":"), sort_keys=True).encode())
        return f"{_VERSION}.{payload}.{self._mac(purpose, payload)}"

    def unsign(self, purpose: str, value: str | None) -> dict | None:
        """The payload if ``value`` was signed by this key for ``purpose``; else None."""
        if not value or len(value) > 4096:
            return None
        parts = value.split(".")
        if len(parts) != 3 or parts[0] != _VERSION:
            return None
        _, payload, mac = parts
        if not hmac.compare_digest(mac.encode(), self._mac(purpose, payload).encode()):
            return None
        try:
            data = json.loads(_unb64(payload))
        except (ValueError, binascii.Error):
            return None
        return data if isinstance(data, dict) else None

    # -- sessions ---------------------------------------------------------------------------

    def new_session(self, token_id: str, now: float) -> tuple[Session, str]:
        """A session for ``token_id`` and its cookie value."""
        nonce = secrets.token_hex(16)
        expires = int(now) + SESSION_SECONDS
        value = self.sign("session", {"t": token_id, "n": nonce, "e": expires})
        return Session(token_id, nonce, expires, self.csrf_for(nonce)), value

    def session(self, value: str | None, now: float) -> Session | None:
        """The session a cookie names, if it is genuine and unexpired (the token is checked by
        the caller)."""
        data = self.unsign("session", value)
        if data is None:
            return None
        token_id, nonce, expires = data.get("t"), data.get("n"), data.get("e")
        if not (isinstance(token_id, str) and isinstance(nonce, str) and isinstance(expires, int)):
            return None
        if expires <= now:
            return None
        return Session(token_id, nonce, expires, self.csrf_for(nonce))

    def csrf_for(self, nonce: str) -> str:
        return self._mac("csrf", nonce)

    def csrf_ok(self, nonce: str, given: str | None) -> bool:
        return isinstance(given, str) and hmac.compare_digest(given.encode(), self.csrf_for(nonce).encode())

    # -- the sign-in form, before a session ---------------------------------------------------

    def new_signin(self, now: float) -> tuple[str, str]:
        """A pre-session cookie value and the CSRF field of the sign-in form bound to it."""
        nonce = secrets.token_hex(16)
        value = self.sign("signin", {"n": nonce, "e": int(now) + SIGNIN_SECONDS})
        return value, self._mac("signin-csrf", nonce)

    def signin_ok(self, value: str | None, given: str | None, now: float) -> bool:
        data = self.unsign("signin", value)
        if data is None or not isinstance(data.get("n"), str) or not isinstance(data.get("e"), int):
            return False
        if data["e"] <= now or not isinstance(given, str):
            return False
        return hmac.compare_digest(given.encode(), self._mac("signin-csrf", data["n"]).encode())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
