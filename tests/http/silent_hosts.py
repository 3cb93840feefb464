"""MCP hosts whose user never answers: ``python silent_hosts.py URL TEXT TOKEN…``. Each token
connects over streamable HTTP, recalls (so its run carries the platform's data) and calls
``remember(personal=true)``; were the host asked, it would show the prompt and wait for ever.
Prints ``asked N`` once every host has been asked, or ``held N`` once every call came back held
for the operator (over HTTP, with no session, nobody is asked), then waits until it is killed.
A process of its own, so the test that starts it can kill it, whatever its clients do once the
server is gone."""

from __future__ import annotations

import asyncio
import sys
from contextlib import AsyncExitStack

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult


async def main(url: str, text: str, tokens: list[str]) -> None:
    asked = 0
    never = asyncio.Event()

    async def silent(context, params) -> ElicitResult:
        nonlocal asked
        asked += 1
        if asked == len(tokens):
            print(f"asked {asked}", flush=True)
        await never.wait()
        return ElicitResult(action="decline")

    async with AsyncExitStack() as stack:
        calls = []
        for token in tokens:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=600)
            )
            client = Client(
                streamable_http_client(f"{url}/mcp?space=acme/platform", http_client=http),
                mode="legacy",
                elicitation_callback=silent,
            )
            await stack.enter_async_context(client)
            await client.call_tool("recall", {"query": "staging database password"})
            calls.append(asyncio.create_task(client.call_tool("remember", {"text": text, "personal": True})))
        done, _ = await asyncio.wait(calls, timeout=60)
        held = [c for c in done if (c.result().structured_content or {}).get("approval")]
        if len(held) == len(tokens):
            print(f"held {len(held)}", flush=True)
        await never.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
