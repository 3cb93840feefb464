"""The gate every request passes, before routing: its framing, then (under ``/v1``) the bearer
token, then the body limit.

Framing first, for every path: a request that gives ``Authorization``, ``Cookie`` or
``X-Esfis-Run`` twice is refused with 400, since two layers reading the first and the last of
them would each believe a different caller. ``X-Esfis-Run`` itself is refused: a caller never
names its own run (the token is the run, ``server.barrier.runs``; a harness opens run tokens with
``POST /v1/runs``).

Authentication runs first and answers every failure with one identical 401, so an
unauthenticated caller learns nothing else (not whether a route exists, nor whether its body
was valid). Then the body limit: ``Content-Length`` over the limit is refused at once, and a
body without one is counted as it arrives. JSON endpoints take at most ``BODY_LIMIT``; the
import endpoint streams and takes up to ``IMPORT_BODY_LIMIT``.

The token is looked up on every request (no cache), off the event loop: a token the CLI revokes
is refused on the next request. The lookup has threads of its own (``AUTH_THREADS``), so routes
that fill the shared pool never stop a request from being authenticated and answered.

**A spent window, refused on the loop.** A token or an address this worker saw spend its rate
window is refused with 429 and ``Retry-After`` on the event loop, before the thread hop, the
lookup and the body (``Limiter.refused_in_memory``), so a hammering caller costs a dict read,
not a thread and a parse that the others' requests wait behind. A token is known there by its
secret's sha256 (as the tokens table keeps it), mapped to its id, whose counter key the limiter
remembers; the secret itself is never kept. A token revoked inside its spent window is refused
with 429 until the window ends, then with 401.

**A share per token.** A token has at most ``TOKEN_CALLS`` requests in flight in one worker
(a stream an MCP session keeps open, ``GET /mcp``, is not counted); another answers 429 with
``Retry-After`` at once. So no one agent, however many calls it opens, holds the threads the
others need.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Annotated, TypeVar

import anyio
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from server.errors import (
    UNAUTHORIZED_MESSAGE,
    EsfisError,
    Forbidden,
    TooManyRequests,
    Unauthorized,
)
from server.facade import Esfis, one_request
from server.faults import fault_of
from server.http.bodies import (
    IMPORT_PATH,
    MCP_PATH,
    asks_to_forget,
    body_limit,
    counting,
    framing_refusal,
    read_body,
    replay,
    too_large,
)
from server.http.errors import error_response, from_esfis
from server.http.oauth.address import OAuthSite
from server.http.rate_limits import Limiter
from server.models import Token

T = TypeVar("T")
AUTH_THREADS = 8  # threads for token lookups, apart from the routes' pool
TOKEN_CALLS = 32  # requests in flight per token and worker, beyond which it answers 429
SPENT_BEARERS = 10_000  # spent tokens a worker knows by their secret's digest, before it drops the done ones
METRICS_PATH = "/metrics"  # the operator's scrape (server.http.metrics): counted per address
RUNS_PATH = "/v1/runs"  # POST opens a run token: a limit of its own
OAUTH_PATHS = ("/register", "/authorize", "/token", "/revoke")  # open to anyone: per address
TOKEN_KEY = "esfis.token"

# Declared for OpenAPI (/docs "Authorize", schemathesis); the gate does the checking.
bearer = HTTPBearer(auto_error=False, description="a token from `esfis token create`")


class Gate:
    """Pure ASGI middleware: token, then body limit, for every ``/v1`` request."""

    def __init__(
        self,
        app: ASGIApp,
        service: Callable[[], Esfis],
        *,
        site: Callable[[], OAuthSite | None] = lambda: None,
        limiter: Callable[[], Limiter | None] = lambda: None,
        token_calls: int = TOKEN_CALLS,
    ) -> None:
        self.app = app
        self.service = service
        self.site = site  # the OAuth authorization server's address, when it is on
        self.limiter = limiter  # the rate limits (server.http.rate_limits), shared by every worker
        self.token_calls = token_calls
        self._in_flight: dict[str, int] = {}
        self._spent_bearers: dict[str, str] = {}  # a spent token's secret's sha256 → its id
        self._spent_lock = threading.Lock()  # learnt on the gate's threads
        self._auth_threads: anyio.CapacityLimiter | None = None  # made on the event loop, at first use

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        headers = [(k.lower(), v) for k, v in scope["headers"]]
        refusal = framing_refusal(headers)
        if refusal is not None:
            await from_esfis(refusal)(scope, receive, send)
            return
        if path in OAUTH_PATHS:
            try:
                await self._counted("oauth", _address(scope))
            except TooManyRequests as exc:
                body = {"error": "temporarily_unavailable", "error_description": exc.message}
                headers_out = {"Retry-After": str(exc.retry_after), "Cache-Control": "no-store"}
                headers_out["Connection"] = "close"  # as every 429 (server.http.errors)
                await JSONResponse(body, status_code=429, headers=headers_out)(scope, receive, send)
                return
            except EsfisError as exc:  # the count's own fault (a full disk, a catalog away)
                body = {"error": "temporarily_unavailable", "error_description": exc.message}
                await JSONResponse(body, status_code=503, headers={"Retry-After": str(exc.retry_after or 1)})(
                    scope, receive, send
                )
                return
        elif path == METRICS_PATH:
            # A token is looked up here too (the operator's), so a stranger's scrapes count
            # against its address as its /v1 requests do.
            try:
                await self._counted("address", _address(scope))
            except EsfisError as exc:
                await from_esfis(exc)(scope, receive, send)
                return
        elif path == "/v1" or path.startswith("/v1/") or path == MCP_PATH:
            # One reading of the access generation for the whole request (server.catalog.access).
            with one_request():
                await self._guarded(scope, receive, send, path, headers)
            return
        await self._pass(scope, receive, send, path, headers)

    async def _guarded(
        self, scope: Scope, receive: Receive, send: Send, path: str, headers: list[tuple[bytes, bytes]]
    ) -> None:
        """A ``/v1`` or ``/mcp`` request: its token, its bounds, its share of calls in flight."""
        try:
            address = _address(scope)
            self._refuse_spent(headers, address)  # on the loop: no thread, no lookup, no body
            opening_run = path == RUNS_PATH and scope["method"] == "POST"
            token = await self._authenticate(headers, address, opening_run)
            self._bound(token, path)
        except Unauthorized as exc:
            await self._unauthorized(exc, path)(scope, receive, send)
            return
        except EsfisError as exc:
            await from_esfis(exc)(scope, receive, send)
            return
        scope[TOKEN_KEY] = token
        if self._in_flight.get(token.id, 0) >= self.token_calls:
            busy = TooManyRequests(
                f"this token has {self.token_calls} requests in flight already: wait for one to finish"
            )
            await from_esfis(busy)(scope, receive, send)
            return
        self._in_flight[token.id] = self._in_flight.get(token.id, 0) + 1
        try:
            await self._pass(scope, receive, send, path, headers)
        finally:
            left = self._in_flight[token.id] - 1
            if left:
                self._in_flight[token.id] = left
            else:
                del self._in_flight[token.id]

    async def _pass(
        self, scope: Scope, receive: Receive, send: Send, path: str, headers: list[tuple[bytes, bytes]]
    ) -> None:
        limit = body_limit(path)
        lengths = [v for k, v in headers if k == b"content-length"]
        if lengths and (not lengths[0].isdigit() or int(lengths[0]) > limit):
            await from_esfis(too_large(limit))(scope, receive, send)
            return
        if path == IMPORT_PATH:
            await self.app(scope, counting(receive, limit), send)
            return
        # JSON bodies are small: read the whole body here, so an overflow answers 413 in the
        # one shape before any route runs, then replay it.
        try:
            body = await read_body(receive, limit)
            token: Token | None = scope.get(TOKEN_KEY)
            if token is not None and asks_to_forget(scope["method"], path, body):
                await self._in_threads(lambda: self._hit("forgets", token.id))
        except EsfisError as exc:
            await from_esfis(exc)(scope, receive, send)
            return
        await self.app(scope, replay(body, receive), send)

    def _bound(self, token: Token, path: str) -> None:
        """An OAuth connection's token is good for the one resource it was issued for (RFC
        8707): ``/mcp``'s, or the server's (the agent routes), and nowhere with OAuth off."""
        if token.resource is None:
            return
        site = self.site()
        if site is None or not site.on or token.resource != site.resource_for(path):
            raise Unauthorized(UNAUTHORIZED_MESSAGE)

    def _unauthorized(self, exc: Unauthorized, path: str) -> Response:
        """One 401 for every failure; with OAuth on, it says where to get a token (RFC 9728 §5.1)."""
        site = self.site()
        challenge = "Bearer"
        if site is not None and site.on:  # the same for every failure: no error code tells them apart
            challenge = f'Bearer resource_metadata="{site.metadata_url(path)}"'
        return error_response(exc.status, exc.code, exc.message, {"WWW-Authenticate": challenge})

    async def _authenticate(self, headers: list[tuple[bytes, bytes]], address: str, opening_run: bool) -> Token:
        """The request's token, within the rate limits: its address's (a bad token's too, so a
        flood of bad tokens is counted), its token's, and for ``POST /v1/runs`` the runs', in one
        catalog statement for a good token. One trip to the gate's own threads."""
        values = [v for k, v in headers if k == b"authorization"]
        value = values[0].decode("latin-1") if len(values) == 1 else None  # two headers: as bad as none

        def checked() -> Token:
            try:
                token = self.service().authenticate(value)
            except Unauthorized:
                self._hit("address", address)  # a bad token counts against its address all the same
                raise
            # The address's and the token's counts in one catalog write (two on every request before).
            hits = [("address", address), ("token", token.id)] + ([("runs", token.id)] if opening_run else [])
            limiter = self.limiter()
            if limiter is not None:
                try:
                    limiter.hit_all(hits)
                except TooManyRequests:
                    if limiter.refused_in_memory("token", token.id) is not None:
                        self._learn_spent(value, token.id)
                    raise
            return token

        return await self._in_threads(checked)

    def _refuse_spent(self, headers: list[tuple[bytes, bytes]], address: str) -> None:
        """``TooManyRequests`` when this worker saw the request's address, or its token, spend
        its window: cheap enough for the event loop (a dict read or two, a sha256 of the
        secret only while some token is spent)."""
        limiter = self.limiter()
        if limiter is None:
            return
        refusal = limiter.refused_in_memory("address", address)
        if refusal is None and self._spent_bearers:
            values = [v for k, v in headers if k == b"authorization"]
            digest = _bearer_digest(values[0].decode("latin-1")) if len(values) == 1 else None
            token_id = self._spent_bearers.get(digest) if digest is not None else None
            if digest is not None and token_id is not None:
                refusal = limiter.refused_in_memory("token", token_id)
                if refusal is None:  # its window is over: a fresh count from now on
                    self._spent_bearers.pop(digest, None)
        if refusal is not None:
            raise refusal

    def _learn_spent(self, authorization: str | None, token_id: str) -> None:
        digest = _bearer_digest(authorization) if authorization is not None else None
        if digest is None:
            return
        with self._spent_lock:
            if len(self._spent_bearers) >= SPENT_BEARERS:
                limiter = self.limiter()
                self._spent_bearers = {
                    d: t
                    for d, t in self._spent_bearers.items()
                    if limiter is not None and limiter.refused_in_memory("token", t) is not None
                }
            self._spent_bearers[digest] = token_id

    async def _counted(self, limit: str, who: str) -> None:
        """One hit of ``who`` under ``limit``: refused from memory on the loop, else counted on
        the gate's threads."""
        limiter = self.limiter()
        if limiter is None:
            return
        refusal = limiter.refused_in_memory(limit, who)
        if refusal is not None:
            raise refusal
        await self._in_threads(lambda: limiter.hit(limit, who))

    def _hit(self, limit: str, who: str) -> None:
        limiter = self.limiter()
        if limiter is not None:
            limiter.hit(limit, who)

    async def _in_threads(self, call: Callable[[], T]) -> T:
        if self._auth_threads is None:
            self._auth_threads = anyio.CapacityLimiter(AUTH_THREADS)
        return await anyio.to_thread.run_sync(lambda: _said(call), limiter=self._auth_threads)


def _said(call: Callable[[], T]) -> T:
    """``call``, its faults of the disk or the catalog raised as esfis errors (``server.faults``):
    the gate answers those as it answers its own refusals (a rate count on a full disk was a
    500, and a request left without an answer)."""
    try:
        return call()
    except EsfisError:
        raise
    except Exception as exc:
        fault = fault_of(exc)
        if fault is None:
            raise
        raise fault from exc


def _bearer_digest(authorization: str) -> str | None:
    """The sha256 of a ``Bearer`` header's secret (the tokens table's own hash of it), else None."""
    scheme, sep, secret = authorization.partition(" ")
    if not sep or scheme.lower() != "bearer" or not secret:
        return None
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _address(scope: Scope) -> str:
    """Whom a per-address limit counts: the peer (a trusted proxy's forwarded address, as
    uvicorn sets it)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


# -- dependencies ---------------------------------------------------------------------------


def service_of(request: Request) -> Esfis:
    """The process's one service, opened at start-up."""
    return request.app.state.service


def _token(request: Request) -> Token:
    token = request.scope.get(TOKEN_KEY)
    if not isinstance(token, Token):  # the gate guards every /v1 route; this is a safety net
        return request.app.state.service.authenticate(None)  # refuses a missing token without a lookup
    return token


# async, though they do no I/O: a plain def dependency costs a trip to the thread pool per request.
async def agent_token(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Token:
    """An agent token or a run token: what acts as an AI."""
    token = _token(request)
    if token.kind == "runs":
        raise Forbidden("this token only opens runs (POST /v1/runs): act with the run token it opens")
    if token.operator or token.ai is None:
        raise Forbidden("this endpoint acts as an AI: use an AI token (esfis token create --ai NAME)")
    return token


async def run_opener(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Token:
    """An agent token or a runs-only token: what may open a run token."""
    token = _token(request)
    if token.kind not in ("agent", "runs"):
        raise Forbidden(
            "runs are opened with an agent token or a runs-only token "
            "(esfis token create --ai NAME --runs-only); a run token cannot open runs"
        )
    return token


async def operator_token(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Token:
    token = _token(request)
    if not token.operator:
        raise Forbidden("this endpoint is for operators: use an operator token (esfis token create --operator)")
    return token


AgentToken = Annotated[Token, Depends(agent_token)]
RunOpener = Annotated[Token, Depends(run_opener)]
OperatorToken = Annotated[Token, Depends(operator_token)]
