"""Each verb once, as data: the request it sends, whether it is safe to send again, and how its
answer reads. ``Esfis`` and ``AsyncEsfis`` only carry calls out, so the two never disagree on a
path, a body or a result (the sync and async clients differ in how they wait, nothing else).

Which calls may be sent again (``safe``): reads (get, recall, the listings, open_context, an approval's check),
where a second answer is as good as the first. A write (remember, replace, forget, share, a run
token, an import, a backup) is sent once: esfis has no idempotency key, so a write repeated after
an answer was lost could be applied twice; only a connection that was never made is tried again
(``retrying.Retries``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from esfis_client.models import (
    Approval,
    BackupReport,
    Context,
    ImportReport,
    Memory,
    MemoryPage,
    Recalled,
    Reference,
    RunToken,
    SpacePage,
)

T = TypeVar("T")


@dataclass(frozen=True)
class HeldAnswer:
    """A 202: the call is held for a person; the client turns it into a ``Held`` it can wait on."""

    approval: Approval
    message: str


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[httpx.Response], T]
    safe: bool = False
    json: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    content: Iterable[bytes] | AsyncIterable[bytes] | None = None
    headers: dict[str, str] | None = None


@dataclass(frozen=True)
class Place:
    """Where the caller stands: a space, or a working directory on the server's machine, else the
    token's own (a scoped token stands in its space; an unscoped one in none: personal only)."""

    space: str | None = None
    cwd: str | None = None

    def fields(self) -> dict[str, str]:
        return {k: v for k, v in (("space", self.space), ("cwd", self.cwd)) if v is not None}


def _segment(value: str) -> str:
    return quote(value, safe="")


M = TypeVar("M", bound=BaseModel)


def _held_or(model: type[M]) -> Callable[[httpx.Response], M | HeldAnswer]:
    def read(response: httpx.Response) -> M | HeldAnswer:
        body = response.json()
        if response.status_code == 202:
            return HeldAnswer(Approval.model_validate(body["approval"]), str(body.get("message", "")))
        return model.model_validate(body)

    return read


def _recalled(response: httpx.Response) -> list[Recalled]:
    return [Recalled.model_validate(m) for m in response.json()["memories"]]


def _nothing_or_held(response: httpx.Response) -> HeldAnswer | None:
    return None if response.status_code == 204 else _held_or(Memory)(response)  # type: ignore[return-value]


def _none(response: httpx.Response) -> None:
    return None


def remember(
    text: str,
    place: Place,
    *,
    personal: bool = False,
    valid_until: str | None = None,
    labels: list[str] | None = None,
    data: Mapping[str, Any] | None = None,
) -> Call[Memory | HeldAnswer]:
    body: dict[str, Any] = {"text": text, **place.fields()}
    if personal:
        body["personal"] = True
    if valid_until is not None:
        body["valid_until"] = valid_until
    if labels is not None:
        body["labels"] = list(labels)
    if data is not None:  # sent only when given: a server older than metadata refuses the field
        body["data"] = dict(data)
    return Call("POST", "/v1/memories", _held_or(Memory), json=body)


def recall(
    query: str | None, place: Place, *, limit: int | None = None, filter: Mapping[str, Any] | None = None
) -> Call[list[Recalled]]:
    body: dict[str, Any] = {**place.fields()}
    if query is not None:
        body["query"] = query
    if limit is not None:
        body["limit"] = limit
    if filter is not None:
        body["filter"] = dict(filter)
    return Call("POST", "/v1/recall", _recalled, safe=True, json=body)


def get(memory_id: str, place: Place) -> Call[Memory]:
    return Call(
        "GET",
        f"/v1/memories/{_segment(memory_id)}",
        lambda r: Memory.model_validate(r.json()),
        True,
        params=place.fields(),
    )


def replace(
    memory_id: str,
    text: str,
    place: Place,
    *,
    new_space: str | None = None,
    data: Mapping[str, Any] | None = None,
) -> Call[Memory | HeldAnswer]:
    body: dict[str, Any] = {"text": text, **place.fields()}
    if new_space is not None:
        body["new_space"] = new_space
    if data is not None:
        body["data"] = dict(data)
    return Call("POST", f"/v1/memories/{_segment(memory_id)}/replace", _held_or(Memory), json=body)


def forget(memory_id: str, place: Place) -> Call[HeldAnswer | None]:
    return Call("DELETE", f"/v1/memories/{_segment(memory_id)}", _nothing_or_held, params=place.fields())


def withdraw(approval_id: str, place: Place) -> Call[None]:
    """A held call of this run's, withdrawn: esfis takes an approval's id where forget takes a memory's."""
    return Call("DELETE", f"/v1/memories/{_segment(approval_id)}", _none, params=place.fields())


def check_approval(approval_id: str, place: Place) -> Call[Approval]:
    path = f"/v1/approvals/{_segment(approval_id)}"
    return Call("GET", path, lambda r: Approval.model_validate(r.json()), True, params=place.fields())


def share(memory_ids: Iterable[str], place: Place) -> Call[Reference]:
    body = {"memory_ids": list(memory_ids), **place.fields()}
    return Call("POST", "/v1/context", lambda r: Reference.model_validate(r.json()), json=body)


def open_context(ref: str, place: Place) -> Call[Context]:
    path = f"/v1/context/{_segment(ref)}"
    return Call("GET", path, lambda r: Context.model_validate(r.json()), True, params=place.fields())


def space_page(
    place: Place, *, within: str | None = None, cursor: str | None = None, limit: int | None = None
) -> Call[SpacePage]:
    """One page of the spaces the caller reads (GET /v1/browse/spaces): a read."""
    chosen = (("within", within), ("cursor", cursor), ("limit", limit))
    params = {**place.fields(), **{k: v for k, v in chosen if v is not None}}
    return Call("GET", "/v1/browse/spaces", lambda r: SpacePage.model_validate(r.json()), True, params=params)


def listed_memories(
    place: Place,
    *,
    within: str | None = None,
    below: bool = True,
    filter: Mapping[str, Any] | None = None,
    cursor: str | None = None,
    limit: int | None = None,
) -> Call[MemoryPage]:
    """One page of the memories the caller reads (POST /v1/browse/memories), newest first: a read
    (the run reads what it lists, as a recall's results; a second answer is as good as the first)."""
    body: dict[str, Any] = {**place.fields()}
    for name, value in (("within", within), ("cursor", cursor), ("limit", limit)):
        if value is not None:
            body[name] = value
    if not below:
        body["below"] = False
    if filter is not None:
        body["filter"] = dict(filter)
    return Call("POST", "/v1/browse/memories", lambda r: MemoryPage.model_validate(r.json()), True, json=body)


def open_run(*, space: str | None = None, ttl: int | str | None = None) -> Call[RunToken]:
    body = {k: v for k, v in (("space", space), ("ttl", ttl)) if v is not None}
    return Call("POST", "/v1/runs", lambda r: RunToken.model_validate(r.json()), json=body)


def import_lines(
    lines: Iterable[bytes] | AsyncIterable[bytes], *, ai: str = "import", create_spaces: bool = False
) -> Call[ImportReport]:
    params: dict[str, Any] = {"ai": ai}
    if create_spaces:
        params["create_spaces"] = "true"
    return Call(
        "POST",
        "/v1/import",
        lambda r: ImportReport.model_validate(r.json()),
        params=params,
        content=lines,
        headers={"Content-Type": "application/x-ndjson"},
    )


@dataclass(frozen=True)
class Page:
    memories: list[Memory]
    next_cursor: str | None


def _page(response: httpx.Response) -> Page:
    body = response.json()
    return Page([Memory.model_validate(m) for m in body["memories"]], body.get("next_cursor"))


def memory_page(selection: Mapping[str, Any], cursor: str | None, limit: int) -> Call[Page]:
    """One keyset page of the operator's listing (GET /v1/memories), newest first: a read."""
    params: dict[str, Any] = {k: v for k, v in selection.items() if v is not None and v is not False}
    params = {k: ("true" if v is True else v) for k, v in params.items()}
    params["limit"] = limit
    if cursor is not None:
        params["cursor"] = cursor
    return Call("GET", "/v1/memories", _page, True, params=params)


def backup(path: str) -> Call[BackupReport]:
    return Call("POST", "/v1/backup", lambda r: BackupReport.model_validate(r.json()), json={"path": path})


def jsonl(row: Mapping[str, Any] | str | bytes) -> bytes:
    """One import row as a JSON Lines line: a mapping is encoded, a string or bytes sent as it is
    (so a bad line reaches the server and comes back in the report with its number)."""
    if isinstance(row, bytes):
        line = row
    elif isinstance(row, str):
        line = row.encode("utf-8")
    else:
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return line.rstrip(b"\r\n").replace(b"\n", b" ") + b"\n"
