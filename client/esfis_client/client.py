"""``Esfis``: the blocking client. Each verb is one call of ``calls``, carried out here.

from esfis_client import Esfis
esfis = Esfis("http://127.0.0.1:8765", token, space="acme")
esfis.remember("Acme deploys go through ArgoCD", data={"kind": "decision"})
esfis.recall("how does acme deploy?", filter={"kind": "decision"})
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

import httpx

from esfis_client import calls
from esfis_client.base import Settings, request_options
from esfis_client.calls import Call, HeldAnswer
from esfis_client.errors import ConnectionFailed, HeldForApproval, from_response
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
from esfis_client.retrying import Retries, poll_delays

T = TypeVar("T")


class Held:
    """A call held for a person (HTTP 202): nothing is applied until the operator approves it.
    ``wait`` polls its approval until a person decides or the time runs out."""

    def __init__(self, client: Esfis, answer: HeldAnswer) -> None:
        self._client = client
        self.approval: Approval = answer.approval
        self.message = answer.message

    @property
    def id(self) -> str:
        return self.approval.id

    def check(self) -> Approval:
        self.approval = self._client.check_approval(self.id)
        return self.approval

    def wait(self, timeout: float | None = None) -> Approval:
        """The approval once decided (approved, declined, expired, void, withdrawn), or as it
        stands when ``timeout`` seconds have passed (still ``pending``: never an exception).
        Polls with backoff: 0.1 s, doubling to one look every 5 s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delays = poll_delays()
        while self.check().pending:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            time.sleep(next(delays) if left is None else min(next(delays), left))
        return self.approval

    def withdraw(self) -> None:
        """Take the call back: nothing is applied, and its text leaves the catalog."""
        self._client.withdraw(self.id)

    def __repr__(self) -> str:
        return f"Held({self.approval.action} {self.id}: {self.approval.status})"


class Esfis:
    """A blocking client of one esfis server, acting as the token's AI (or run).

    ``space`` (or ``cwd``) is where its calls stand unless a call names another; none: the
    token's own place (a scoped token stands in its space). ``raise_held=True`` raises
    ``HeldForApproval`` where a call is held, instead of returning a ``Held``. ``retries``: which
    calls are sent again (``esfis_client.retrying``). ``transport``: an httpx transport, for a
    socket or a proxy of your own.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        space: str | None = None,
        cwd: str | None = None,
        timeout: float = 60.0,
        retries: Retries | None = None,
        raise_held: bool = False,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._settings = Settings(
            url, token, space=space, cwd=cwd, timeout=timeout, retries=retries, raise_held=raise_held
        )
        self._transport = transport
        self._http = httpx.Client(**self._settings.http_options(transport))

    # -- memories -------------------------------------------------------------------------

    def remember(
        self,
        text: str,
        *,
        data: Mapping[str, Any] | None = None,
        personal: bool = False,
        valid_until: str | None = None,
        labels: list[str] | None = None,
        space: str | None = None,
        cwd: str | None = None,
    ) -> Memory | Held:
        """Store a memory where the call stands (or personal); ``data``: metadata recall can filter by."""
        place = self._settings.at(space, cwd)
        return self._run(
            calls.remember(text, place, personal=personal, valid_until=valid_until, labels=labels, data=data)
        )

    def recall(
        self,
        query: str | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
        limit: int | None = None,
        space: str | None = None,
        cwd: str | None = None,
    ) -> list[Recalled]:
        """The memories the call reaches that best answer ``query``, best first; with a ``filter``
        and no query, the newest that match. Safe to repeat: retried on 429 and 503."""
        return self._run(calls.recall(query, self._settings.at(space, cwd), limit=limit, filter=filter))

    def get(self, memory_id: str, *, space: str | None = None, cwd: str | None = None) -> Memory:
        return self._run(calls.get(memory_id, self._settings.at(space, cwd)))

    def replace(
        self,
        memory_id: str,
        text: str,
        *,
        data: Mapping[str, Any] | None = None,
        new_space: str | None = None,
        space: str | None = None,
        cwd: str | None = None,
    ) -> Memory | Held:
        """Supersede a memory with a new text (and ``data``: the new version keeps none unless given)."""
        place = self._settings.at(space, cwd)
        return self._run(calls.replace(memory_id, text, place, new_space=new_space, data=data))

    def forget(self, memory_id: str, *, space: str | None = None, cwd: str | None = None) -> Held | None:
        """Forget a memory for good; a ``Held`` when the forget waits for a person."""
        return self._run(calls.forget(memory_id, self._settings.at(space, cwd)))

    # -- what the caller reads, listed ----------------------------------------------------

    def list_spaces(
        self,
        *,
        within: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        space: str | None = None,
        cwd: str | None = None,
    ) -> SpacePage:
        """One page of the spaces the call reads from where it stands (``within``: that space and
        those below it), by name; ``personal`` says whether it reads personal memories. Reads no memory."""
        return self._run(calls.space_page(self._settings.at(space, cwd), within=within, cursor=cursor, limit=limit))

    def spaces(
        self, *, within: str | None = None, page: int = 200, space: str | None = None, cwd: str | None = None
    ) -> Iterator[str]:
        """Every space the call reads, by name, read a page at a time."""
        cursor: str | None = None
        while True:
            found = self.list_spaces(within=within, cursor=cursor, limit=page, space=space, cwd=cwd)
            yield from found.spaces
            if found.next_cursor is None:
                return
            cursor = found.next_cursor

    def list_memories(
        self,
        *,
        within: str | None = None,
        below: bool = True,
        filter: Mapping[str, Any] | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        space: str | None = None,
        cwd: str | None = None,
    ) -> MemoryPage:
        """One page of the current memories the call reads, newest first (``within``: one space,
        and with ``below`` those under it; ``filter``: as recall's). The run reads what it lists,
        as a recall's results: it carries their labels (the data barrier)."""
        place = self._settings.at(space, cwd)
        return self._run(
            calls.listed_memories(place, within=within, below=below, filter=filter, cursor=cursor, limit=limit)
        )

    def memories(
        self,
        *,
        within: str | None = None,
        below: bool = True,
        filter: Mapping[str, Any] | None = None,
        page: int = 200,
        space: str | None = None,
        cwd: str | None = None,
    ) -> Iterator[Memory]:
        """Every current memory the call reads, newest first, read a page at a time (each page
        read by the run, as ``list_memories``)."""
        cursor: str | None = None
        while True:
            found = self.list_memories(
                within=within, below=below, filter=filter, cursor=cursor, limit=page, space=space, cwd=cwd
            )
            yield from found.memories
            if found.next_cursor is None:
                return
            cursor = found.next_cursor

    # -- context by reference -------------------------------------------------------------

    def share(self, memory_ids: Iterable[str], *, space: str | None = None, cwd: str | None = None) -> Reference:
        return self._run(calls.share(memory_ids, self._settings.at(space, cwd)))

    def open_context(self, ref: str, *, space: str | None = None, cwd: str | None = None) -> Context:
        """The memories of a reference; ``DataBarrier`` when this run may not carry their labels."""
        return self._run(calls.open_context(ref, self._settings.at(space, cwd)))

    # -- runs and held calls --------------------------------------------------------------

    def open_run(self, *, space: str | None = None, ttl: int | str | None = None) -> RunToken:
        """A run token for one agent session (POST /v1/runs), in this token's scope or a narrower one."""
        return self._run(calls.open_run(space=space, ttl=ttl))

    def session(self, *, space: str | None = None, ttl: int | str | None = None) -> Esfis:
        """A client holding only a new run token, standing in ``space``: give one to each agent session."""
        run = self.open_run(space=space, ttl=ttl)
        settings = self._settings.for_token(run.token, space)
        return Esfis(
            settings.url,
            settings.token,
            space=space,
            timeout=settings.timeout,
            retries=settings.retries,
            raise_held=settings.raise_held,
            transport=self._transport,
        )

    def check_approval(self, approval_id: str) -> Approval:
        return self._run(calls.check_approval(approval_id, self._settings.place))

    def withdraw(self, approval_id: str) -> None:
        """Withdraw a held call of this run's: nothing is applied."""
        self._run(calls.withdraw(approval_id, self._settings.place))

    # -- the operator's -------------------------------------------------------------------

    def import_memories(
        self, rows: Iterable[Mapping[str, Any] | str | bytes], *, ai: str = "import", create_spaces: bool = False
    ) -> ImportReport:
        """Stream rows (mappings, or JSON Lines as text) to POST /v1/import (an operator token):
        read as they are sent; bad lines come back in the report by number, the rest go in."""
        return self._run(calls.import_lines((calls.jsonl(r) for r in rows), ai=ai, create_spaces=create_spaces))

    def export(
        self,
        *,
        space: str | None = None,
        below: bool = False,
        ai: str | None = None,
        origin: str | None = None,
        since: str | None = None,
        before: str | None = None,
        state: str | None = None,
        page: int = 200,
    ) -> Iterator[Memory]:
        """Every memory the selection names, newest first, read a keyset page at a time from the
        operator's listing (GET /v1/memories, an operator token; no ``space``: personal ones;
        ``below``: the spaces under it too; ``state``: current, superseded or expired). The file
        export with vectors is the CLI's (``esfis export``, on the server's machine)."""
        selection = {"space": space, "below": below, "ai": ai, "origin": origin, "since": since}
        selection |= {"before": before, "state": state}
        cursor: str | None = None
        while True:
            found = self._run(calls.memory_page(selection, cursor, page))
            yield from found.memories
            if found.next_cursor is None:
                return
            cursor = found.next_cursor

    def backup(self, path: str) -> BackupReport:
        """A consistent backup into ``path``, a folder on the server's machine (an operator token)."""
        return self._run(calls.backup(path))

    # -- carrying calls out ---------------------------------------------------------------

    def _run(self, call: Call[T]) -> Any:
        retries = self._settings.attempts(call)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(call.method, call.path, **request_options(call))
            except httpx.TransportError as error:
                wait = retries.after_error(safe=call.safe, attempt=attempt, error=error)
                if wait is None:
                    raise ConnectionFailed(f"{call.method} {call.path}: {error!r}") from error
                time.sleep(wait)
                continue
            if response.is_success:
                return self._result(call.read(response))
            wait = retries.after_answer(safe=call.safe, attempt=attempt, response=response)
            if wait is None:
                raise from_response(response)
            time.sleep(wait)

    def _result(self, result: Any) -> Any:
        if not isinstance(result, HeldAnswer):
            return result
        held = Held(self, result)
        if self._settings.raise_held:
            raise HeldForApproval(result.message, held=held)
        return held

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Esfis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Esfis({self._settings.url!r}, space={self._settings.place.space!r})"
