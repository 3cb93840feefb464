"""Tokens: the list (ids and who each acts as, never a secret), a new token (its secret shown
once, on the answer to the form, never in a URL or a cookie), and revoking one — which ends
at the next request what it could do, the web sessions of an operator token included.

An operator token outlives any session and can do everything, so the session alone does not
make one: the form asks again for the operator token this session signed in with (a password
field), and it must name that very token (ids compared in constant time). Whoever holds only a
session's cookie and its CSRF field cannot type it.
"""

from __future__ import annotations

import hmac

from fastapi import Depends, Request
from fastapi.responses import Response

from server.errors import EsfisError, Forbidden, Unauthorized
from server.web.operators import counted_sign_in
from server.web.pages import (
    Posted,
    current_session,
    operator,
    operator_of,
    page,
    posted,
    redirect,
    service_of,
    settings_router,
    url,
)

router = settings_router()


def _tokens_page(
    request: Request,
    *,
    status: int = 200,
    error: str | None = None,
    form: dict | None = None,
    created=None,
    secret: str | None = None,
):
    service = service_of(request)
    tokens = sorted(service.operator.tokens(), key=lambda t: (not t.active, -t.created_at.timestamp()))
    return page(
        request,
        "tokens.html",
        status=status,
        error=error,
        section="tokens",
        tokens=tokens,
        spaces=[s.name for s in service.operator.spaces()],
        ais=service.operator.known_ais(),
        form=form or {},
        created=created,
        secret=secret,
        mine=request.state.session.token_id,
    )


@router.get("/tokens")
def tokens(request: Request, _=Depends(operator)) -> Response:
    return _tokens_page(request)


RETYPE = "to make an operator token, type the operator token you signed in with under “your operator token”"


def _retyped(request: Request, done: Posted) -> bool:
    """Whether the form's ``confirm`` field is the active operator token of this session."""
    try:
        token = counted_sign_in(request, done.form.get("confirm", "").strip())
    except (Unauthorized, Forbidden):
        return False
    return hmac.compare_digest(token.id.encode(), done.session.token_id.encode())


@router.post("/tokens")
def create(request: Request, done: Posted = Depends(posted)) -> Response:
    operator_token = done.field("kind") == "operator"
    kept = {k: v for k, v in done.form.items() if k != "confirm"}  # what was typed is never shown back
    if operator_token and not _retyped(request, done):
        return _tokens_page(request, status=403, error=RETYPE, form=kept)
    try:
        token, secret = operator_of(request).create_token(
            ai=None if operator_token else done.field("ai"),
            space=None if operator_token else done.optional("space"),
            operator=operator_token,
        )
    except EsfisError as exc:
        return _tokens_page(request, status=exc.status, error=exc.message, form=kept)
    # The answer to this POST is the one place the secret is ever shown (no-store, no redirect).
    return _tokens_page(request, created=token, secret=secret)


@router.post("/tokens/revoke")
def revoke(request: Request, done: Posted = Depends(posted)) -> Response:
    try:
        token = operator_of(request).revoke_token(done.field("id"))
    except EsfisError as exc:
        return _tokens_page(request, status=exc.status, error=exc.message)
    if current_session(request) is None:  # the operator revoked the token of this very session
        return redirect(request, url(request, "sign-in"), f"token {token.id} revoked; it signed this session in")
    return redirect(request, url(request, "tokens"), f"token {token.id} revoked")
