"""Signing in and out, the style sheet, and the pages that are not there.

Sign-in takes an operator token on a form (never in a URL) and answers with a session cookie
that holds no token (``server.web.session``). An AI token cannot sign in; every bad token gets
one answer, as over HTTP. ``/settings/`` itself, and any address that does not name the pages'
segment, is one page that says where the pages are, and touches no cookie (``server.web.site``).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from server.errors import Forbidden, Unauthorized
from server.web.operators import counted_sign_in
from server.web.pages import (
    HEADERS,
    Posted,
    WebError,
    WebRoute,
    current_session,
    elsewhere_page,
    error_page,
    forget_cookie,
    form_of,
    now_of,
    operator_of,
    page,
    posted,
    redirect,
    safe_next,
    same_site,
    set_cookie,
    settings_router,
    signer_of,
    url,
)
from server.web.rendering import STATIC
from server.web.session import SESSION_COOKIE, SESSION_SECONDS, SIGNIN_COOKIE, SIGNIN_SECONDS
from server.web.site import SETTINGS, STYLE_URL, site_of

assets = APIRouter(route_class=WebRoute, include_in_schema=False)  # first: outside the segment
router = settings_router()
missing_pages = settings_router()  # after every module's pages
fallback = APIRouter(route_class=WebRoute, include_in_schema=False)  # last: outside the segment

BAD_TOKEN = "that is not a valid token, or it was revoked"
STYLE = (STATIC / "style.css").read_bytes()


@router.get("")
@router.get("/")
def home(request: Request) -> Response:
    return RedirectResponse(url(request, "spaces"), status_code=303, headers=HEADERS)


def _sign_in_form(request: Request, *, status: int = 200, error: str | None = None, next_: str | None = None):
    value, csrf = signer_of(request).new_signin(now_of(request))
    next_ = next_ if safe_next(request, next_) else ""
    response = page(request, "sign_in.html", status=status, error=error, signin_csrf=csrf, next=next_)
    set_cookie(request, response, SIGNIN_COOKIE, value, max_age=SIGNIN_SECONDS)
    return response


@router.get("/sign-in")
def sign_in_form(request: Request) -> Response:
    if current_session(request) is not None:  # signed in already: straight on
        next_ = request.query_params.get("next")
        target = next_ if next_ is not None and safe_next(request, next_) else url(request, "spaces")
        return RedirectResponse(target, status_code=303, headers=HEADERS)
    return _sign_in_form(request, next_=request.query_params.get("next"))


@router.post("/sign-in")
def sign_in(request: Request, form: dict[str, str] = Depends(form_of)) -> Response:
    same_site(request)
    next_ = form.get("next", "")
    signin = request.cookies.get(site_of(request).cookie(SIGNIN_COOKIE))
    if not signer_of(request).signin_ok(signin, form.get("csrf"), now_of(request)):
        return _sign_in_form(
            request,
            status=403,
            next_=next_,
            error="this sign-in form is out of date or was not sent from this page: try again",
        )
    secret = form.get("token", "").strip()
    try:
        token = counted_sign_in(request, secret)
    except Unauthorized:
        return _sign_in_form(request, status=401, error=BAD_TOKEN, next_=next_)
    except Forbidden as exc:
        return _sign_in_form(request, status=403, error=exc.message, next_=next_)
    _, value = signer_of(request).new_session(token.id, now_of(request))
    target = next_ if safe_next(request, next_) else url(request, "spaces")
    response = RedirectResponse(target, status_code=303, headers=HEADERS)
    set_cookie(request, response, SESSION_COOKIE, value, max_age=SESSION_SECONDS)
    forget_cookie(request, response, SIGNIN_COOKIE)
    return response


@router.post("/sign-out")
def sign_out(request: Request, done: Posted = Depends(posted)) -> Response:
    operator_of(request).end_web_session(done.session.nonce, done.session.expires)
    response = redirect(request, url(request, "sign-in"), "signed out")
    forget_cookie(request, response, SESSION_COOKIE)
    return response


@assets.get(STYLE_URL)
def style() -> Response:
    return Response(
        STYLE, media_type="text/css", headers={"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"}
    )


METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"]


@missing_pages.api_route("/{rest:path}", methods=METHODS)
def missing(request: Request, rest: str) -> Response:
    """A page that is not there, at the pages' address (a signed-in operator keeps the nav)."""
    return error_page(request, 404, f"there is no settings page /{rest}")


@fallback.api_route(SETTINGS, methods=METHODS)
@fallback.api_route(SETTINGS + "/{rest:path}", methods=METHODS)
def elsewhere(request: Request) -> Response:
    """``/settings/`` and every address without the segment: where the pages are."""
    return elsewhere_page(request)


__all__ = ["assets", "router", "missing_pages", "fallback", "WebError"]
