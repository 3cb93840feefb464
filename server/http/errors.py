"""The one place HTTP answers errors. Every error body has one shape:

    {"error": {"code": "...", "message": "..."}}

Codes and statuses come from the classes in ``server.errors`` (the status lives on the class);
FastAPI's validation errors, unknown routes (404) and wrong methods (405) are mapped into the
same shape; a fault of the disk or the catalog is said as such (``server.faults``: 507
``disk_full``, 503 ``catalog_unavailable`` or ``storage_failed``, with ``Retry-After``), and
anything else unexpected answers 500 ``internal`` without details.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from server.errors import EsfisError, InvalidInput, NotFound, PayloadTooLarge, TooManyRequests, Unauthorized
from server.faults import fault_of
from server.metrics import count_refusal

log = logging.getLogger("esfis.http")

# Statuses Starlette raises on its own (routing, methods), mapped to the product's codes.
_HTTP_CODES: dict[int, str] = {
    401: Unauthorized.code,
    404: NotFound.code,
    405: "method_not_allowed",
    413: PayloadTooLarge.code,
    415: "unsupported_media_type",
    422: InvalidInput.code,
}


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def error_response(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    headers = dict(headers or {})
    if status == 401:
        headers.setdefault("WWW-Authenticate", "Bearer")
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


def from_esfis(exc: EsfisError) -> JSONResponse:
    count_refusal(exc.code)
    if isinstance(exc, TooManyRequests):
        headers = _past_a_limit(exc.retry_after or 1)
    elif exc.retry_after is not None:  # a full disk, a catalog away: when to come back
        headers = {"Retry-After": str(exc.retry_after)}
    else:
        headers = None
    return error_response(exc.status, exc.code, exc.message, headers)


def _past_a_limit(retry_after: int) -> dict[str, str]:
    """A 429's headers: when to come back, and the connection closed. A caller that keeps
    sending past its limit then pays a new connection for each request instead of reusing one:
    a flood over four kept-alive connections sent 3.6 times as many requests, and a good token's
    recalls beside it waited twice as long at p95 (benchmarks/test_hostile_neighbour.py)."""
    return {"Retry-After": str(retry_after), "Connection": "close"}


def _reason(error: dict[str, Any]) -> str:
    kind, loc = error.get("type"), tuple(error.get("loc", ()))
    if kind == "json_invalid":
        detail = (error.get("ctx") or {}).get("error")
        return "the body is not JSON" + (f" ({detail})" if detail else "")
    if loc == ("body",) and kind in ("model_attributes_type", "dict_type"):
        return "the body must be a JSON object, sent with Content-Type: application/json"
    return str(error.get("msg", "invalid"))


def _field(loc: Iterable[Any]) -> str:
    parts = [str(p) for p in loc]
    if len(parts) == 2 and parts[0] == "body" and parts[1].isdigit():  # a JSON error's position
        return "body"
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:] or parts
    return ".".join(parts) or "body"


def validation_message(errors: list[dict[str, Any]]) -> str:
    """Each failing field named, with pydantic's reason; never the rejected input itself. A body
    that is not JSON, or not an object, is said so, not as a field named ``0``."""
    shown = [f"field {_field(e.get('loc', ()))!r}: {_reason(e)}" for e in errors[:5]]
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "invalid " + "; ".join(shown) + more


async def _esfis_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EsfisError)
    if exc.status >= 500:
        log.error("%s %s: %s", request.method, request.url.path, exc.message)
    return from_esfis(exc)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(422, InvalidInput.code, validation_message(list(exc.errors())))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    if status == 400:  # FastAPI's answer to a body it cannot decode (not UTF-8): an invalid field
        return error_response(422, InvalidInput.code, "invalid field 'body': it must be JSON in UTF-8")
    if status == 404:
        message = f"no route {request.method} {request.url.path}"
    elif status == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    return error_response(status, _HTTP_CODES.get(status, "error"), message, exc.headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    fault = fault_of(exc)  # a full disk, a failing one, a catalog gone: never a 500
    if fault is not None:
        log.warning("%s %s: %s (%s)", request.method, request.url.path, fault.message, exc)
        return from_esfis(fault)
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return error_response(500, "internal", "internal error; the server log has the details")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(EsfisError, _esfis_error)
    # What the disk and SQLite raise is answered where esfis errors are (no 500, no re-raise into
    # the server's log as a crash); anything else of theirs is still internal.
    app.add_exception_handler(OSError, _unexpected)
    app.add_exception_handler(sqlite3.Error, _unexpected)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
