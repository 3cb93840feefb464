"""``AsyncEsfis``: the same verbs as ``Esfis``, awaited. Requests, answers and the retry rule are
``calls``' and ``retrying``'; only the waiting differs (``asyncio.sleep``, ``httpx.AsyncClient``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
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
Row = Mapping[str, Any] | str | bytes


class AsyncHeld:
    """``Held``, awaited: ``await held.wait(timeout=…)``."""

    def __init__(self, client: AsyncEsfis, answer: HeldAnswer) -> None:
        self._client = client
        self.approval: Approval = answer.approval
        self.message = answer.message

    @property
    def id(self) -> str:
        return self.approval.id

    async def check(self) -> Approval:
        self.approval = await self._client.check_approval(self.id)
        return self.approval

    async def wait(self, timeout: float | None = None) -> Approval:
        """As ``Held.wait``: the decided approval, or the pending one when the time is up."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delays = poll_delays()
        while (await self.check()).pending:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            await asyncio.sleep(next(delays) if left is None else min(next(delays), left))
        return self.approval

    async def withdraw(self) -> None:
        await self._client.withdraw(self.id)

    def __repr__(self) -> str:
        return f"AsyncHeld({self.approval.action} {self.id}: {self.approval.status})"


class AsyncEsfis:
    """``Esfis`` for asyncio: every verb is a coroutine; the arguments and results are the same."""

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
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._settings = Settings(
            url, token, space=space, cwd=cwd, timeout=timeout, retries=retries, raise_held=raise_held
        )
        self._transport = transport
        self._http = httpx.AsyncClient(**self._settings.http_options(transport))

    async def remember(
        self,
        text: str,
        *,
        data: Mapping[str, Any] | None = None,
        personal: bool = False,
        valid_until: str | None = None,
        labels: list[str] | None = None,
        space: str | None = None,
        cwd: str | None = None,
    ) -> Memory | AsyncHeld:
        place = self._settings.at(space, cwd)
        return await self._run(
            calls.remember(text, place, personal=personal, valid_until=valid_until, labels=labels, data=data)
        )

    async def recall(
        self,
        query: str | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
        limit: int | None = None,
        space: str | None = None,
        cwd: str | None = None,
    ) -> list[Recalled]:
        return await self._run(calls.recall(query, self._settings.at(space, cwd), limit=limit, filter=filter))

    async def get(self, memory_id: str, *, space: str | None = None, cwd: str | None = None) -> Memory:
        return await self._run(calls.get(memory_id, self._settings.at(space, cwd)))

    async def replace(
        self,
        memory_id: str,
        text: str,
        *,
        data: Mapping[str, Any] | None = None,
        new_space: str | None = None,
        space: str | None = None,
        cwd: str | None = None,
    ) -> Memory | AsyncHeld:
        place = self._settings.at(space, cwd)
        return await self._run(calls.replace(memory_id, text, place, new_space=new_space, data=data))

    async def forget(self, memory_id: str, *, space: str | None = None, cwd: str | None = None) -> AsyncHeld | None:
        return await self._run(calls.forget(memory_id, self._settings.at(space, cwd)))

    async def list_spaces(
        self,
        *,
        within: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
        space: str | None = None,
        cwd: str | None = None,
    ) -> SpacePage:
        place = self._settings.at(space, cwd)
        return await self._run(calls.space_page(place, within=within, cursor=cursor, limit=limit))

    async def spaces(
        self, *, within: str | None = None, page: int = 200, space: str | None = None, cwd: str | None = None
    ) -> AsyncIterator[str]:
        """As ``Esfis.spaces``: ``async for name in esfis.spaces()``."""
        cursor: str | None = None
        while True:
            found = await self.list_spaces(within=within, cursor=cursor, limit=page, space=space, cwd=cwd)
            for name in found.spaces:
                yield name
            if found.next_cursor is None:
                return
            cursor = found.next_cursor

    async def list_memories(
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
        place = self._settings.at(space, cwd)
        return await self._run(
            calls.listed_memories(place, within=within, below=below, filter=filter, cursor=cursor, limit=limit)
        )

    async def memories(
        self,
        *,
        within: str | None = None,
        below: bool = True,
        filter: Mapping[str, Any] | None = None,
        page: int = 200,
        space: str | None = None,
        cwd: str | None = None,
    ) -> AsyncIterator[Memory]:
        """As ``Esfis.memories``: ``async for memory in esfis.memories(within="acme")``."""
        cursor: str | None = None
        while True:
            found = await self.list_memories(
                within=within, below=below, filter=filter, cursor=cursor, limit=page, space=space, cwd=cwd
            )
            for memory in found.memories:
                yield memory
            if found.next_cursor is None:
                return
            cursor = found.next_cursor

    async def share(self, memory_ids: Iterable[str], *, space: str | None = None, cwd: str | None = None) -> Reference:
        return await self._run(calls.share(memory_ids, self._settings.at(space, cwd)))

    async def open_context(self, ref: str, *, space: str | None = None, cwd: str | None = None) -> Context:
        return await self._run(calls.open_context(ref, self._settings.at(space, cwd)))

    async def open_run(self, *, space: str | None = None, ttl: int | str | None = None) -> RunToken:
        return await self._run(calls.open_run(space=space, ttl=ttl))

    async def session(self, *, space: str | None = None, ttl: int | str | None = None) -> AsyncEsfis:
        run = await self.open_run(space=space, ttl=ttl)
        settings = self._settings.for_token(run.token, space)
        return AsyncEsfis(
            settings.url,
            settings.token,
            space=space,
            timeout=settings.timeout,
            retries=settings.retries,
            raise_held=settings.raise_held,
            transport=self._transport,
        )

    async def check_approval(self, approval_id: str) -> Approval:
        return await self._run(calls.check_approval(approval_id, self._settings.place))

    async def withdraw(self, approval_id: str) -> None:
        await self._run(calls.withdraw(approval_id, self._settings.place))

    async def import_memories(
        self, rows: Iterable[Row] | AsyncIterable[Row], *, ai: str = "import", create_spaces: bool = False
    ) -> ImportReport:
        return await self._run(calls.import_lines(_lines(rows), ai=ai, create_spaces=create_spaces))

    async def export(
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
    ) -> AsyncIterator[Memory]:
        """As ``Esfis.export``: ``async for memory in esfis.export(space="acme", below=True)``."""
        selection = {"space": space, "below": below, "ai": ai, "origin": origin, "since": since}
        selection |= {"before": before, "state": state}
        cursor: str | None = None
        while True:
            found = await self._run(calls.memory_page(selection, cursor, page))
            for memory in found.memories:
                yield memory
            if found.next_cursor is None:
                return
            cursor = found.next_cursor

    async def backup(self, path: str) -> BackupReport:
        return await self._run(calls.backup(path))

    async def _run(self, call: Call[T]) -> Any:
        retries = self._settings.attempts(call)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(call.method, call.path, **request_options(call))
            except httpx.TransportError as error:
                wait = retries.after_error(safe=call.safe, attempt=attempt, error=error)
                if wait is None:
                    raise ConnectionFailed(f"{call.method} {call.path}: {error!r}") from error
                await asyncio.sleep(wait)
                continue
            if response.is_success:
                return self._result(call.read(response))
            wait = retries.after_answer(safe=call.safe, attempt=attempt, response=response)
            if wait is None:
                raise from_response(response)
            await asyncio.sleep(wait)

    def _result(self, result: Any) -> Any:
        if not isinstance(result, HeldAnswer):
            return result
        held = AsyncHeld(self, result)
        if self._settings.raise_held:
            raise HeldForApproval(result.message, held=held)
        return held

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncEsfis:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _lines(rows: Iterable[Row] | AsyncIterable[Row]) -> AsyncIterator[bytes]:
    if isinstance(rows, AsyncIterable):
        async for row in rows:
            yield calls.jsonl(row)
    else:
        for row in rows:
            yield calls.jsonl(row)
