"""esfis's errors as Python exceptions: one class per code the server sends, under one base.

    EsfisError                      code                status
    ├── InvalidInput                invalid_input       422   a field is wrong (the message names it)
    │   ├── InvalidSpaceName        invalid_space       422
    │   ├── InvalidMemoryId         invalid_id          422
    │   ├── TextTooLong             too_long            422
    │   ├── BadImportLine           bad_line            422
    │   ├── BackupDamaged           backup_damaged      422
    │   └── BadRequest              bad_request         400
    ├── NotFound                    not_found           404   alike for ids that never existed and unseen ones
    │   └── SpaceNotFound           space_not_found     404
    ├── Forbidden                   forbidden           403
    │   ├── PolicyDenied            policy_denied       403
    │   ├── OutOfReach              out_of_reach        403
    │   ├── DataBarrier             data_barrier        403   the barrier: names the rule, the label, the target
    │   ├── UntrustedSource         untrusted_source    403
    │   ├── RunEnded                run_ended           403
    │   └── BackupNotTrusted        backup_untrusted    403
    ├── Unauthorized                unauthorized        401
    ├── Conflict                    conflict            409
    │   ├── AlreadySuperseded       superseded          409
    │   ├── SpaceNotEmpty           space_not_empty     409
    │   ├── SpaceExists             space_exists        409
    │   ├── ApprovalPending         approval_pending    409   this run (or token) already holds a call
    │   ├── ApprovalDecided         approval_decided    409
    │   ├── FolderNotEmpty          folder_not_empty    409
    │   └── BackupUnderWay          backup_under_way    409
    ├── MethodNotAllowed            method_not_allowed  405
    ├── PayloadTooLarge             too_large           413
    ├── UnsupportedMediaType        unsupported_media_type 415
    ├── TooManyRequests             too_many_requests   429   ``retry_after``: seconds, from Retry-After
    ├── DiskFull                    disk_full           507   no room on the server's disk: nothing was written;
    │                                                         reads go on; ``retry_after`` from Retry-After
    ├── Unavailable                 unavailable         503   come back later (``retry_after``): nothing was written
    │   ├── CatalogUnavailable      catalog_unavailable 503   the server's catalog cannot be reached now
    │   ├── StorageFailed           storage_failed      503   the server's disk or object store failed (EIO)
    │   └── NotInstalled            not_installed       503   a part of the server failed to load (MCP, OAuth)
    ├── NotServed                   not_served          503
    ├── StoreUnavailable            store_error         500
    ├── InternalError               internal            500
    ├── HeldForApproval             (client)                  a held call, raised only when asked (``raise_held``)
    └── ConnectionFailed            (client)                  the server could not be reached or answered no HTTP

Every server error body is ``{"error": {"code": …, "message": …}}``; ``from_response`` picks the
class by code, and for a code this client does not know yet, the nearest class by status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx


class EsfisError(Exception):
    """Base of every error this client raises: ``code`` and ``status`` as the server sent them."""

    code = "error"
    status = 500

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status


class InvalidInput(EsfisError, ValueError):
    code, status = "invalid_input", 422


class InvalidSpaceName(InvalidInput):
    code = "invalid_space"


class InvalidMemoryId(InvalidInput):
    code = "invalid_id"


class TextTooLong(InvalidInput):
    code = "too_long"


class BadImportLine(InvalidInput):
    code = "bad_line"


class BackupDamaged(InvalidInput):
    code = "backup_damaged"


class BadRequest(InvalidInput):
    code, status = "bad_request", 400


class NotFound(EsfisError, LookupError):
    code, status = "not_found", 404


class SpaceNotFound(NotFound):
    code = "space_not_found"


class Forbidden(EsfisError):
    code, status = "forbidden", 403


class PolicyDenied(Forbidden):
    code = "policy_denied"


class OutOfReach(Forbidden):
    code = "out_of_reach"


class DataBarrier(Forbidden):
    """Data would cross a boundary esfis has no authority to cross: not a policy to edit."""

    code = "data_barrier"


class UntrustedSource(Forbidden):
    code = "untrusted_source"


class RunEnded(Forbidden):
    code = "run_ended"


class BackupNotTrusted(Forbidden):
    code = "backup_untrusted"


class Unauthorized(EsfisError):
    code, status = "unauthorized", 401


class Conflict(EsfisError):
    code, status = "conflict", 409


class AlreadySuperseded(Conflict):
    code = "superseded"


class SpaceNotEmpty(Conflict):
    code = "space_not_empty"


class SpaceExists(Conflict):
    code = "space_exists"


class ApprovalPending(Conflict):
    """One held call at a time: the run (or its token) already holds one waiting for a person."""

    code = "approval_pending"


class ApprovalDecided(Conflict):
    code = "approval_decided"


class FolderNotEmpty(Conflict):
    code = "folder_not_empty"


class BackupUnderWay(Conflict):
    code = "backup_under_way"


class MethodNotAllowed(EsfisError):
    code, status = "method_not_allowed", 405


class PayloadTooLarge(EsfisError):
    code, status = "too_large", 413


class UnsupportedMediaType(EsfisError):
    code, status = "unsupported_media_type", 415


class TooManyRequests(EsfisError):
    """Over a share or a rate limit; ``retry_after`` is the server's Retry-After, in seconds."""

    code, status = "too_many_requests", 429

    def __init__(self, message: str, *, retry_after: float = 1.0, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class _ComeBackLater(EsfisError):
    """An answer that says when to try again: ``retry_after``, the server's Retry-After in seconds."""

    def __init__(self, message: str, *, retry_after: float = 1.0, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class DiskFull(_ComeBackLater):
    """The server's disk has no room for a write: it was refused whole; reads go on."""

    code, status = "disk_full", 507


class Unavailable(_ComeBackLater):
    """Something the server stands on is down for now; the call changed nothing."""

    code, status = "unavailable", 503


class CatalogUnavailable(Unavailable):
    code = "catalog_unavailable"


class StorageFailed(Unavailable):
    code = "storage_failed"


class NotInstalled(Unavailable):
    """A part of the server (``/mcp``, OAuth) failed to load: its install needs repair."""

    code = "not_installed"


class NotServed(EsfisError):
    code, status = "not_served", 503


class StoreUnavailable(EsfisError):
    code, status = "store_error", 500


class InternalError(EsfisError):
    code, status = "internal", 500


class HeldForApproval(EsfisError):
    """A call held for a person (HTTP 202), raised only by a client made with ``raise_held=True``;
    ``held`` is the value the call would have returned (wait on it, or withdraw it)."""

    code, status = "held", 202

    def __init__(self, message: str, *, held: Any) -> None:
        super().__init__(message)
        self.held = held


class ConnectionFailed(EsfisError):
    """The server could not be reached, or the connection broke before an answer."""

    code, status = "connection_failed", 0


def _leaves() -> dict[str, type[EsfisError]]:
    found: dict[str, type[EsfisError]] = {}
    stack: list[type[EsfisError]] = [EsfisError]
    while stack:
        cls = stack.pop()
        if not cls.__name__.startswith("_"):
            found.setdefault(cls.code, cls)
        stack.extend(cls.__subclasses__())
    return found


BY_CODE: dict[str, type[EsfisError]] = _leaves()
# A code this client does not know (a newer server's) still lands in its family.
BY_STATUS: dict[int, type[EsfisError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    422: InvalidInput,
    429: TooManyRequests,
    503: Unavailable,
    507: DiskFull,
}


def retry_after(response: httpx.Response) -> float:
    """The Retry-After header in seconds (its date form is not sent by esfis); 1 when absent."""
    try:
        return max(0.0, float(response.headers.get("Retry-After", "1")))
    except ValueError:
        return 1.0


def from_response(response: httpx.Response) -> EsfisError:
    """The exception for an error answer: by its code, else by its status."""
    code, message = None, response.reason_phrase or f"HTTP {response.status_code}"
    try:
        body = response.json()
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            code, message = error.get("code"), str(error.get("message", message))
    except ValueError:
        pass  # a proxy's HTML page: the status decides
    cls = BY_CODE.get(code or "") or BY_STATUS.get(response.status_code)
    if cls is None:
        cls = InternalError if response.status_code >= 500 else EsfisError
    kwargs: dict[str, Any] = {"code": code or cls.code, "status": response.status_code}
    if issubclass(cls, (TooManyRequests, _ComeBackLater)):
        return cls(message, retry_after=retry_after(response), **kwargs)
    return cls(message, **kwargs)
