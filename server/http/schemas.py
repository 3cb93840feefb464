"""Pydantic models at the HTTP edge: request bodies (unknown fields refused, JSON types strict),
as the OpenAPI document shows them; the answers' shapes are ``server.shapes``'. The core checks the values
themselves (space names, text limits, times); these models check types only, plus what the
core cannot see (text that is not UTF-8, a ``cwd`` that is not an absolute path). Each field's
description and bounds are the core's (``server.inputs``), as MCP's and the CLI's are."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from server import inputs
from server.models import DEFAULT_LIMIT, MAX_LIMIT


def _utf8(value: str) -> str:
    # JSON may carry lone surrogates ("\ud800"); they cannot be stored or embedded.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return value


def _absolute_path(value: str) -> str:
    if not value.startswith("/") or "\x00" in value or len(value) > inputs.MAX_PATH_CHARS:
        raise ValueError(
            f"must be an absolute path on the server's machine, at most {inputs.MAX_PATH_CHARS} characters"
        )
    return value


Text = Annotated[str, AfterValidator(_utf8)]
Cwd = Annotated[str, AfterValidator(_utf8), AfterValidator(_absolute_path)]


class _In(BaseModel):
    # Strict: JSON types as declared, nothing coerced ("7" or true is not a limit, "yes" not a flag).
    model_config = ConfigDict(extra="forbid", strict=True)


class RememberIn(_In):
    text: Text = Field(description=inputs.TEXT)
    personal: bool = Field(False, description=inputs.PERSONAL)
    valid_until: Text | None = Field(None, description=inputs.VALID_UNTIL)
    labels: list[Text] | None = Field(None, description=inputs.LABELS)
    dedupe: bool = Field(True, description=inputs.DEDUPE)
    data: dict[str, Any] | None = Field(None, description=inputs.DATA)
    space: Text | None = Field(None, description=inputs.SPACE)
    cwd: Cwd | None = Field(None, description=inputs.CWD)


class RecallIn(_In):
    query: Text | None = Field(None, description=inputs.QUERY + "; may be left out when a filter is given")
    limit: int = Field(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description=inputs.LIMIT)
    as_of: Text | None = Field(None, description=inputs.AS_OF)
    filter: dict[str, Any] | None = Field(None, description=inputs.FILTER)
    space: Text | None = Field(None, description=inputs.SPACE)
    cwd: Cwd | None = Field(None, description=inputs.CWD)


class ReplaceIn(_In):
    text: Text = Field(description=inputs.NEW_TEXT)
    new_space: Text | None = Field(None, description=inputs.NEW_SPACE)
    data: dict[str, Any] | None = Field(None, description=inputs.REPLACE_DATA)
    space: Text | None = Field(None, description=inputs.SPACE)
    cwd: Cwd | None = Field(None, description=inputs.CWD)


class ContextIn(_In):
    memory_ids: list[Text] = Field(description=inputs.MEMORY_IDS)
    space: Text | None = Field(None, description=inputs.SPACE)
    cwd: Cwd | None = Field(None, description=inputs.CWD)


_WITHIN = "a space the caller reaches: only it and the spaces below it (never personal); absent: all it reads"
_CURSOR = "the previous page's next_cursor; absent: the first page"
_PAGE = "how many on a page, 1 to 200"


class SpaceListIn(BaseModel):
    """``GET /v1/browse/spaces``: a query string's values are text, read as what they say."""

    model_config = ConfigDict(extra="forbid")
    within: Text | None = Field(None, description=_WITHIN)
    cursor: Text | None = Field(None, description=_CURSOR)
    limit: int = Field(50, ge=1, le=200, description=_PAGE)
    space: Text | None = Field(None, description=inputs.SPACE)
    cwd: Cwd | None = Field(None, description=inputs.CWD)


class MemoryListIn(_In):
    within: Text | None = Field(None, description=_WITHIN)
    below: bool = Field(True, description="with within: the spaces below it too (the default)")
    filter: dict[str, Any] | None = Field(None, description=inputs.FILTER)
    cursor: Text | None = Field(None, description=_CURSOR)
    limit: int = Field(50, ge=1, le=200, description=_PAGE)
    space: Text | None = Field(None, description=inputs.SPACE)
    cwd: Cwd | None = Field(None, description=inputs.CWD)


class RunIn(_In):
    space: Text | None = Field(None, description="the run token's scope: the opener's, or a space inside it")
    ttl: int | Text | None = Field(None, description=inputs.TTL)


class GrantIn(_In):
    from_: Text = Field(alias="from", description="the space whose data (and its subtree's) may cross")
    to: Text | None = Field(description="the space it may be written into; null: personal memories")
    ai: Text | None = Field(None, description="only for this AI; null: every AI")
    until: Text | None = Field(None, description=f"{inputs.DURATION}; null: until revoked")


class TrustIn(_In):
    source: Text = Field(description="an origin mark, e.g. source:github")


class BackupIn(_In):
    path: Cwd = Field(description="an absolute folder on the server's machine, absent or empty")


class SpaceIn(_In):
    name: Text = Field(description="1 to 8 segments of [a-z0-9][a-z0-9._-]{0,62} joined by '/'")
    folders: list[Cwd] = Field(default_factory=list, description="folders on the server's machine")


class _MemoryFilter(BaseModel):
    """Which memories the operator means (``GET /v1/memories``, ``POST /v1/forget``)."""

    space: Text | None = Field(None, description="a space; absent or null: personal memories")
    below: bool = Field(False, description="the spaces below it too")
    ai: Text | None = Field(None, description="only those this AI wrote")
    origin: Text | None = Field(None, description="only those with this origin mark (source:slack)")
    since: Text | None = Field(None, description="written at or after: ISO 8601, or a duration ago (7d)")
    before: Text | None = Field(None, description="written before: ISO 8601, or a duration ago")
    state: Literal["current", "superseded", "expired"] | None = Field(None, description="absent: every state")


class MemoryFilterIn(_MemoryFilter):
    # A query string's values are text: "true" and "50" are read as what they say.
    model_config = ConfigDict(extra="forbid")
    cursor: Text | None = Field(None, description="a page's next_cursor")
    limit: int = Field(50, description="memories on a page, 1 to 200")


class DedupeIn(_In):
    space: Text | None = Field(None, description="the space to clean up (never another); null: personal memories")
    dry_run: bool = Field(True, description="true (the default): count the copies, change nothing")


class ForgetWhereIn(_MemoryFilter, _In):
    dry_run: bool = Field(True, description="count only (the default); false forgets for good")
    up_to: int | None = Field(None, ge=0, description="the dry run's up_to: required to forget")


class PolicyIn(_In):
    ai: Text = Field(description="an AI name, or '*' for every AI")
    space: Text | None = Field(None, description="a space (the rule covers its subtree); null: everywhere")
    effect: Literal["allow", "deny"]


# -- answers --------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorOut(BaseModel):
    error: ErrorDetail


# The answers' shapes are defined once, for every interface, in ``server.shapes``.


# Every error an endpoint may answer, for the OpenAPI document.
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": description}
    for status, description in {
        400: "a header given twice, or X-Esfis-Run (not taken)",
        401: "missing or invalid token",
        403: "denied by policy, out of the token's reach, or refused by the data barrier",
        404: "not found (alike for ids that never existed and ids the caller cannot see)",
        409: "conflict",
        413: "body over the limit",
        422: "an invalid field (named in the message)",
    }.items()
}
