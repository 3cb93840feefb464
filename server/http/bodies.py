"""A request's framing and body, as the gate reads them before any route (``server.http.auth``).

Framing: ``Authorization``, ``Cookie`` and ``X-Esfis-Run`` may each come once (two layers reading
the first and the last of them would each believe a different caller), and ``X-Esfis-Run`` not at
all (a caller never names its own run). Body: JSON endpoints take at most ``BODY_LIMIT``, read
whole and replayed to the route, so an overflow answers 413 in one shape before any route runs;
the import endpoint streams up to ``IMPORT_BODY_LIMIT``, counted as it arrives. And whether a
request asks for a forget, which has a rate limit of its own.
"""

from __future__ import annotations

import json

from starlette.types import Message, Receive

from server.errors import BadRequest, PayloadTooLarge
from server.inputs import size

BODY_LIMIT = 64 * 1024
IMPORT_BODY_LIMIT = 1024 * 1024 * 1024
IMPORT_PATH = "/v1/import"
MCP_PATH = "/mcp"  # MCP over HTTP (server.http.mcp): the same tokens, checked the same way
MEMORIES_PATH = "/v1/memories/"  # DELETE forgets: a limit of its own, as MCP's forget tool
SINGLE_HEADERS = (b"authorization", b"cookie", b"x-esfis-run")
RUN_HEADER = b"x-esfis-run"


def body_limit(path: str) -> int:
    return IMPORT_BODY_LIMIT if path == IMPORT_PATH else BODY_LIMIT


def too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"the request body is over the limit of {size(limit)} for this endpoint")


def asks_to_forget(method: str, path: str, body: bytes) -> bool:
    """Whether a request asks for a forget: ``DELETE /v1/memories/{id}``, or an MCP call of the
    ``forget`` tool (alone or in a batch). The body is parsed only when it may name the tool: it
    holds ``forget``, or an escape (``forg\\u0065t`` names it as well)."""
    if method == "DELETE":
        return path.startswith(MEMORIES_PATH)
    if path != MCP_PATH or (b"forget" not in body and b"\\u" not in body):
        return False
    try:
        message = json.loads(body)
    except ValueError:
        return False  # the MCP layer answers what is wrong with it
    except RecursionError:  # nested past the interpreter's stack: refused here, never a 500
        raise BadRequest("the JSON body is nested too deeply") from None
    calls = message if isinstance(message, list) else [message]
    return any(
        isinstance(call, dict)
        and call.get("method") == "tools/call"
        and isinstance(call.get("params"), dict)
        and call["params"].get("name") == "forget"
        for call in calls
    )


def framing_refusal(headers: list[tuple[bytes, bytes]]) -> BadRequest | None:
    """Why a request's headers cannot be taken as they are (lower-cased names), or None."""
    names = [k for k, _ in headers]
    for name in SINGLE_HEADERS:
        if names.count(name) > 1:
            return BadRequest(f"the request gives the {name.decode().title()} header more than once")
    if RUN_HEADER in names:
        return BadRequest(
            "X-Esfis-Run is not taken: the requests of one token are one run, and a caller "
            "never names its own; a harness opens a run token per agent session with POST /v1/runs"
        )
    return None


async def read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def counting(receive: Receive, limit: int) -> Receive:
    size = 0

    async def counted() -> Message:
        nonlocal size
        message = await receive()
        if message["type"] == "http.request":
            size += len(message.get("body", b""))
            if size > limit:
                raise too_large(limit)
        return message

    return counted
