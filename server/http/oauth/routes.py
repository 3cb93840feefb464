"""The OAuth endpoints (``server.http.oauth``), built on the MCP SDK's ``mcp.server.auth``
handlers. Imported at the first OAuth request, never at start-up: the SDK's import is about half
a second of every server's start, and most servers never see an OAuth request."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.metadata import MetadataHandler, ProtectedResourceMetadataHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenErrorResponse, TokenHandler
from mcp.server.auth.routes import build_metadata, cors_middleware
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from server.http.oauth.address import MCP_PATH, PRM_PATH, OAuthSite
from server.http.oauth.client_secrets import HashedSecretAuthenticator
from server.http.oauth.documents import DocumentError, is_document_id
from server.http.oauth.provider import ASKING_ADDRESS, CONNECT_PATH, EsfisProvider

if TYPE_CHECKING:
    from server.facade import Esfis

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


class ResourceBoundTokens(TokenHandler):
    """The SDK's token endpoint, refusing a ``resource`` that is not this server (RFC 8707 §2)."""

    site: OAuthSite

    async def handle(self, request: Request) -> Response:
        form = await request.form()  # Starlette keeps it: the SDK's handler reads the same form
        resource = form.get("resource")
        if isinstance(resource, str) and resource and self.site.known_resource(resource) is None:
            return self.response(
                TokenErrorResponse(error="invalid_target", error_description="the resource is not this server")
            )
        return await super().handle(request)


class PublicClientRevocation(RevocationHandler):
    """The SDK's revocation endpoint, for public clients too: its request model requires a
    ``client_secret`` field, which a public client (PKCE, no secret) never sends."""

    async def handle(self, request: Request) -> Response:
        form = await request.form()
        if "client_secret" not in form:
            request._form = FormData([*form.multi_items(), ("client_secret", "")])  # Starlette's cached form
        return await super().handle(request)


def routes(service: Callable[[], Esfis], site: OAuthSite) -> list[Route]:
    assert site.issuer is not None
    provider = EsfisProvider(service, site)
    issuer = AnyHttpUrl(site.issuer)
    registration = ClientRegistrationOptions(enabled=True)
    revocation = RevocationOptions(enabled=True)
    sdk_metadata = build_metadata(issuer, None, registration, revocation).model_dump(mode="json", exclude_none=True)
    metadata = OAuthMetadata.model_validate(
        {
            **sdk_metadata,
            "issuer": site.issuer,  # as a string: the model keeps it without a trailing slash (RFC 8414 §3.3)
            "client_id_metadata_document_supported": True,
            "authorization_response_iss_parameter_supported": True,  # RFC 9207: the consent page sends iss
            "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        }
    )
    authenticator = HashedSecretAuthenticator(provider)
    tokens = ResourceBoundTokens(provider, authenticator)
    tokens.site = site
    authorization = AuthorizationHandler(provider)

    async def authorize(request: Request) -> Response:
        # A client known by its metadata document: read it first, so what is wrong with it is
        # said (the SDK would only say the client is unknown).
        params = request.query_params if request.method == "GET" else await request.form()
        client_id = params.get("client_id")
        if isinstance(client_id, str) and is_document_id(client_id):
            try:
                await provider.read_document(client_id)
            except DocumentError as exc:
                return JSONResponse(
                    {"error": "invalid_client", "error_description": str(exc)}, status_code=400, headers=NO_STORE
                )
        asking = ASKING_ADDRESS.set(request.client.host if request.client else "unknown")  # as the gate counts it
        try:
            answer = await authorization.handle(request)
        finally:
            ASKING_ADDRESS.reset(asking)
        location = answer.headers.get("location")
        if location is None or to_consent(location, site) or not error_redirect(location):
            return answer
        # The SDK sends an error to the client's redirect URI (RFC 6749 §4.1.2.1). With open
        # registration, that URI is whatever a stranger registered: only a client the operator
        # has said yes to is sent there (RFC 9700 §4.11.2); any other sees the error here.
        if isinstance(client_id, str) and await provider.consented(client_id):
            return answer
        error, description = error_redirect(location) or ("invalid_request", None)
        return refused_here(request, error, description)

    def resource_metadata(resource: str) -> Callable:
        document = ProtectedResourceMetadata.model_validate(
            {"resource": resource, "authorization_servers": [site.issuer], "resource_name": "esfis"}
        )
        return cors_middleware(ProtectedResourceMetadataHandler(document).handle, ["GET", "OPTIONS"])

    built = [
        Route(
            "/.well-known/oauth-authorization-server",
            cors_middleware(MetadataHandler(metadata).handle, ["GET", "OPTIONS"]),
            methods=["GET", "OPTIONS"],
        ),
        Route(PRM_PATH, resource_metadata(site.issuer), methods=["GET", "OPTIONS"]),
        Route(PRM_PATH + MCP_PATH, resource_metadata(site.mcp_resource), methods=["GET", "OPTIONS"]),
        Route("/authorize", authorize, methods=["GET", "POST"]),
        Route("/token", cors_middleware(tokens.handle, ["POST", "OPTIONS"]), methods=["POST", "OPTIONS"]),
        Route(
            "/register",
            cors_middleware(RegistrationHandler(provider, options=registration).handle, ["POST", "OPTIONS"]),
            methods=["POST", "OPTIONS"],
        ),
        Route(
            "/revoke",
            cors_middleware(PublicClientRevocation(provider, authenticator).handle, ["POST", "OPTIONS"]),
            methods=["POST", "OPTIONS"],
        ),
    ]
    for route in built:
        route.app = _named(route, route.app)
    return built


def to_consent(location: str, site: OAuthSite) -> bool:
    """Whether ``/authorize`` sends the browser on to the consent's landing page (its own
    address, no query), not back to a client."""
    return location.startswith(f"{site.issuer}{CONNECT_PATH}/") and not urlsplit(location).query


def error_redirect(location: str) -> tuple[str, str | None] | None:
    """The error and its description an error redirect carries (the SDK adds them last, after
    any query the redirect URI had of its own), else None."""
    query = parse_qs(urlsplit(location).query)
    if "error" not in query:
        return None
    description = query.get("error_description")
    return query["error"][-1], description[-1] if description else None


def refused_here(request: Request, error: str, description: str | None) -> Response:
    """An ``/authorize`` error shown on esfis's own page (400, the pages' CSP): the web pages
    put their renderer on ``app.state`` (``server.web.mount_web``); without them, JSON."""
    page = getattr(request.app.state, "authorize_refusal_page", None)
    if page is None:
        return JSONResponse({"error": error, "error_description": description}, status_code=400, headers=NO_STORE)
    return page(error, description)


def _named(route: Route, app: ASGIApp) -> ASGIApp:
    """The access log names a request by its route's template (``server.http.access_log``)."""

    async def named(scope: Scope, receive: Receive, send: Send) -> None:
        scope.setdefault("route", route)
        await app(scope, receive, send)

    return named
