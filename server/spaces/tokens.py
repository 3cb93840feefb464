"""HTTP bearer tokens: made by ``esfis token create``, stored hashed, checked on every request.

A token is ``esfis_`` followed by 43 characters of URL-safe base64 (256 random bits). Only its
sha256 is stored: the secret is printed once and never again. With that much entropy a plain
sha256 is enough (no salt or slow hash is needed: nobody can guess a preimage), and the lookup is
by hash, then confirmed with ``hmac.compare_digest``.

Each token acts either as one AI (optionally only inside one space's subtree) or as the operator.
An AI token is an *agent* token (its requests form its standing run, ``server.barrier.runs``), a *run*
token opened by ``open_run`` (one run, expiring; it can do what an agent does and nothing more),
or a *runs-only* token, a harness's credential that opens run tokens and does nothing else. A
run token stops with the token that opened it. Removing a space revokes the tokens confined to
it (``Registry.delete``): such a token is never widened to the spaces left below it, nor handed
to a new space of the same name. A long-lived service keeps a token's row under the catalog's
access generation (``server.catalog.access``), which its revocation moves: a token the CLI
revokes is refused on every server's next request. An unknown secret is never kept.

``authenticate`` answers every failure alike (missing, malformed, unknown, revoked, a near-miss
of a real token, another scheme): one ``Unauthorized`` with one message, so a caller learns
nothing from the difference.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime, timedelta

from server.catalog import Catalog
from server.catalog.access import AccessCache
from server.clock import Clock, from_micros, parse_time, system_clock, to_micros
from server.errors import (
    UNAUTHORIZED_MESSAGE,
    Forbidden,
    InvalidInput,
    NotFound,
    SpaceNotFound,
    TooManyRequests,
    Unauthorized,
)
from server.inputs import MAX_RUN_TTL, RUN_TTL  # a run token's life: default and bound, as interfaces state them
from server.models import Token
from server.records import standing_run
from server.spaces import contains, validate_space_name
from server.spaces.policies import validate_ai
from server.spaces.registry import Registry

PREFIX = "esfis_"
TOKEN = re.compile(r"esfis_[A-Za-z0-9_-]{43}")
TOKEN_ID = re.compile(r"tok_[a-z0-9]{12}")
# Live run tokens one token (or OAuth connection) may hold at once: a harness opens one a
# session, and sessions end; an agent minting them to fill the tokens table meets this first.
MAX_LIVE_RUNS = 1000


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class TokenBook:
    def __init__(self, catalog: Catalog, clock: Clock = system_clock, access: AccessCache | None = None) -> None:
        self.catalog = catalog
        self.clock = clock
        self.access = access

    def create(
        self,
        *,
        ai: str | None = None,
        space: str | None = None,
        operator: bool = False,
        runs_only: bool = False,
        approvals: str = "queue",
    ) -> tuple[Token, str]:
        """A new token and its secret (the only time the secret exists outside the caller).
        ``approvals="host"`` (an agent token only): its MCP host's prompts count as a person's."""
        if operator == (ai is not None):
            raise InvalidInput("a token acts either as one AI or as the operator (exactly one)", field="ai")
        if ai is not None:
            validate_ai(ai)
        if space is not None:
            if operator:
                raise InvalidInput("space applies to AI tokens only", field="space")
            Registry(self.catalog, self.clock).require(space)  # a clear error, early
        if runs_only and operator:
            raise InvalidInput("runs only applies to AI tokens only", field="runs_only")
        if approvals not in ("queue", "host"):
            raise InvalidInput("approvals must be queue or host", field="approvals")
        if approvals == "host" and (operator or runs_only):
            raise InvalidInput(
                "approvals host applies to agent tokens only (never to operator, runs-only or run tokens)",
                field="approvals",
            )
        token = Token(
            id=new_token_id(),
            ai=ai,
            space=space,
            operator=operator,
            created_at=self.clock(),
            runs_only=runs_only,
            approvals="host" if approvals == "host" else "queue",
        )
        return token, self._insert(token)

    def open_run(self, opener: Token, *, space: str | None = None, ttl: str | int | None = None) -> tuple[Token, str]:
        """A run token for ``opener``'s AI: its own run, in the opener's scope or a narrower one
        (``space``), expiring after ``ttl`` (default 12 h, at most 7 days) or with the opener,
        whichever comes first, and good for the opener's resource only (an OAuth connection's):
        no credential outlives, or reaches further than, the one that minted it. Opened with an
        agent token, the run shares what that token's standing run carries (``server.barrier.runs``)."""
        if opener.kind not in ("agent", "runs"):
            raise Forbidden("only an agent token or a runs-only token opens runs (a run token cannot)")
        now = self.clock()
        expires = now + _ttl(ttl, now)
        if opener.expires_at is not None:
            expires = min(expires, opener.expires_at)
        if space is not None:
            validate_space_name(space)
            if opener.space is not None and not contains(opener.space, space):
                raise Forbidden(f"this token acts only inside space {opener.space!r}")
            Registry(self.catalog, self.clock).require(space)
        scope = space if space is not None else opener.space
        parent_run = standing_run(opener)[0] if opener.kind == "agent" else None
        token = Token(
            id=new_token_id(),
            ai=opener.ai,
            space=scope,
            operator=False,
            created_at=now,
            run_id="run_" + secrets.token_hex(12),
            parent=opener.id,
            parent_run=parent_run,
            expires_at=expires,
            resource=opener.resource,
        )
        return token, self._insert(token)

    def connect(self, *, ai: str, space: str | None, client: str, client_id: str, resource: str, expires_at: datetime):
        """An OAuth connection's token (``server.spaces.connections``): an agent token of ``ai``
        in ``space``'s subtree (None: everywhere), for ``resource`` only, expiring at ``expires_at``;
        each refresh gives it a new secret (``renew``), so its standing run stays one run."""
        validate_ai(ai)
        if space is not None:
            Registry(self.catalog, self.clock).require(space)
        token = Token(
            id=new_token_id(),
            ai=ai,
            space=space,
            operator=False,
            created_at=self.clock(),
            expires_at=expires_at,
            client=client,
            client_id=client_id,
            resource=resource,
        )
        return token, self._insert(token)

    def renew(self, tx, token_id: str, expires_at: datetime) -> str | None:
        """A new secret for a connection's token, in ``tx``; the old one stops at once. None: the
        token was revoked."""
        secret = PREFIX + secrets.token_urlsafe(32)
        done = tx.execute(
            "UPDATE tokens SET hash = ?, expires_at = ? WHERE id = ? AND revoked_at IS NULL AND client_id IS NOT NULL",
            (hash_token(secret), to_micros(expires_at), token_id),
        )
        return secret if done.rowcount == 1 else None

    def _room_for_a_run(self, tx, parent: str) -> None:
        """Refuse a run token past ``MAX_LIVE_RUNS`` live ones of the same opener; the answer
        says when the first of them expires (or to revoke some)."""
        now = to_micros(self.clock())
        row = tx.one(
            "SELECT count(*) AS n, min(expires_at) AS first FROM tokens "
            "WHERE parent = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)",
            (parent, now),
        )
        if int(row["n"]) >= MAX_LIVE_RUNS:
            wait = max(1, (int(row["first"] or now) - now) // 1_000_000 + 1)
            refused = TooManyRequests(
                f"this token holds {MAX_LIVE_RUNS} live run tokens already: revoke some "
                "(esfis token revoke) or wait for the first to expire"
            )
            refused.retry_after = int(wait)
            raise refused

    def _insert(self, token: Token) -> str:
        secret = PREFIX + secrets.token_urlsafe(32)
        with self.catalog.transaction() as tx:
            # Again in the transaction: a space removed meanwhile would leave a token confined
            # to nothing, which a new space of that name must never inherit.
            if token.space is not None and tx.one("SELECT 1 FROM spaces WHERE name = ?", (token.space,)) is None:
                raise SpaceNotFound(f"no space named {token.space!r} (esfis space list shows them)")
            if token.parent is not None:
                self._room_for_a_run(tx, token.parent)
            tx.execute(
                "INSERT INTO tokens (id, hash, ai, space, operator, created_at, runs_only, run_id, parent, parent_run, "
                "expires_at, approvals, client, client_id, resource) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    token.id,
                    hash_token(secret),
                    token.ai,
                    token.space,
                    int(token.operator),
                    to_micros(token.created_at),
                    int(token.runs_only),
                    token.run_id,
                    token.parent,
                    token.parent_run,
                    None if token.expires_at is None else to_micros(token.expires_at),
                    token.approvals,
                    token.client,
                    token.client_id,
                    token.resource,
                ),
            )
        return secret

    def list(self, *, run_tokens: bool = False) -> list[Token]:
        """Every token; run tokens (one per agent session) only when asked: ``runs`` lists them."""
        where = "" if run_tokens else " WHERE run_id IS NULL"
        rows = self.catalog.all(f"SELECT * FROM tokens{where} ORDER BY created_at, id")
        return [_token(r) for r in rows]

    def get(self, token_id: str) -> Token:
        row = self.catalog.one("SELECT * FROM tokens WHERE id = ?", (token_id,))
        if row is None:
            raise NotFound(f"no token {token_id} (esfis token list shows them)")
        return _token(row)

    def revoke(self, token_id: str) -> Token:
        if not isinstance(token_id, str) or not TOKEN_ID.fullmatch(token_id):
            raise InvalidInput(
                f"malformed token id {str(token_id)[:40]!r}: ids look like tok_ and 12 of [a-z0-9]", field="id"
            )
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

        def load():
            # One read: the token, and for a run token whether the token that opened it still stands.
            return self.catalog.one(
                "SELECT t.*, p.revoked_at AS parent_revoked FROM tokens t LEFT JOIN tokens p ON p.id = t.parent "
                "WHERE t.hash = ?",
                (digest,),
            )

        row = load() if self.access is None else self.access.get(("token", digest), load, keep_none=False)
        if row is None or not hmac.compare_digest(row["hash"], digest) or row["revoked_at"] is not None:
            raise Unauthorized(UNAUTHORIZED_MESSAGE)
        if row["parent"] is not None and row["parent_revoked"] is not None:
            raise Unauthorized(UNAUTHORIZED_MESSAGE)
        if row["expires_at"] is not None and row["expires_at"] <= to_micros(self.clock()):
            raise Unauthorized(UNAUTHORIZED_MESSAGE)
        return _token(row)

    # -- the operator's web sessions, signed out ------------------------------------------------

    def end_session(self, nonce: str, expires: int) -> None:
        """A signed-out web session's nonce, kept until the session would have expired: every
        server refuses its cookie from now on (``server.web.session``)."""
        with self.catalog.transaction() as tx:
            tx.execute(
                "INSERT INTO ended_sessions (nonce, expires) VALUES (?, ?) ON CONFLICT DO NOTHING", (nonce, expires)
            )

    def session_ended(self, nonce: str) -> bool:
        return self.catalog.one("SELECT 1 FROM ended_sessions WHERE nonce = ?", (nonce,)) is not None


def new_token_id() -> str:
    return "tok_" + secrets.token_hex(6)


def _ttl(value: str | int | None, now: datetime) -> timedelta:
    """A run token's life: seconds, or a duration such as 30m, 12h, 7d; at most ``MAX_RUN_TTL``."""
    rule = "ttl must be a number of seconds or a duration such as 30m, 12h, 7d, of at most 7 days"
    if value is None:
        return RUN_TTL
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidInput(rule, field="ttl")
    if isinstance(value, int):
        if not 0 < value <= MAX_RUN_TTL.total_seconds():
            raise InvalidInput(rule, field="ttl")
        return timedelta(seconds=value)
    if not _DURATION.fullmatch(value.strip()):
        raise InvalidInput(rule, field="ttl")
    life = parse_time(value, now=now, field="ttl") - now
    if not timedelta(0) < life <= MAX_RUN_TTL:
        raise InvalidInput(rule, field="ttl")
    return life


_DURATION = re.compile(r"[0-9]{1,6}[mhdw]")


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
        runs_only=bool(row["runs_only"]),
        run_id=row["run_id"],
        parent=row["parent"],
        parent_run=row["parent_run"],
        expires_at=from_micros(row["expires_at"]),
        standing=int(row["standing"]),
        approvals="host" if row["approvals"] == "host" else "queue",
        client=row["client"],
        client_id=row["client_id"],
        resource=row["resource"],
    )
