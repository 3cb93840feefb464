"""esfis as the MCP SDK's ``OAuthAuthorizationServerProvider``: the SDK's handlers parse and
answer every OAuth request (``mcp.server.auth``), and this provider keeps their state in the
catalog through the façade (``Esfis.connections``), off the event loop.

What esfis adds to the SDK's checks: a resource indicator must name this server (RFC 8707);
a redirect URI must be https or loopback http; a client secret is kept as its sha256; the AI
and the subtree a connection gets are the operator's choice on the consent page, never the
client's scopes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    IdentityAssertionParams,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl, ValidationError

from server.errors import EsfisError, TooManyRequests
from server.http.oauth.address import OAuthSite
from server.http.oauth.client_secrets import hashed_secret
from server.http.oauth.documents import DocumentError, is_document_id, read_document
from server.http.oauth.redirects import redirect_refusal

if TYPE_CHECKING:
    from server.facade import Esfis

CONNECT_PATH = "/oauth/connect"  # the consent's landing page (server.web.routes_connect)
CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")  # S256: base64url of 32 bytes, unpadded
DOCUMENT_S = 600
# Who asks at /authorize (the peer, or a trusted proxy's forwarded address), set by its route:
# the SDK calls ``authorize`` with no request, and a share of the pending consents is per address.
ASKING_ADDRESS: ContextVar[str] = ContextVar("esfis_oauth_asking_address", default="unknown")


class EsfisProvider:
    def __init__(self, service: Callable[[], Esfis], site: OAuthSite) -> None:
        self.service = service
        self.site = site

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    # -- clients ----------------------------------------------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if not isinstance(client_id, str) or not client_id or len(client_id) > 2048:
            return None
        connections = self.service().connections
        stored = await self._call(connections.client, client_id)
        if is_document_id(client_id):
            fresh = stored is not None and (self.service().clock() - stored.fetched_at).total_seconds() < DOCUMENT_S
            if not fresh:
                try:
                    await self.read_document(client_id)
                except DocumentError:
                    return None
                stored = await self._call(connections.client, client_id)
        if stored is None:
            return None
        try:
            return OAuthClientInformationFull.model_validate(stored.info)
        except ValidationError:
            return None

    async def read_document(self, url: str) -> None:
        """Reads and keeps a client's metadata document; ``DocumentError`` says what is wrong."""
        info = await read_document(url, self.site)
        try:
            await self._call(self.service().connections.save_client, url, "document", info)
        except TooManyRequests as exc:  # as many document clients as the catalog keeps (MAX_CLIENTS)
            raise DocumentError(exc.message) from None

    async def consented(self, client_id: str) -> bool:
        """Whether the operator has said yes to this client (``Connections.consented``)."""
        return bool(await self._call(self.service().connections.consented, client_id))

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        for uri in client_info.redirect_uris or []:
            refusal = redirect_refusal(str(uri))
            if refusal is not None:
                raise RegistrationError("invalid_redirect_uri", f"redirect URI {str(uri)[:200]!r}: {refusal}")
        info = client_info.model_dump(mode="json", exclude_none=True)
        if client_info.client_secret:
            info["client_secret"] = hashed_secret(client_info.client_secret)  # the secret itself is never kept
        try:
            await self._call(self.service().connections.save_client, client_info.client_id, "registered", info)
        except TooManyRequests as exc:
            raise RegistrationError("invalid_client_metadata", exc.message) from None

    # -- authorization ----------------------------------------------------------------------

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        resource = self.site.mcp_resource if params.resource is None else self.site.known_resource(params.resource)
        if resource is None:
            raise AuthorizeError("invalid_target", "the resource is not this server (its /mcp, or its address)")
        if not CHALLENGE.fullmatch(params.code_challenge):
            raise AuthorizeError("invalid_request", "code_challenge must be an S256 challenge: 43 base64url characters")
        name = (client.client_name or "").strip() or str(client.client_id)
        try:
            request_id = await self._call(
                self.service().connections.ask,
                str(client.client_id),
                name[:200],
                {
                    "redirect_uri": str(params.redirect_uri),
                    "redirect_explicit": params.redirect_uri_provided_explicitly,
                    "code_challenge": params.code_challenge,
                    "state": params.state,
                    "scopes": params.scopes or [],
                    "resource": resource,
                },
                address=ASKING_ADDRESS.get(),
            )
        except EsfisError as exc:
            raise AuthorizeError("temporarily_unavailable", exc.message) from None
        assert self.site.issuer is not None
        return f"{self.site.issuer}{CONNECT_PATH}/{request_id}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        consent = await self._call(self.service().connections.code, authorization_code)
        if consent is None or consent.client_id != client.client_id:
            return None
        return AuthorizationCode(
            code=authorization_code,
            scopes=list(consent.scopes),
            expires_at=consent.expires_at.timestamp(),
            client_id=consent.client_id,
            code_challenge=consent.code_challenge,
            redirect_uri=AnyUrl(consent.redirect_uri),
            redirect_uri_provided_explicitly=consent.redirect_explicit,
            resource=consent.resource,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        resource = authorization_code.resource or self.site.mcp_resource
        issued = await self._call(self.service().connections.exchange, authorization_code.code, resource=resource)
        if issued is None:
            raise TokenError("invalid_grant", "the authorization code was used already")
        return _token(issued)

    # -- refresh and revocation -------------------------------------------------------------

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        found = await self._call(self.service().connections.refresh, refresh_token)
        if found is None or found.client_id != client.client_id:
            return None
        return RefreshToken(
            token=refresh_token,
            client_id=found.client_id,
            scopes=[],
            expires_at=int(found.expires_at.timestamp()),
            resource=found.resource,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        issued = await self._call(self.service().connections.rotate, refresh_token.token)
        if issued is None:
            raise TokenError("invalid_grant", "the refresh token was used already, or its connection ended")
        return _token(issued)

    async def load_access_token(self, token: str) -> AccessToken | None:
        try:
            found = await self._call(self.service().authenticate, f"Bearer {token}")
        except EsfisError:
            return None
        if found.client_id is None:
            return None
        return AccessToken(
            token=token,
            client_id=found.client_id,
            scopes=[],
            expires_at=None if found.expires_at is None else int(found.expires_at.timestamp()),
            resource=found.resource,
        )

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        await self._call(self.service().connections.revoke, token.token, token.client_id)

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        # SEP-990 (an enterprise IdP's assertion) is not offered: the operator consents, on a page.
        raise TokenError("unsupported_grant_type", "the JWT bearer grant is not supported by this server")


def _token(issued) -> OAuthToken:
    return OAuthToken(
        access_token=issued.access,
        token_type="Bearer",
        expires_in=issued.expires_in,
        refresh_token=issued.refresh,
    )
