"""Who may sign in to the settings pages: an active operator token, its session's signing key
(and the pages' secret address, ``server.web.site``), and the first operator token of a fresh
home. Calls on the façade's operator, nothing more.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from fastapi import Request

from server.errors import Forbidden, InvalidInput, StoreUnavailable, Unauthorized
from server.facade import Esfis, Operator, Token


def operator_sign_in(service: Esfis, secret: str) -> Token:
    """The active operator token with this secret; ``Unauthorized`` for any bad token (one
    answer for all), ``Forbidden`` for an AI token."""
    token = service.authenticate("Bearer " + secret)
    if not token.operator:
        raise Forbidden("this is an AI token: only an operator token signs in (esfis token create --operator)")
    return token


def counted_sign_in(request: Request, secret: str) -> Token:
    """``operator_sign_in``, within the sign-in limit of the request's address
    (``server.http.rate_limits``): a failure counts, and once the failures are spent every
    attempt waits for the window, the right token too (``TooManyRequests``)."""
    limiter = getattr(request.app.state, "limiter", None)
    address = request.client.host if request.client else "unknown"
    if limiter is not None:
        limiter.test("sign_in", address)
    try:
        return operator_sign_in(request.app.state.service, secret)
    except (Unauthorized, Forbidden):
        if limiter is not None:
            limiter.hit("sign_in", address)
        raise


def active_operator_token(operator: Operator, token_id: str) -> Token | None:
    """The operator token with this id while it is active; None once revoked (or never)."""
    found = [t for t in operator.tokens() if t.id == token_id]
    return found[0] if found and found[0].operator and found[0].active else None


def first_operator_token(operator: Operator) -> str | None:
    """A first operator token's secret when this home has no active one (a fresh install),
    else None: how a person who never used the CLI signs in to the web page."""
    if any(t.operator and t.active for t in operator.tokens()):
        return None
    return operator.create_token(operator=True)[1]


def private_key(home: Path, name: str, *, size: int = 32) -> bytes:
    """A random key of ``size`` bytes kept in ``ESFIS_HOME/NAME.key`` (0600, in hex), made on
    first use: the web sessions are signed with one, the settings pages' address holds another.
    Deleting the file ends every session signed with it (or moves the pages)."""
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,31}", name):
        raise InvalidInput(f"invalid key name {name[:40]!r}", field="name")
    path = home / f"{name}.key"
    if not path.exists():
        # Written whole under a temporary name, then linked: a process racing this one
        # either wins the link or reads the winner's complete key.
        temporary = path.with_name(f".{name}.{secrets.token_hex(6)}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(size) + "\n")
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            temporary.unlink()
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)
    try:
        key = bytes.fromhex(path.read_text().strip())
    except ValueError:
        key = b""
    if len(key) != size:
        raise StoreUnavailable(f"{path} does not hold a {size}-byte key in hex: delete it to make a new one")
    return key
