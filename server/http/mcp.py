"""MCP over streamable HTTP at ``/mcp``, inside ``esfis serve``: the HTTP app mounts the MCP
server of ``esfis mcp`` (``server.mcp.server``), so the tools, answers, errors and approvals are
the same, for agents on other machines.

Who calls, and in which run, is the platform's choice (docs/barrier.md):

- **Authentication.** Every request carries an esfis bearer token, checked on every request
  by the HTTP gate (``server.http.auth``): an agent token or a run token. Operator tokens and
  runs-only tokens are refused. A revoked token's sessions stop at their next request.
- **The token is the run.** Every request of a run token is that run; every request of an
  agent token is the token's standing run, so no new connection sheds what the token's run
  carries. Runs live in the catalog: a restart, another worker, another server, changes nothing.
- **No sessions** (the SDK's stateless mode, and the 2026-07-28 revision, which has none): every
  request is served on its own, by whichever worker of whichever server receives it, with the
  token authenticated and its run found at that request. Nothing of a client is kept in a
  process between two requests, so ``esfis serve --workers N`` and several servers behind a
  proxy serve ``/mcp`` as they serve ``/v1``.
- **Where a request stands**: the space named in the URL (``/mcp?space=acme/platform``), within
  the token's reach, else the token's scope (else no space: personal only), checked at every
  request; a run is sealed where it first stepped, so a later request naming another space
  cannot move it (``server.barrier.runs``). Never a folder of the server.
- **Approvals**: no answer of an HTTP client counts as a person's, since whoever holds the token
  answers, and that may be the model. A call that needs a person is held for the operator
  (``server.barrier.approvals``) and the tool answers its approval's id. Only a token the
  operator made with ``--approvals host`` has its host's prompts count as its user's; with no
  session there is no channel back to the host within a call, so over HTTP such a call is held
  for the operator too (docs/mcp.md).
- **Protection** (the MCP specification's, for HTTP servers): a request whose ``Origin`` is not
  allowed (``ESFIS_MCP_ORIGINS``; none by default) is refused, as is one whose ``Host`` is not
  (``ESFIS_MCP_HOSTS``; by default the loopback names when the server listens on loopback);
  bodies are limited like every JSON endpoint's; logs never hold a session id or a token.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

import anyio
import anyio.abc
from starlette.types import Receive, Scope, Send

from server.errors import BadRequest, EsfisError, Forbidden
from server.http.auth import TOKEN_KEY
from server.http.errors import error_response, from_esfis
from server.http.oauth.address import SERVE_HOST, OAuthSite
from server.loading import loading
from server.models import Caller, Token

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context, MCPServer

    from server.facade import Esfis
PATH = "/mcp"
SPACE_KEY = "esfis.mcp_space"
CALLER_KEY = "esfis.mcp_caller"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_SECRETS = re.compile(r"\b[0-9a-f]{32}\b|esfis_[A-Za-z0-9_-]{43}")


@dataclass(frozen=True)
class Protection:
    """Which ``Host`` and ``Origin`` values ``/mcp`` takes (against DNS rebinding)."""

    origins: tuple[str, ...] = ()  # exact origins, e.g. https://tools.example.com; none: no browser page
    hosts: tuple[str, ...] | None = None  # host names (any port); None: any host

    @classmethod
    def from_env(cls) -> Protection:
        """As ``esfis serve`` set it for its workers: the address it listens on (SERVE_HOST),
        ESFIS_MCP_ORIGINS and ESFIS_MCP_HOSTS."""
        return cls.for_bind(
            os.environ.get(SERVE_HOST, "127.0.0.1"),
            origins=os.environ.get("ESFIS_MCP_ORIGINS"),
            hosts=os.environ.get("ESFIS_MCP_HOSTS"),
        )

    @classmethod
    def for_bind(cls, host: str, *, origins: str | None, hosts: str | None) -> Protection:
        named = tuple(h.strip().lower() for h in (hosts or "").split(",") if h.strip())
        if named:
            return cls(_split(origins), named)
        if host in ("127.0.0.1", "localhost", "::1"):
            return cls(_split(origins), LOOPBACK_HOSTS)
        return cls(_split(origins), None if host in ("0.0.0.0", "::") else (host.lower(),))

    def refusal(self, headers: list[tuple[bytes, bytes]]) -> EsfisError | None:
        values = {k: v.decode("latin-1") for k, v in headers if k in (b"host", b"origin")}
        origin = values.get(b"origin")
        if origin is not None and origin not in self.origins:
            return Forbidden("this Origin may not use /mcp (ESFIS_MCP_ORIGINS lists the origins that may)")
        if self.hosts is not None:
            host = values.get(b"host", "").lower()
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in self.hosts:
                return Forbidden("this Host may not use /mcp (ESFIS_MCP_HOSTS lists the host names that may)")
        return None


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


class WrongToken(Forbidden):
    """A valid token of a kind that does not act as an AI (an operator's, a runs-only one)."""


class McpEndpoint:
    """The ASGI app behind ``/mcp``: protection, the token's kind, the session's space, then
    the SDK's session manager. The HTTP gate has already authenticated the token."""

    def __init__(
        self,
        service: Callable[[], Esfis],
        protection: Protection,
        *,
        approval_wait_s: float,
        site: OAuthSite | None = None,
    ) -> None:
        self.service = service
        self.protection = protection
        self.site = site
        self.approval_wait_s = approval_wait_s
        self.route: object | None = None  # its route, for the access log's template (set by the app)
        self._server: MCPServer | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._starting: anyio.Lock | None = None
        self._user: Callable[[Token], object] = _unbuilt  # the SDK's user of a request, once built

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For the application's lifespan: where the SDK's session manager will run. The MCP
        server is built at the first ``/mcp`` request (``ready``), not here: the SDK's import is
        about half a second of every server's start, and most servers never see MCP."""
        self._starting = anyio.Lock()
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                group.cancel_scope.cancel()  # the session manager, if it ever started

    async def ready(self) -> MCPServer:
        """The MCP server, built (off the event loop) and its session manager running."""
        if self._server is not None:
            return self._server
        assert self._starting is not None and self._group is not None, "serve /mcp inside running()"
        async with self._starting:
            if self._server is None:
                server = await anyio.to_thread.run_sync(loading("MCP over HTTP", self._build))
                await self._group.start(self._manage, server)
                self._server = server
        return self._server

    def _build(self) -> MCPServer:
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        from server.mcp.server import build_server

        # The SDK's user for a request, its classes imported here, where a broken install is said
        # as one (``server.loading``), not at each request.
        self._user = lambda token: AuthenticatedUser(AccessToken(token="", client_id=token.id, scopes=[]))

        server = build_server(
            self.service, None, caller_of=caller_of, trusts_host=trusts_host, approval_wait_s=self.approval_wait_s
        )
        server.streamable_http_app(  # makes the session manager; its routes are not used
            json_response=False, stateless_http=True, transport_security=None, host="0.0.0.0"
        )
        return server

    @staticmethod
    async def _manage(server: MCPServer, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        async with server.session_manager.run():
            task_status.started()
            await anyio.sleep_forever()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope.setdefault("route", self.route)  # a plain ASGI route: the router does not name it
        if scope["method"] == "GET":
            # No session, so nothing for the server to send unasked: the stream a GET would open
            # stays empty for as long as its client likes, holding a socket past any revocation.
            # 405 is the streamable HTTP transport's answer for a server that offers none.
            message = "esfis offers no server-sent event stream at /mcp: send each message with POST"
            await error_response(405, "method_not_allowed", message, {"Allow": "POST"})(scope, receive, send)
            return
        try:
            space = await self._admit(scope)
            server = await self.ready()  # first: the SDK imported off the event loop
        except WrongToken as exc:  # an OAuth error too: a host that speaks OAuth knows to sign in
            challenge = f'Bearer error="insufficient_scope", error_description="{exc.message}"'
            if self.site is not None and self.site.on:
                challenge += f', resource_metadata="{self.site.metadata_url(PATH)}"'
            await error_response(exc.status, exc.code, exc.message, {"WWW-Authenticate": challenge})(
                scope, receive, send
            )
            return
        except EsfisError as exc:
            await from_esfis(exc)(scope, receive, send)
            return
        token: Token = scope[TOKEN_KEY]
        scope["user"] = self._user(token)
        scope[SPACE_KEY] = space
        await server.session_manager.handle_request(scope, receive, send)

    async def _admit(self, scope: Scope) -> str | None:
        refusal = self.protection.refusal(scope["headers"])
        if refusal is not None:
            raise refusal
        token = scope.get(TOKEN_KEY)
        if not isinstance(token, Token) or token.kind not in ("agent", "run"):
            raise WrongToken(
                "MCP over HTTP acts as an AI: use an agent token or a run token "
                "(esfis token create --ai NAME, or POST /v1/runs)"
            )
        asked = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True).get("space", [])
        if len(asked) > 1:
            raise BadRequest("the URL names space more than once")
        space = asked[0] if asked else None
        # Where it stands is checked at every request, as the façade checks any caller.
        caller = await anyio.to_thread.run_sync(
            lambda: self.service().caller(space=space, transport="mcp", token=token)
        )
        scope[CALLER_KEY] = caller  # the tool call of this request stands here (caller_of)
        return caller.space


def _unbuilt(token: Token) -> object:
    raise RuntimeError("serve /mcp after ready(): the MCP server is built there")


def caller_of(ctx: Context, service: Esfis) -> Caller:
    """The caller of one tool call over HTTP: the token of the request that carried it, standing
    where that request's URL says, as ``McpEndpoint`` resolved it for this very request."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None) or {}
    resolved = scope.get(CALLER_KEY)
    token = scope.get(TOKEN_KEY)
    if isinstance(resolved, Caller) and isinstance(token, Token) and resolved.token_id == token.id:
        return resolved
    if not isinstance(token, Token):
        raise Forbidden("MCP over HTTP acts as an AI: use an agent token or a run token")
    return service.caller(space=scope.get(SPACE_KEY), transport="mcp", token=token)


def trusts_host(ctx: Context) -> bool:
    """Whether this call's host may ask its user to approve: never over HTTP. ``/mcp`` keeps no
    session, so there is no channel back to the host within a call (a 2026-07-28 request names
    the client's capabilities, but a prompt sent would go nowhere and count as declined): a call
    that needs a person is held for the operator, ``--approvals host`` tokens' too."""
    return False


def _header(scope: Scope, name: bytes) -> str | None:
    found = [v for k, v in scope["headers"] if k.lower() == name]
    return found[0].decode("latin-1") if found else None


class Redacting(logging.Filter):
    """Session ids and tokens never reach a log line (the SDK names session ids in some)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if _SECRETS.search(message):
            record.msg, record.args = _SECRETS.sub("[redacted]", message), None
        return True
