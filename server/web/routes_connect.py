"""Consenting to an OAuth connection (``server.http.oauth``): the operator decides, on one page,
which AI an MCP host is and which spaces it reaches.

``/authorize`` sends the person's browser to ``/oauth/connect/ID``, outside the pages' secret
segment, since whoever starts an authorization must not learn the segment
(``server.web.site``). That page names the client and its redirect host, and takes an operator
token on a form (the existing sign-in; never in a URL). Signed in, the browser goes on to
``/settings/SEGMENT/connections/ID``: the consent page, where the operator picks the AI (an
existing name or a new one) and the scope (a space's subtree, or everywhere), and approves or
denies. Approve sends the browser back to the client's registered redirect URI with a code
(good once, for a minute) and ``state`` as given; deny sends ``error=access_denied``. An
operator already signed in (the cookie reaches this page when it is ``__Host-`` scoped, behind
https) goes straight on.

The consent page's CSP lets its form go to the client's redirect origin, and nowhere else.
Every name the client chose (its name, its id, its redirect host) is shown through the pages'
``inert`` filter: autoescaped, and its control and bidi characters written as escapes.
``authorize_refusal_page`` is where ``/authorize`` shows an error it will not send to an
unvetted client's redirect URI.
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from server.errors import EsfisError, Unauthorized
from server.web.operators import counted_sign_in
from server.web.pages import (
    HEADERS,
    Posted,
    WebError,
    WebRoute,
    current_session,
    form_of,
    now_of,
    operator,
    operator_of,
    outside_page,
    page,
    posted,
    same_site,
    service_of,
    set_cookie,
    settings_router,
    signer_of,
    url,
)
from server.web.routes_auth import BAD_TOKEN
from server.web.session import SESSION_COOKIE, SESSION_SECONDS

landing = APIRouter(route_class=WebRoute, include_in_schema=False)  # outside the segment
router = settings_router()
LANDING = "/oauth/connect/{request_id}"


@landing.get(LANDING)
def connect(request: Request, request_id: str) -> Response:
    try:
        consent = service_of(request).connections.pending(request_id)
    except EsfisError as exc:
        return outside_page("connect.html", status=exc.status, consent=None, error=exc.message)
    if current_session(request) is not None:
        return RedirectResponse(url(request, "connections", request_id), status_code=303, headers=HEADERS)
    return outside_page("connect.html", consent=consent, error=None)


async def _form_or_refusal(request: Request) -> dict[str, str] | WebError:
    """The landing's form, or why it cannot be taken: answered on a page outside the segment
    (the settings pages' own error page links to the segment)."""
    try:
        same_site(request)
        return await form_of(request)
    except WebError as exc:
        return exc


@landing.post(LANDING)
def connect_sign_in(
    request: Request, request_id: str, form: dict[str, str] | WebError = Depends(_form_or_refusal)
) -> Response:
    if isinstance(form, WebError):
        return outside_page("connect.html", status=form.status, consent=None, error=str(form))
    try:
        consent = service_of(request).connections.pending(request_id)
    except EsfisError as exc:
        return outside_page("connect.html", status=exc.status, consent=None, error=exc.message)
    try:
        token = counted_sign_in(request, form.get("token", "").strip())
    except Unauthorized:
        return outside_page("connect.html", status=401, consent=consent, error=BAD_TOKEN)
    except EsfisError as exc:  # an AI token (403), too many failures (429)
        return outside_page("connect.html", status=exc.status, consent=consent, error=exc.message)
    _, value = signer_of(request).new_session(token.id, now_of(request))
    response = RedirectResponse(url(request, "connections", request_id), status_code=303, headers=HEADERS)
    set_cookie(request, response, SESSION_COOKIE, value, max_age=SESSION_SECONDS)
    return response


def _consent_page(request: Request, consent, *, status: int = 200, error: str | None = None, form=None) -> Response:
    service = operator_of(request)
    response = page(
        request,
        "connection.html",
        status=status,
        error=error,
        section="tokens",
        consent=consent,
        ais=service.known_ais(),
        spaces=[s.name for s in service.spaces()],
        form=form or {},
    )
    target = urlsplit(consent.redirect_uri)
    policy = HEADERS["Content-Security-Policy"].replace(
        "form-action 'self'", f"form-action 'self' {target.scheme}://{target.netloc}"
    )
    response.headers["Content-Security-Policy"] = policy
    return response


@router.get("/connections/{request_id}")
def consent_form(request: Request, request_id: str, _=Depends(operator)) -> Response:
    consent = service_of(request).connections.pending(request_id)
    return _consent_page(request, consent)


@router.post("/connections/{request_id}")
def decide(request: Request, request_id: str, done: Posted = Depends(posted)) -> Response:
    connections = service_of(request).connections
    consent = connections.pending(request_id)
    by = f"operator {done.session.token_id} (web)"
    issuer = getattr(request.app.state, "oauth_site", None)
    iss = {"iss": issuer.issuer} if issuer is not None and issuer.on else {}
    if done.field("decision") == "deny":
        connections.deny(request_id, by=by)
        return _back(consent.redirect_uri, error="access_denied", state=consent.state, **iss)
    if done.field("decision") != "approve":
        return _consent_page(request, consent, status=422, error="decide with Approve or Deny", form=done.form)
    ai = done.field("ai")
    space = done.optional("space")
    try:
        approved, code = connections.approve(request_id, ai=ai, space=space, by=by)
    except EsfisError as exc:
        return _consent_page(request, consent, status=exc.status, error=exc.message, form=done.form)
    return _back(approved.redirect_uri, code=code, state=approved.state, **iss)


def authorize_refusal_page(error: str, description: str | None) -> Response:
    """An ``/authorize`` error for a client the operator has not said yes to, shown here rather
    than sent to a redirect URI a stranger registered (``server.http.oauth.routes.refused_here``)."""
    message = f"{error}: {description}" if description else error
    return outside_page("error.html", status=400, title="This connection request cannot go on", message=message[:500])


def _back(redirect_uri: str, **params: str | None) -> RedirectResponse:
    """To the client's registered redirect URI (exactly as registered), with the answer added
    to its query; ``state`` exactly as the client gave it."""
    parts = urlsplit(redirect_uri)
    extra = urlencode({k: v for k, v in params.items() if v is not None})
    query = f"{parts.query}&{extra}" if parts.query else extra
    return RedirectResponse(parts._replace(query=query).geturl(), status_code=303, headers=HEADERS)
