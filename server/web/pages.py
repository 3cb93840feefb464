"""How the Settings pages are rendered and guarded: templates, headers, the session and CSRF
checks as dependencies, and the one place that turns every error into a page.

Every error a route raises ends here (``WebRoute``): the core's ``EsfisError`` shows its own
message with its status, a missing page is a 404 page, and anything unexpected is logged and
shown as "internal error" — never a stack trace. ``WebRoute`` also checks, before anything else
and before any cookie is read, that the request names the pages' secret segment
(``server.web.site``): at any other address the answer is the page that says where to look. Pages are rendered on the server with Jinja2
(``server.web.rendering``), with no script at all, and sent with
headers that keep them out of caches and frames (``Cache-Control: no-store``, a strict CSP).
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, quote

from fastapi import APIRouter, Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from markupsafe import Markup
from starlette.exceptions import HTTPException

from server.errors import EsfisError
from server.facade import Esfis, Operator
from server.web.operators import active_operator_token, private_key
from server.web.rendering import ENV
from server.web.session import FLASH_COOKIE, KEY_NAME, SESSION_COOKIE, Session, Signer
from server.web.site import PREFIX, SETTINGS, STYLE_URL, segment, site_of, url

log = logging.getLogger("esfis.web")

MAX_FORM_FIELDS = 50
CROSS_SITE = "this form was sent from another site: refused (open the page here and send it again)"
CSRF_FAILED = "this form is out of date or was not sent from this page: reload the page and send it again"
REASONS = {
    400: "Bad request",
    403: "Refused",
    404: "Not found",
    409: "Conflict",
    413: "Too large",
    415: "Unsupported form",
    422: "Invalid input",
    429: "Too many requests",
    500: "Internal error",
}

HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}


class WebError(Exception):
    """A page-level refusal that is not the core's: a bad form, a cross-site POST."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SignInRequired(Exception):
    """No valid operator session: the answer is a redirect to the sign-in form."""


class ElsewhereRequired(Exception):
    """The request does not name the pages' segment: the answer says where the pages are."""


# -- the service, the key, the session -------------------------------------------------------


def service_of(request: Request) -> Esfis:
    return request.app.state.service


def operator_of(request: Request) -> Operator:
    """The settings pages act as the operator: every call is on the façade's operator."""
    return service_of(request).operator


def signer_of(request: Request) -> Signer:
    """Read per request (a stat and a read): deleting the key file ends every session at once.
    Bound to the pages' segment: a cookie signed for another address is refused."""
    return Signer(private_key(service_of(request).home, KEY_NAME), segment(request))


def now_of(request: Request) -> float:
    return service_of(request).clock().timestamp()


def current_session(request: Request) -> Session | None:
    """The operator session of this request, or None: a forged, expired or signed-out cookie, or
    one whose token is no longer an active operator token."""
    value = request.cookies.get(site_of(request).cookie(SESSION_COOKIE))
    session = signer_of(request).session(value, now_of(request))
    if session is None or operator_of(request).web_session_ended(session.nonce):
        return None
    if active_operator_token(operator_of(request), session.token_id) is None:
        return None
    return session


def operator(request: Request) -> Session:
    """Dependency of every page but sign-in: a valid operator session, else sign in first."""
    session = current_session(request)
    if session is None:
        raise SignInRequired()
    request.state.session = session
    return session


async def form_of(request: Request) -> dict[str, str]:
    """A urlencoded form, first value of each field (the body is already limited to 64 KiB)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise WebError(415, "forms are sent as application/x-www-form-urlencoded")
    try:
        text = (await request.body()).decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    except UnicodeDecodeError:
        raise WebError(422, "the form must be sent in UTF-8") from None
    except ValueError:
        raise WebError(422, f"a form has at most {MAX_FORM_FIELDS} fields") from None
    form: dict[str, str] = {}
    for name, value in pairs:
        form.setdefault(name, value)
    return form


def same_site(request: Request) -> None:
    """Refuse a POST that another origin sent (another port of this host too): by Fetch
    Metadata, else by ``Origin`` (ESFIS_PUBLIC_URL's, when set)."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        raise WebError(403, CROSS_SITE)
    origin = request.headers.get("origin")
    if origin is not None and origin != site_of(request).origin(request):
        raise WebError(403, CROSS_SITE)


@dataclass(frozen=True)
class Posted:
    session: Session
    form: dict[str, str]

    def field(self, name: str) -> str:
        return self.form.get(name, "").strip()

    def optional(self, name: str) -> str | None:
        return self.field(name) or None


def posted(request: Request, session: Session = Depends(operator), form: dict[str, str] = Depends(form_of)) -> Posted:
    """Dependency of every state-changing form: a session, the same site, and its CSRF token."""
    same_site(request)
    if not signer_of(request).csrf_ok(session.nonce, form.get("csrf")):
        raise WebError(403, CSRF_FAILED)
    return Posted(session, form)


# -- answers --------------------------------------------------------------------------------


def page(request: Request, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
    """A settings page (the request named the segment): ``url`` builds its links."""
    session: Session | None = getattr(request.state, "session", None)
    flash_cookie = site_of(request).cookie(FLASH_COOKIE)
    flash = None
    if flash_cookie in request.cookies:
        flash = signer_of(request).unsign("flash", request.cookies[flash_cookie])
    context.setdefault("error", None)
    context.setdefault("section", "")
    html = ENV.get_template(template).render(
        session=session,
        csrf_field=Markup('<input type="hidden" name="csrf" value="%s">') % (session.csrf if session else ""),
        flash=flash,
        url=partial(url, request),
        style_url=STYLE_URL,
        **context,
    )
    response = HTMLResponse(html, status_code=status, headers=HEADERS)
    if flash_cookie in request.cookies:
        forget_cookie(request, response, FLASH_COOKIE)
    return response


def outside_page(template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
    """A page outside the segment (where the pages are, the OAuth landing, their errors): no
    link to the settings pages, no cookie read or set, no segment named."""
    context.setdefault("error", None)
    html = ENV.get_template(template).render(
        session=None, csrf_field="", flash=None, url=None, style_url=STYLE_URL, section="", **context
    )
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def elsewhere_page(request: Request) -> HTMLResponse:
    """The answer at ``/settings/`` and at any address without the pages' segment: where to find
    them."""
    return outside_page("elsewhere.html", status=200 if request.url.path in (SETTINGS, SETTINGS + "/") else 404)


def redirect(request: Request, to: str, notice: str | None = None) -> RedirectResponse:
    """After a POST, to a page (303; ``to`` built by ``url``), with a one-time notice shown there."""
    response = RedirectResponse(to, status_code=303, headers=HEADERS)
    if notice is not None:
        value = signer_of(request).sign("flash", {"m": notice[:500]})
        set_cookie(request, response, FLASH_COOKIE, value, max_age=60)
    return response


def set_cookie(request: Request, response: Response, name: str, value: str, *, max_age: int) -> None:
    """One of the pages' cookies, scoped to their address (``server.web.site``)."""
    site = site_of(request)
    response.set_cookie(
        site.cookie(name),
        value,
        max_age=max_age,
        path=site.cookie_path(segment(request)),
        httponly=True,
        samesite="strict",
        secure=site.secure(request),
    )


def forget_cookie(request: Request, response: Response, name: str) -> None:
    site = site_of(request)
    response.delete_cookie(
        site.cookie(name),
        path=site.cookie_path(segment(request)),
        httponly=True,
        samesite="strict",
        secure=site.secure(request),
    )


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    if "segment" not in request.path_params:  # a page outside the segment (the OAuth landing) never names it
        return outside_page("error.html", status=status, title=REASONS.get(status, "Error"), message=message)
    if getattr(request.state, "session", None) is None:
        try:
            request.state.session = current_session(request)
        except Exception:  # the page of an error must not fail on the session
            request.state.session = None
    return page(request, "error.html", status=status, title=REASONS.get(status, "Error"), message=message)


_NEXT = re.compile(r"[A-Za-z0-9._~/%?=&+-]*")


def sign_in_url(request: Request) -> str:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if request.method != "GET" or not safe_next(request, target):
        return url(request, "sign-in")
    return url(request, "sign-in") + "?next=" + quote(target, safe="")


def safe_next(request: Request, target: str | None) -> bool:
    """A place to go after sign-in: a settings page at this address, never another host."""
    root = url(request)
    if not target or not target.startswith(root) or _NEXT.fullmatch(target[len(root) :]) is None:
        return False
    if "//" in target or target.startswith(url(request, "sign-")):
        return False
    return not {".", ".."} & set(target.split("?")[0].split("/"))


def settings_router() -> APIRouter:
    """The router of a group of settings pages: each route under ``PREFIX`` (the segment checked
    by ``WebRoute`` before anything runs), kept out of the OpenAPI document. Declare a route as
    ``@router.get("/approvals")``; link to it with ``url(request, "approvals")``."""
    return APIRouter(prefix=PREFIX, route_class=WebRoute, include_in_schema=False)


def _names_the_segment(request: Request) -> bool:
    given = request.path_params.get("segment")
    try:
        known = segment(request)
    except EsfisError as exc:  # a damaged web-path.key: no page can be reached until it is fixed
        log.error("the settings pages' address: %s", exc.message)
        return False
    return isinstance(given, str) and hmac.compare_digest(given.encode(), known.encode())


class WebRoute(APIRoute):
    """Every error of a Settings route becomes a page (or, without a session, a redirect)."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()
        under_segment = "{segment}" in self.path

        async def guarded(request: Request) -> Response:
            try:
                if under_segment and not _names_the_segment(request):
                    raise ElsewhereRequired()
                return await handler(request)
            except ElsewhereRequired:
                return elsewhere_page(request)
            except SignInRequired:
                return RedirectResponse(sign_in_url(request), status_code=303, headers=HEADERS)
            except WebError as exc:
                return error_page(request, exc.status, exc.message)
            except EsfisError as exc:
                if exc.status >= 500:
                    log.error("%s %s: %s", request.method, request.url.path, exc.message)
                return error_page(request, exc.status, exc.message)
            except RequestValidationError:
                return error_page(request, 422, "this page was asked for with a value it does not take")
            except HTTPException as exc:
                return error_page(request, exc.status_code, str(exc.detail))
            except Exception:
                log.exception("unexpected error on %s %s", request.method, request.url.path)
                return error_page(request, 500, "internal error; the server log has the details")

        return guarded


def int_param(request: Request, name: str, default: int) -> int:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    if not value.isdigit() or len(value) > 9:
        raise WebError(422, f"{name} must be a whole number")
    return int(value)


def text_param(request: Request, name: str) -> str | None:
    value = request.query_params.get(name, "").strip()
    return value or None
