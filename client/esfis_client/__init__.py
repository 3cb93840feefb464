"""esfis's Python client: ``Esfis`` (blocking) and ``AsyncEsfis``, typed results, esfis's error
codes as exceptions, held calls as values to wait on. ``esfis_client.langgraph.EsfisStore`` is
LangGraph's ``BaseStore`` over it (``pip install esfis-client[langgraph]``).

Depends on httpx and pydantic only; imports nothing of the server."""

from esfis_client.aio import AsyncEsfis, AsyncHeld
from esfis_client.client import Esfis, Held
from esfis_client.errors import (
    AlreadySuperseded,
    ApprovalDecided,
    ApprovalPending,
    BadRequest,
    Conflict,
    ConnectionFailed,
    DataBarrier,
    EsfisError,
    Forbidden,
    HeldForApproval,
    InvalidInput,
    InvalidMemoryId,
    InvalidSpaceName,
    NotFound,
    NotServed,
    OutOfReach,
    PayloadTooLarge,
    PolicyDenied,
    RunEnded,
    SpaceNotFound,
    StoreUnavailable,
    TextTooLong,
    TooManyRequests,
    Unauthorized,
    UntrustedSource,
)
from esfis_client.models import (
    Approval,
    BackupReport,
    Context,
    ImportReport,
    Labels,
    LineError,
    Memory,
    Recalled,
    Reference,
    RunToken,
)
from esfis_client.retrying import NO_RETRIES, Retries

__version__ = "0.1.0"

__all__ = [
    "AlreadySuperseded",
    "Approval",
    "ApprovalDecided",
    "ApprovalPending",
    "AsyncEsfis",
    "AsyncHeld",
    "BackupReport",
    "BadRequest",
    "ConnectionFailed",
    "Conflict",
    "Context",
    "DataBarrier",
    "Esfis",
    "EsfisError",
    "Forbidden",
    "Held",
    "HeldForApproval",
    "ImportReport",
    "InvalidInput",
    "InvalidMemoryId",
    "InvalidSpaceName",
    "Labels",
    "LineError",
    "Memory",
    "NO_RETRIES",
    "NotFound",
    "NotServed",
    "OutOfReach",
    "PayloadTooLarge",
    "PolicyDenied",
    "Recalled",
    "Reference",
    "Retries",
    "RunEnded",
    "RunToken",
    "SpaceNotFound",
    "StoreUnavailable",
    "TextTooLong",
    "TooManyRequests",
    "Unauthorized",
    "UntrustedSource",
]
