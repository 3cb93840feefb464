"""Client secrets, kept as their sha256 (``sha256:HEX``): the SDK's ``ClientAuthenticator``
compares a stored secret as it is, so esfis's authenticator compares hashes instead; the rest
of its checks are the SDK's own rules, kept in the same order."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from urllib.parse import unquote

from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.shared.auth import OAuthClientInformationFull
from starlette.requests import Request

PREFIX = "sha256:"


def hashed_secret(secret: str) -> str:
    return PREFIX + hashlib.sha256(secret.encode("utf-8")).hexdigest()


class HashedSecretAuthenticator(ClientAuthenticator):
    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        form = await request.form()
        client_id = form.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise AuthenticationError("Missing client_id")
        client = await self.provider.get_client(client_id)
        if client is None:
            raise AuthenticationError("Invalid client_id")
        method = client.token_endpoint_auth_method
        if method == "none":
            if client.client_secret:
                raise AuthenticationError("Client is registered with a secret but claims no authentication")
            return client
        given: str | None = None
        if method == "client_secret_basic":
            header = request.headers.get("Authorization", "")
            if not header.startswith("Basic "):
                raise AuthenticationError("Missing or invalid Basic authentication in Authorization header")
            try:
                decoded = base64.b64decode(header[6:], validate=True).decode("utf-8")
                basic_id, _, given = decoded.partition(":")
            except (ValueError, UnicodeDecodeError, binascii.Error):
                raise AuthenticationError("Invalid Basic authentication header") from None
            if unquote(basic_id) != client_id:
                raise AuthenticationError("Client ID mismatch in Basic auth")
            given = unquote(given)
        elif method == "client_secret_post":
            raw = form.get("client_secret")
            given = raw if isinstance(raw, str) else None
        else:
            raise AuthenticationError(f"Unsupported auth method: {method}")
        stored = client.client_secret or ""
        if not given or not stored.startswith(PREFIX):
            raise AuthenticationError("Client secret is required")
        if not hmac.compare_digest(stored.encode(), hashed_secret(given).encode()):
            raise AuthenticationError("Invalid client_secret")
        return client
