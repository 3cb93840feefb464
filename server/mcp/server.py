"""The MCP server: seven tools over the service façade, served over stdio (``stdio``) and at
``/mcp`` of ``esfis serve`` (``server.http.mcp``).

    remember(text, personal=false, labels=null, dedupe=true, data=null)
    recall(query, limit=10, as_of=null, filter=null)
    replace(id, text, space=null, data=null)      forget(id)
    share(ids)                                    open_context(ref)
    check_approval(id)

The session is one run: what it recalls, gets and opens, it carries, and the data barrier
judges every write by it. When a write needs a person (into personal, carrying a space's
data) or a forget does (the run carries untrusted content), a person answers: the host's user
or the operator (``person``).

The server stands where it was started (``standing``); no tool takes a space to recall from.
Every ``EsfisError`` becomes an MCP tool error in one place (``_tool_error``), so an id the
agent may not see reads exactly like an id that never existed. Answers carry nothing about
other spaces and no delivery id. ``remember`` refuses an argument it does not declare, which
the SDK would drop (``undeclared``). What each tool tells the model is in ``descriptions``; the
service opens in the background once the handshake is answered (``opening``).
"""

import importlib.metadata
import inspect
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from server import inputs
from server.errors import EsfisError, InvalidInput
from server.faults import fault_of
from server.mcp.descriptions import HTTP_INSTRUCTIONS, descriptions
from server.mcp.opening import Opening as Opening  # where callers have always found it
from server.mcp.person import PersonAtCall
from server.mcp.standing import Standing, instructions
from server.metrics import count_refusal
from server.models import DEFAULT_LIMIT, MAX_LIMIT, Ask, Caller, Held, NeedsPerson, answered
from server.settings import APPROVAL_WAIT_S
from server.shapes import (
    ApprovalOut,
    ContextOut,
    ForgottenOrHeldOut,
    HeldOut,
    MemoryOut,
    RecallOut,
    ReferenceOut,
    RememberedOut,
    ReplacedOrHeldOut,
    WrittenOut,
)

if TYPE_CHECKING:
    from server.facade import Esfis

T = TypeVar("T")


# -- arguments ------------------------------------------------------------------------------

# What to send instead of an argument a tool no longer takes.
REMOVED = {"source": 'use labels: ["source:NAME"]'}


def takes(tool: Callable[..., Any]) -> tuple[str, ...]:
    """The arguments a tool function declares (its ``Context`` is none of them)."""
    return tuple(name for name, p in inspect.signature(tool).parameters.items() if p.annotation is not Context)


def undeclared(ctx: Context, tool: str, declared: tuple[str, ...]) -> InvalidInput | None:
    """The refusal of a call that sends an argument ``tool`` does not declare, if this one does.

    The SDK drops such an argument silently; every tool refuses it instead. For ``remember`` a
    dropped argument would be a hole: ``source``, its old name for an origin mark, marked
    content from outside as untrusted, and a memory written without it would pass the barrier's
    rule on untrusted content unmarked. For the others it is a call that does not do what its
    caller believes: a ``recall`` sent a ``space`` searches where the caller stands, not there."""
    sent = (ctx.request_context.params or {}).get("arguments") or {}
    extra = sorted(set(sent) - set(declared))
    removed = [name for name in extra if name in REMOVED]
    if removed:
        message = f"{tool} no longer takes {removed[0]!r} (nothing was done): {REMOVED[removed[0]]}"
    elif extra:
        names = ", ".join(repr(name) for name in extra)
        message = f"{tool} takes no argument {names} (nothing was done): it takes {', '.join(declared)}"
    else:
        return None
    return InvalidInput(message, field=extra[0])


# -- the server -----------------------------------------------------------------------------


def _client_name(ctx: Context) -> str | None:
    """The client's name from the handshake (or the request envelope), if it gave one."""
    params = ctx.session.client_params
    return None if params is None else params.client_info.name


def _tool_error(exc: EsfisError) -> ToolError:
    """An esfis error as the agent reads it, its code last; the one place that maps them."""
    count_refusal(exc.code)
    return ToolError(f"{exc.message} ({exc.code})")


async def _serve(call: Callable[[], T]) -> T:
    """Run one façade call off the event loop, its esfis errors mapped (``_tool_error``)."""
    try:
        return await anyio.to_thread.run_sync(call)
    except EsfisError as exc:
        raise _tool_error(exc) from None
    except Exception as exc:
        fault = fault_of(exc)  # a full disk, a failing one, a catalog gone: said in words
        if fault is None:
            raise
        raise _tool_error(fault) from None


WARM_AFTER_S = 1.0  # start warming this long after start even if the client sends nothing more


CallerOf = Callable[[Context, "Esfis"], Caller]  # who calls a tool, from the call's context


def build_server(
    service: "Esfis | Callable[[], Esfis]",
    standing: Standing | None,
    *,
    warm: Callable[[], None] | None = None,
    caller_of: CallerOf | None = None,
    trusts_host: Callable[[Context], bool] | None = None,
    approval_wait_s: float = APPROVAL_WAIT_S,
) -> MCPServer:
    """The MCP server over ``service`` (or a function that waits for it).

    Over stdio the server stands at ``standing`` and every call is its one run. Over HTTP
    (``server.http.mcp``) ``standing`` is None and ``caller_of`` makes each call's caller from
    the HTTP request that carried it: its token and the session's space.

    ``trusts_host`` says whether a call's host may ask its user to approve (stdio: always; over
    HTTP, ``server.http.mcp`` asks the token); otherwise such a call is held for the operator.

    ``warm`` (idempotent) runs once the handshake is answered: after the first request other
    than ``initialize``, or ``WARM_AFTER_S`` after start, whichever comes first. Heavy imports
    in another thread would otherwise compete with the handshake for the GIL and both cores.
    """
    service_now: Callable[[], Esfis] = service if callable(service) else lambda: service
    if caller_of is None:
        assert standing is not None, "a stdio server stands somewhere"
        fixed = standing

        def stdio_caller(ctx: Context, service: "Esfis") -> Caller:
            return fixed.caller(service, _client_name(ctx))

        caller_of = stdio_caller

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[dict[str, Any]]:
        timer = threading.Timer(WARM_AFTER_S, warm) if warm is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            yield {}
        finally:
            if timer is not None:
                timer.cancel()

    async def warm_after_handshake(ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if warm is not None and ctx.request_id is not None and ctx.method != "initialize":
            warm()
        return result

    server = MCPServer(
        "esfis",
        version=_version(),
        instructions=instructions(standing) if standing is not None else HTTP_INSTRUCTIONS,
        lifespan=lifespan,
        middleware=[warm_after_handshake],
        log_level="WARNING",
    )
    about = descriptions(standing)
    who = caller_of
    person = PersonAtCall(wait_s=approval_wait_s, trusts_host=trusts_host or (lambda _: True))

    async def call(ctx: Context, act: Callable[["Esfis", Caller], T]) -> T:
        """Run ``act(service, caller)`` for this tool call's caller, off the event loop."""

        def run() -> T:
            service = service_now()
            return act(service, who(ctx, service))

        return await _serve(run)

    async def gated(ctx: Context, act: Callable[["Esfis", Caller, Ask | None, bool], T]) -> T:
        """``act(service, caller, ask, hold)`` for a call a person may have to approve."""
        ask, hold = person.how(ctx)
        run_id = ""

        def first(service: "Esfis", caller: Caller) -> T:
            nonlocal run_id
            run_id = caller.run_id
            return act(service, caller, ask, hold)

        try:
            return await call(ctx, first)
        except NeedsPerson as need:
            request = need.request
        answer = answered(request, await person.ask(ctx, run_id, request))
        return await call(ctx, lambda service, caller: act(service, caller, answer, False))

    declared: dict[str, tuple[str, ...]] = {}  # each tool's arguments, filled once they are defined

    def refuse_undeclared(ctx: Context, tool: str) -> None:
        refusal = undeclared(ctx, tool, declared[tool])
        if refusal is not None:
            raise _tool_error(refusal)

    @server.tool(description=about["remember"], annotations=ToolAnnotations(title="Remember", read_only_hint=False))
    async def remember(
        text: Annotated[str, Field(description=inputs.TEXT)],
        ctx: Context,
        personal: Annotated[bool, Field(description=inputs.PERSONAL)] = False,
        labels: Annotated[list[str] | None, Field(description=inputs.LABELS)] = None,
        dedupe: Annotated[bool, Field(description=inputs.DEDUPE)] = True,
        data: Annotated[dict[str, Any] | None, Field(description=inputs.DATA)] = None,
    ) -> WrittenOut:
        refuse_undeclared(ctx, "remember")  # above all ``source``: see ``undeclared``
        memory = await gated(
            ctx,
            lambda service, who, ask, hold: service.remember(
                who, text, personal=personal, labels=labels, ask=ask, hold=hold, dedupe=dedupe, data=data
            ),
        )
        return WrittenOut.held(memory) if isinstance(memory, Held) else WrittenOut.written(RememberedOut.of(memory))

    @server.tool(description=about["recall"], annotations=ToolAnnotations(title="Recall", read_only_hint=True))
    async def recall(
        ctx: Context,
        query: Annotated[str, Field(description=inputs.QUERY + "; may be left empty when a filter is given")] = "",
        # Bounds in the schema only: the core checks them, with its own message.
        limit: Annotated[
            int, Field(description=inputs.LIMIT, json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT})
        ] = DEFAULT_LIMIT,
        as_of: Annotated[str | None, Field(description=inputs.AS_OF)] = None,
        filter: Annotated[dict[str, Any] | None, Field(description=inputs.FILTER)] = None,
    ) -> RecallOut:
        refuse_undeclared(ctx, "recall")
        result = await call(
            ctx, lambda service, who: service.recall(who, query, limit=limit, as_of=as_of, where=filter)
        )
        return RecallOut.of(result.memories)  # the delivery id stays in the trail: agents never see it

    @server.tool(description=about["replace"], annotations=ToolAnnotations(title="Replace", destructive_hint=False))
    async def replace(
        id: Annotated[str, Field(description="the id of the memory to supersede")],
        text: Annotated[str, Field(description=inputs.NEW_TEXT)],
        ctx: Context,
        space: Annotated[str | None, Field(description="rarely needed: " + inputs.NEW_SPACE)] = None,
        data: Annotated[dict[str, Any] | None, Field(description=inputs.REPLACE_DATA)] = None,
    ) -> ReplacedOrHeldOut:
        refuse_undeclared(ctx, "replace")
        memory = await gated(
            ctx,
            lambda service, who, ask, hold: service.replace(who, id, text, space=space, ask=ask, hold=hold, data=data),
        )
        if isinstance(memory, Held):
            return ReplacedOrHeldOut(**WrittenOut.held(memory).model_dump())
        return ReplacedOrHeldOut(**MemoryOut.of(memory).model_dump(), replaced=id)

    @server.tool(description=about["forget"], annotations=ToolAnnotations(title="Forget", destructive_hint=True))
    async def forget(
        id: Annotated[str, Field(description="the id of the memory to delete")],
        ctx: Context,
    ) -> ForgottenOrHeldOut:
        refuse_undeclared(ctx, "forget")
        held = await gated(ctx, lambda service, who, ask, hold: service.forget(who, id, ask=ask, hold=hold))
        if held is None:
            return ForgottenOrHeldOut(id=id, forgotten=True)
        return ForgottenOrHeldOut(
            id=id, forgotten=False, approval=ApprovalOut.of(held), message=HeldOut.of(held).message
        )

    @server.tool(
        description=about["check_approval"],
        annotations=ToolAnnotations(title="Check approval", read_only_hint=True),
    )
    async def check_approval(
        id: Annotated[str, Field(description="the approval's id (apr_…) a held call answered")],
        ctx: Context,
    ) -> ApprovalOut:
        refuse_undeclared(ctx, "check_approval")
        held = await call(ctx, lambda service, who: service.check_approval(who, id))
        return ApprovalOut.of(held)

    @server.tool(description=about["share"], annotations=ToolAnnotations(title="Share", read_only_hint=True))
    async def share(
        ids: Annotated[list[str], Field(description=inputs.MEMORY_IDS)],
        ctx: Context,
    ) -> ReferenceOut:
        refuse_undeclared(ctx, "share")
        reference = await call(ctx, lambda service, who: service.share(who, ids))
        return ReferenceOut.of(reference)

    @server.tool(
        description=about["open_context"], annotations=ToolAnnotations(title="Open context", read_only_hint=True)
    )
    async def open_context(
        ref: Annotated[str, Field(description="a context reference, ctx_…")],
        ctx: Context,
    ) -> ContextOut:
        refuse_undeclared(ctx, "open_context")
        reference, memories = await call(ctx, lambda service, who: service.open_context(who, ref))
        return ContextOut.of(reference, memories)

    tools: dict[str, Callable[..., Any]] = {
        "remember": remember,
        "recall": recall,
        "replace": replace,
        "forget": forget,
        "check_approval": check_approval,
        "share": share,
        "open_context": open_context,
    }
    declared.update({name: takes(tool) for name, tool in tools.items()})
    return server


def _version() -> str:
    try:
        return importlib.metadata.version("esfis")  # the SDK has imported importlib.metadata already
    except importlib.metadata.PackageNotFoundError:
        return ""
