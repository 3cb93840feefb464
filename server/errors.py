"""The product's one error tree. Each class carries its code, HTTP status and CLI exit code;
every interface maps errors in one place (``cli.main``, ``http.errors``, ``mcp``).

    EsfisError                      code            status  (exit: 2 invalid, 3 not found, 4 refused, 5 conflict, else 1)
    ├── InvalidInput                invalid_input   422   a field is wrong (names the field)
    │   ├── InvalidSpaceName        invalid_space   422   states the naming rule
    │   ├── InvalidMemoryId         invalid_id      422
    │   ├── TextTooLong             too_long        422
    │   ├── BadImportLine           bad_line        422
    │   ├── BackupDamaged           backup_damaged  422   a backup folder a restore cannot load: a part missing,
    │   │                                                 unreadable or not what its manifest says
    │   └── BadRequest              bad_request     400   a request's framing: a header given twice, a
    │                                                     header no longer taken
    ├── NotFound                    not_found       404
    │   ├── MemoryNotFound          not_found       404   identical for missing and unseen ids
    │   ├── SpaceNotFound           space_not_found 404
    │   ├── DeliveryNotFound        not_found       404
    │   ├── RuleNotFound            not_found       404
    │   ├── GrantNotFound           not_found       404
    │   ├── RunNotFound             not_found       404
    │   ├── ApprovalNotFound        not_found       404   identical for unknown ids and another run's
    │   └── ContextNotFound         not_found       404   identical for unknown and malformed refs
    ├── Forbidden                   forbidden       403
    │   ├── PolicyDenied            policy_denied   403   says nothing about other spaces
    │   ├── OutOfReach              out_of_reach    403
    │   ├── DataBarrier             data_barrier    403   names the rule, the carried label, the target
    │   ├── UntrustedSource         untrusted_source 403  forget from a run carrying untrusted content
    │   ├── RunEnded                run_ended       403   the run was ended (an operator) or expired
    │   └── BackupNotTrusted        backup_untrusted 403  a backup whose manifest's MAC the key does not verify
    ├── Unauthorized                unauthorized    401
    ├── Conflict                    conflict        409
    │   ├── AlreadySuperseded       superseded      409
    │   ├── SpaceNotEmpty           space_not_empty 409
    │   ├── SpaceExists             space_exists    409
    │   ├── ApprovalPending         approval_pending 409  the run already holds a call for a person
    │   ├── ApprovalDecided         approval_decided 409  decided already (or expired, void, withdrawn)
    │   ├── FolderNotEmpty          folder_not_empty 409  a backup's target holds what no backup of esfis made,
    │   │                                                 or a complete backup
    │   └── BackupUnderWay          backup_under_way 409  another backup is writing into that folder
    ├── PayloadTooLarge             too_large       413
    ├── TooManyRequests             too_many_requests 429 a token's calls in flight over its share
    ├── DiskFull                    disk_full       507   no room under ESFIS_HOME (or its reserve reached): nothing
    │                                                     was written; reads go on; writes work again once there is room
    ├── Unavailable                 unavailable     503   come back later (Retry-After): nothing was written
    │   ├── CatalogUnavailable      catalog_unavailable 503  the catalog cannot be reached (PostgreSQL down,
    │   │                                                 restarting, failing over)
    │   └── StorageFailed           storage_failed  503   the disk or the object store failed a read or write (EIO)
    ├── NotServed                   not_served      503   this server does not serve that here (/mcp with several workers)
    └── StoreUnavailable            store_error     500   model or store cannot be used

Errors with a ``retry_after`` (seconds) tell a caller when to come back: HTTP sends it as
``Retry-After``. ``server.faults`` turns what the disk, the object store and the catalog raise
(an ``OSError``, SQLite's, psycopg's) into the leaves above; every interface maps through it.
"""

from __future__ import annotations


class EsfisError(Exception):
    """Base of every error esfis raises on purpose."""

    code = "error"
    status = 500
    exit_code = 1  # the CLI's exit status
    retry_after: int | None = None  # seconds a caller should wait before trying again

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidInput(EsfisError):
    code = "invalid_input"
    status = 422
    exit_code = 2


class InvalidSpaceName(InvalidInput):
    code = "invalid_space"


class InvalidMemoryId(InvalidInput):
    code = "invalid_id"


class TextTooLong(InvalidInput):
    code = "too_long"


class BadImportLine(InvalidInput):
    code = "bad_line"


class BackupDamaged(InvalidInput):
    """The folder named is not a backup a restore can load: says which part, and that it is damaged."""

    code = "backup_damaged"


class BadRequest(InvalidInput):
    code = "bad_request"
    status = 400


class NotFound(EsfisError):
    code = "not_found"
    status = 404
    exit_code = 3


class MemoryNotFound(NotFound):
    """Raised alike for an id that never existed, was forgotten, or is out of the caller's sight."""


class SpaceNotFound(NotFound):
    code = "space_not_found"


class DeliveryNotFound(NotFound):
    pass


class RuleNotFound(NotFound):
    """``policy clear`` named a rule that is not there."""


class GrantNotFound(NotFound):
    pass


class RunNotFound(NotFound):
    pass


class ApprovalNotFound(NotFound):
    """Raised alike for an id that never existed and for another run's approval."""


class ContextNotFound(NotFound):
    pass


class Forbidden(EsfisError):
    code = "forbidden"
    status = 403
    exit_code = 4


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
    """The manifest does not verify with the key given (changed since, or keyed with another key),
    or carries no MAC at all: restored only with the operator's ``--no-key``."""

    code = "backup_untrusted"


class Unauthorized(EsfisError):
    code = "unauthorized"
    status = 401
    exit_code = 4


# Every failure to authenticate answers this one message: a caller learns nothing from the difference.
UNAUTHORIZED_MESSAGE = "a valid bearer token is required (esfis token create)"


class Conflict(EsfisError):
    code = "conflict"
    status = 409
    exit_code = 5


class AlreadySuperseded(Conflict):
    code = "superseded"


class SpaceNotEmpty(Conflict):
    code = "space_not_empty"


class SpaceExists(Conflict):
    code = "space_exists"


class ApprovalPending(Conflict):
    """A run holds at most one call waiting for a person (``server.barrier.approvals``)."""

    code = "approval_pending"


class ApprovalDecided(Conflict):
    code = "approval_decided"


class FolderNotEmpty(Conflict):
    """A backup touches only what it made: a folder holding anything else is refused."""

    code = "folder_not_empty"


class BackupUnderWay(Conflict):
    code = "backup_under_way"


class PayloadTooLarge(EsfisError):
    code = "too_large"
    status = 413


class TooManyRequests(EsfisError):
    """Over a share the server keeps for every caller; ``retry_after`` in seconds."""

    code = "too_many_requests"
    status = 429
    retry_after = 1


class DiskFull(EsfisError):
    """The volume under ESFIS_HOME (or the catalog's) has no room left for a write: it was
    refused whole, and nothing of it stays. Reads go on; writes work again once there is room."""

    code = "disk_full"
    status = 507
    retry_after = 30


class Unavailable(EsfisError):
    """Something esfis stands on is down for now; the call changed nothing and can be sent again."""

    code = "unavailable"
    status = 503
    retry_after = 2


class CatalogUnavailable(Unavailable):
    code = "catalog_unavailable"


class StorageFailed(Unavailable):
    code = "storage_failed"
    retry_after = 5


class NotInstalled(Unavailable):
    """A part of esfis this server loads at its first use (the MCP SDK, for ``/mcp`` and OAuth)
    failed to load: the install is broken or partial. The call changed nothing; the server's log
    names what failed, and the part is loaded again at the next call."""

    code = "not_installed"
    retry_after = 30


class NotServed(EsfisError):
    code = "not_served"
    status = 503


class StoreUnavailable(EsfisError):
    code = "store_error"
    status = 500
