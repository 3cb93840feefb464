"""HTTP bearer tokens: made by ``esfis token create``, stored hashed, checked on every request.

A token is ``esfis_`` followed by 43 characters of URL-safe base64 (256 random bits). Only its
sha256 is stored: the secret is printed once and never again. With that much entropy a plain
sha256 is enough (no salt or slow hash is needed: nobody can guess a preimage), and the lookup is
by hash, then confirmed with ``hmac.compare_digest``.

Each token acts either as one AI (optionally only inside one space's subtree) or as the operator.
Removing a space revokes the tokens confined to it (``Registry.delete``): such a token is never
widened to the spaces left below it, nor handed to a new space of the same name.
Nothing is cached: a token the CLI revokes is refused on the server's next request.

``authenticate`` answers every failure alike (missing, malformed, unknown, revoked, a near-miss
of a real token, another scheme): one ``Unauthorized`` with one message, so a caller learns
nothing from the difference.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from server.catalog import Catalog
from server.clock import Clock, from_micros, system_clock, to_micros
from server.errors import InvalidInput, NotFound, SpaceNotFound, Unauthorized
from server.models import Token
from server.policies import validate_ai
from server.registry import Registry

PREFIX = "esfis_"
TOKEN = re.compile(r"esfis_[A-Za-z0-9_-]{43}")
TOKEN_ID = re.compile(r"tok_[a-z0-9]{12}")
UNAUTHORIZED_MESSAGE = "a valid bearer token is required (esfis token create)"


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class TokenBook:
    def __init__(self, catalog: Catalog, clock: Clock = system_clock) -> None:
        self.catalog = catalog
        self.clock = clock

    def create(self, *, ai: str | None = None, space: str | None = None, operator: bool = False) -> tuple[Token, str]:
        """A new token and its secret (the only time the secret exists outside the caller)."""
        if operator == (ai is not None):
            raise InvalidInput("a token acts either as one AI (--ai) or as the operator (--operator)", field="ai")
        if ai is not None:
            validate_ai(ai)
        if space is not None:
            if operator:
                raise InvalidInput("--space applies to AI tokens only", field="space")
            Registry(self.catalog, self.clock).require(space)  # a clear error, early
        secret = PREFIX + secrets.token_urlsafe(32)
        token = Token(
            id="tok_" + secrets.token_hex(6),
            ai=ai,
            space=space,
            operator=operator,
            created_at=self.clock(),
        )
        with self.catalog.transaction() as tx:
            # Again in the transaction: a space removed meanwhile would leave a token confined
            # to nothing, which a new space of that name must never inherit.
            if space is not None and tx.one("SELECT 1 FROM spaces WHERE name = ?", (space,)) is None:
                raise SpaceNotFound(f"no space named {space!r} (esfis space list shows them)")
            tx.execute(
                "INSERT INTO tokens (id, hash, ai, space, operator, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (token.id, hash_token(secret), ai, space, int(operator), to_micros(token.created_at)),
            )
        return token, secret

    def list(self) -> list[Token]:
        rows = self.catalog.all("SELECT * FROM tokens ORDER BY created_at, id")
        return [_token(r) for r in rows]

    def revoke(self, token_id: str) -> Token:
        if not isinstance(token_id, str) or not TOKEN_ID.fullmatch(token_id):
            raise InvalidInput(f"malformed token id {str(token_id)[:40]!r}: ids look like tok_ and 12 of [a-z0-9]", field="id")
        with self.catalog.transaction() as tx:
            tx.execute(
                "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (to_micros(self.clock()), token_id),
            )
            row = tx.one("SELECT * FROM tokens WHERE id = ?", (token_id,))
        if row is None:
            raise NotFound(f"no token {token_id} (esfis token list shows them)")
        return _token(row)

    def authenticate(self, authorization: str | None) -> Token:
        """The active token named by an ``Authorization`` header value, else ``Unauthorized``.

        The scheme is matched case-insensitively (RFC 9110 §11.1); the token itself exactly:
        one space after ``Bearer``, nothing before or after it.
        """
        if authorization is None:
            raise Unauthorized(UNAUTHORIZED_MESSAGE)
        scheme, sep, secret = authorization.partition(" ")
        if not sep or scheme.lower() != "bearer" or not TOKEN.fullmatch(secret):
            raise Unauthorized(UNAUTHORIZED_MESSAGE)
        digest = hash_token(secret)
        row = self.catalog.one("SELECT * FROM tokens WHERE hash = ?", (digest,))
        if row is None or not hmac.compare_digest(row["hash"], digest) or row["revoked_at"] is not None:
            raise Unauthorized(UNAUTHORIZED_MESSAGE)
        return _token(row)


def _token(row) -> Token:
    created = from_micros(row["created_at"])
    assert created is not None
    return Token(
        id=row["id"],
        ai=row["ai"],
        space=row["space"],
        operator=bool(row["operator"]),
        created_at=created,
        revoked_at=from_micros(row["revoked_at"]),
    )
