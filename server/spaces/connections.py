"""OAuth connections: the rows behind esfis's authorization server (``server.http.oauth``).

A *connection* is what an MCP host gets when the operator consents to it: an agent token of the
AI and the subtree the operator chose (never the ones the host asked for), bound to one resource
(RFC 8707), with a short life, and a refresh token to renew it. The connection is the token's
row: a refresh gives the same row a new secret and a new expiry, so the connection keeps one
standing run (``server.barrier.runs``) for as long as it lives, and what that run carries
cannot be shed by waiting for a refresh. Revoking the token (Settings › Tokens, ``esfis token
revoke``, RFC 7009) ends the connection: its refresh tokens stop with it.

What is kept, and how long:

- **clients**: registered ones (RFC 7591) and Client ID Metadata Documents read from their URL
  (``server.spaces.oauth_clients``);
- **requests** waiting for the operator's consent (``CONSENT_S``); once approved, a code that is
  good once, for ``CODE_S``, kept as its sha256. A code shown a second time revokes the token
  the first showing made (RFC 6749 §4.1.2);
- **refresh tokens**, as their sha256, rotated at each use: a used one shown again is a stolen
  one, and it ends the connection (the newest ``KEPT_USED_REFRESH`` used ones of a connection
  are kept to catch it).

Strangers reach the endpoints that write here, so their rows are bounded (``MAX_PENDING``
requests, at most ``MAX_PENDING_PER_ADDRESS`` of them from one address, so one stranger cannot
keep the operator's own host from asking; clients bounded by kind) and pruned (``prune``).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from server.catalog import Catalog
from server.clock import Clock, from_micros, system_clock, to_micros
from server.errors import InvalidInput, NotFound, TooManyRequests
from server.models import Token
from server.spaces.oauth_clients import ClientBook, StoredClient, prune_unused
from server.spaces.policies import validate_ai
from server.spaces.registry import Registry
from server.spaces.tokens import TokenBook, hash_token

CONSENT_S = 600  # a request waits this long for the operator
CODE_S = 60  # an approved request's code is good this long, once
ACCESS_S = 3600  # the default life of a connection's access token (ESFIS_OAUTH_TOKEN_S)
REFRESH_DAYS = 30  # a refresh token's life
MAX_PENDING = 1000  # requests waiting for consent, at most
MAX_PENDING_PER_ADDRESS = 20  # of them from one address (the peer, or a trusted proxy's forwarded one)
KEPT_USED_REFRESH = 32  # a connection's used refresh tokens kept to catch a replay: the newest ones
REFRESH_PREFIX = "esfisr_"  # never an access token: TokenBook.authenticate refuses it
REQUEST_ID_BYTES = 16


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Consent:
    """A request for a connection, as the operator's page shows it and the token endpoint
    checks it."""

    id: str
    client_id: str
    client_name: str
    redirect_uri: str
    redirect_explicit: bool
    code_challenge: str
    state: str | None
    scopes: tuple[str, ...]
    resource: str | None
    status: str  # pending | approved | denied | exchanged
    expires_at: datetime
    ai: str | None = None
    space: str | None = None

    @property
    def redirect_host(self) -> str:
        from urllib.parse import urlsplit

        return urlsplit(self.redirect_uri).netloc


@dataclass(frozen=True)
class Issued:
    """What the token endpoint hands over: secrets the catalog keeps only as hashes."""

    token: Token
    access: str
    refresh: str
    expires_in: int


@dataclass(frozen=True)
class Refresh:
    token_id: str
    client_id: str
    expires_at: datetime
    resource: str | None


class ConnectionBook:
    def __init__(self, catalog: Catalog, tokens: TokenBook, clock: Clock = system_clock, *, access_s: int = ACCESS_S):
        self.catalog = catalog
        self.tokens = tokens
        self.clock = clock
        self.access_s = access_s
        self.clients = ClientBook(catalog, clock)

    # -- clients (``server.spaces.oauth_clients``) -----------------------------------------

    def save_client(self, client_id: str, kind: str, info: dict[str, Any]) -> None:
        self.clients.save(client_id, kind, info)

    def client(self, client_id: str) -> StoredClient | None:
        return self.clients.get(client_id)

    def consented(self, client_id: str) -> bool:
        return self.clients.consented(client_id)

    # -- consent ----------------------------------------------------------------------------

    def ask(self, client_id: str, client_name: str, params: dict[str, Any], *, address: str) -> str:
        """A request that waits for the operator; its id is the consent page's address.
        ``TooManyRequests`` when ``MAX_PENDING`` wait, or ``MAX_PENDING_PER_ADDRESS`` from
        ``address`` (then ``retry_after``: when the first of them expires)."""
        now = self.clock()
        address = address[:200]
        request_id = secrets.token_urlsafe(REQUEST_ID_BYTES)
        with self.catalog.transaction() as tx:
            waiting = tx.one(
                "SELECT count(*) AS n, coalesce(sum(CASE WHEN address = ? THEN 1 ELSE 0 END), 0) AS mine, "
                "min(CASE WHEN address = ? THEN expires_at END) AS first_ends "
                "FROM oauth_requests WHERE status = 'pending' AND expires_at > ?",
                (address, address, to_micros(now)),
            )
            if waiting is not None and waiting["n"] >= MAX_PENDING:
                raise TooManyRequests("too many connections wait for the operator's consent: try later")
            if waiting is not None and waiting["mine"] >= MAX_PENDING_PER_ADDRESS:
                wait = max(1, -(-(waiting["first_ends"] - to_micros(now)) // 1_000_000))
                refusal = TooManyRequests(
                    f"{MAX_PENDING_PER_ADDRESS} connections from this address wait for the operator's consent "
                    f"already: ask the operator to answer them, or try again in {wait} s"
                )
                refusal.retry_after = wait
                raise refusal
            tx.execute(
                "INSERT INTO oauth_requests "
                "(id, client_id, client_name, params, status, created_at, expires_at, address) "
                "VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)",
                (
                    request_id,
                    client_id,
                    client_name,
                    json.dumps(params),
                    to_micros(now),
                    to_micros(now + timedelta(seconds=CONSENT_S)),
                    address,
                ),
            )
        return request_id

    def pending(self, request_id: str) -> Consent:
        """A request still waiting for the operator, else ``NotFound`` (decided, expired, unknown
        alike)."""
        row = self.catalog.one("SELECT * FROM oauth_requests WHERE id = ?", (request_id,))
        if row is None or row["status"] != "pending" or row["expires_at"] <= to_micros(self.clock()):
            raise NotFound("no connection waits at this address: it was decided, or it expired (ask the client again)")
        return _consent(row)

    def approve(self, request_id: str, *, ai: str, space: str | None, by: str) -> tuple[Consent, str]:
        """The operator's yes: the AI and the subtree are the operator's choice. Answers the
        request and its code (good once, for ``CODE_S``)."""
        validate_ai(ai)
        if space is not None:
            Registry(self.catalog, self.clock).require(space)
        code = secrets.token_urlsafe(32)
        now = self.clock()
        with self.catalog.transaction() as tx:
            done = tx.execute(
                "UPDATE oauth_requests SET status = 'approved', code_hash = ?, expires_at = ?, ai = ?, space = ?, "
                "decided_by = ? WHERE id = ? AND status = 'pending' AND expires_at > ?",
                (
                    digest(code),
                    to_micros(now + timedelta(seconds=CODE_S)),
                    ai,
                    space,
                    by,
                    request_id,
                    to_micros(now),
                ),
            )
            if done.rowcount != 1:
                raise NotFound("no connection waits at this address: it was decided, or it expired")
            row = tx.one("SELECT * FROM oauth_requests WHERE id = ?", (request_id,))
        assert row is not None
        return _consent(row), code

    def deny(self, request_id: str, *, by: str) -> Consent:
        consent = self.pending(request_id)
        with self.catalog.transaction() as tx:
            tx.execute(
                "UPDATE oauth_requests SET status = 'denied', decided_by = ? WHERE id = ? AND status = 'pending'",
                (by, request_id),
            )
        return consent

    # -- the token endpoint -----------------------------------------------------------------

    def code(self, code: str) -> Consent | None:
        """The approved request a code stands for, while it is good; a code already exchanged
        revokes the connection it made, and answers None like an unknown one."""
        if not isinstance(code, str) or len(code) > 256:
            return None
        row = self.catalog.one("SELECT * FROM oauth_requests WHERE code_hash = ?", (digest(code),))
        if row is None:
            return None
        if row["status"] == "exchanged":
            if row["token_id"] is not None:
                self.tokens.revoke(row["token_id"])
            return None
        if row["status"] != "approved" or row["expires_at"] <= to_micros(self.clock()):
            return None
        return _consent(row)

    def exchange(self, code: str, *, resource: str) -> Issued | None:
        """The connection a good code makes, once: None when it was used meanwhile."""
        consent = self.code(code)
        if consent is None or consent.ai is None:
            return None
        with self.catalog.transaction() as tx:
            done = tx.execute(
                "UPDATE oauth_requests SET status = 'exchanged' WHERE code_hash = ? AND status = 'approved'",
                (digest(code),),
            )
            if done.rowcount != 1:
                return None
        expires = self.clock() + timedelta(seconds=self.access_s)
        token, access = self.tokens.connect(
            ai=consent.ai,
            space=consent.space,
            client=consent.client_name,
            client_id=consent.client_id,
            resource=resource,
            expires_at=expires,
        )
        with self.catalog.transaction() as tx:
            tx.execute("UPDATE oauth_requests SET token_id = ? WHERE code_hash = ?", (token.id, digest(code)))
            refresh = self._refresh(tx, token.id, consent.client_id)
        return Issued(token, access, refresh, self.access_s)

    def refresh(self, secret: str) -> Refresh | None:
        """A refresh token that may be used, else None. One used before ends its connection."""
        if not isinstance(secret, str) or not secret.startswith(REFRESH_PREFIX) or len(secret) > 256:
            return None
        row = self.catalog.one(
            "SELECT r.*, t.revoked_at, t.resource FROM oauth_refresh r JOIN tokens t ON t.id = r.token_id "
            "WHERE r.hash = ?",
            (digest(secret),),
        )
        if row is None or row["revoked_at"] is not None:
            return None
        if row["used_at"] is not None:
            self.tokens.revoke(row["token_id"])  # a rotated token shown again: someone else holds one
            return None
        expires = from_micros(row["expires_at"])
        assert expires is not None
        if expires <= self.clock():
            return None
        return Refresh(row["token_id"], row["client_id"], expires, row["resource"])

    def rotate(self, secret: str) -> Issued | None:
        """A new access token and a new refresh token for the connection; the used one stops."""
        found = self.refresh(secret)
        if found is None:
            return None
        now = self.clock()
        with self.catalog.transaction() as tx:
            done = tx.execute(
                "UPDATE oauth_refresh SET used_at = ? WHERE hash = ? AND used_at IS NULL",
                (to_micros(now), digest(secret)),
            )
            if done.rowcount != 1:
                return None
            access = self.tokens.renew(tx, found.token_id, now + timedelta(seconds=self.access_s))
            if access is None:
                return None
            refresh = self._refresh(tx, found.token_id, found.client_id)
            # A connection that refreshes as fast as its limit allows would keep a used row per
            # refresh for thirty days: only the newest are kept (a replay is caught within
            # minutes, when the rightful holder next refreshes; an older one is merely unknown).
            tx.execute(
                "DELETE FROM oauth_refresh WHERE token_id = ? AND used_at IS NOT NULL AND hash NOT IN "
                "(SELECT hash FROM oauth_refresh WHERE token_id = ? AND used_at IS NOT NULL "
                "ORDER BY used_at DESC LIMIT ?)",
                (found.token_id, found.token_id, KEPT_USED_REFRESH),
            )
        return Issued(self.tokens.get(found.token_id), access, refresh, self.access_s)

    def revoke(self, secret: str, client_id: str) -> None:
        """RFC 7009: an access or a refresh token of ``client_id`` ends its connection; anything
        else is ignored, as the RFC asks."""
        if not isinstance(secret, str) or len(secret) > 256:
            return
        row = self.catalog.one(
            "SELECT id FROM tokens WHERE hash = ? AND client_id = ?", (hash_token(secret), client_id)
        )
        if row is None:
            row = self.catalog.one(
                "SELECT token_id AS id FROM oauth_refresh WHERE hash = ? AND client_id = ?", (digest(secret), client_id)
            )
        if row is not None:
            self.tokens.revoke(row["id"])

    def _refresh(self, tx, token_id: str, client_id: str) -> str:
        secret = REFRESH_PREFIX + secrets.token_urlsafe(32)
        now = self.clock()
        tx.execute(
            "INSERT INTO oauth_refresh (hash, token_id, client_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
            (digest(secret), token_id, client_id, to_micros(now), to_micros(now + timedelta(days=REFRESH_DAYS))),
        )
        return secret

    # -- upkeep -----------------------------------------------------------------------------

    def prune(self) -> int:
        """Requests past their time, refresh tokens that can no longer be used, and clients
        (registered or read from a document) with no connection and no request a day after they
        were first stored."""
        now = to_micros(self.clock())
        with self.catalog.transaction() as tx:
            gone = tx.execute("DELETE FROM oauth_requests WHERE expires_at <= ? AND status <> 'exchanged'", (now,))
            count = gone.rowcount
            tx.execute(
                "DELETE FROM oauth_requests WHERE status = 'exchanged' AND expires_at <= ?",
                (now - REFRESH_DAYS * 86_400 * 1_000_000,),
            )
            tx.execute(
                "DELETE FROM oauth_refresh WHERE expires_at <= ? OR token_id IN "
                "(SELECT id FROM tokens WHERE revoked_at IS NOT NULL)",
                (now,),
            )
            prune_unused(tx, now)
        return count


def _consent(row) -> Consent:
    params = json.loads(row["params"])
    expires = from_micros(row["expires_at"])
    assert expires is not None
    return Consent(
        id=row["id"],
        client_id=row["client_id"],
        client_name=row["client_name"],
        redirect_uri=params["redirect_uri"],
        redirect_explicit=bool(params.get("redirect_explicit", True)),
        code_challenge=params["code_challenge"],
        state=params.get("state"),
        scopes=tuple(params.get("scopes") or ()),
        resource=params.get("resource"),
        status=row["status"],
        expires_at=expires,
        ai=row["ai"],
        space=row["space"],
    )


def check_request_id(value: str) -> str:
    if (
        not isinstance(value, str)
        or not 10 <= len(value) <= 64
        or not value.replace("-", "").replace("_", "").isalnum()
    ):
        raise InvalidInput("malformed connection request id", field="request")
    return value
