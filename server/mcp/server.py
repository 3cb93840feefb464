"""The MCP server: seven tools over the service façade, served over stdio.

    remember(text, personal=false, labels=null)   recall(query, limit=10)
    replace(id, text, space=null)                 forget(id)
    share(ids)                                    open_context(ref)
    check_approval(id)

The session is one run: what it recalls, gets and opens, it carries, and the data barrier
judges every write by it. When a write needs a person (into personal, carrying a space's
data) or a forget does (the run carries untrusted content), a person answers:

- **the host's user**, by an elicitation request showing the real text and target, when the
  host is trusted to ask its user (over stdio the host is the application the user runs; over
  HTTP only a token made with ``--approvals host``) and the client advertises elicitation. The
  wait runs on the event loop, never in a thread, for at most ``approval_wait_s`` (then it is
  declined), and a run has at most one such prompt open;
- **the operator** otherwise: the call is held (``server.barrier.approvals``), the tool answers
  its approval's id, and ``check_approval`` tells the outcome.

The server stands where it was started (``standing``); no tool takes a space to recall from.
Every ``EsfisError`` becomes an MCP tool error in one place (``_serve``), so an id the agent may
not see reads exactly like an id that never existed. Answers carry nothing about other spaces
and no delivery id.

Start-up stays light: ``initialize`` and ``tools/list`` need neither the vector stack nor the
model, so the service opens and the model loads in a background thread once the handshake has
been answered, and the first call that needs them waits for them.

Nothing but protocol goes to stdout: while it serves, the SDK writes the protocol to a private
copy of fd 1 and points fd 1 itself at stderr, so a stray print (a library's, a C extension's)
lands on stderr; logs go to stderr too.
"""

import importlib.metadata
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from server import inputs
from server.errors import EsfisError, InvalidInput, RunNotFound, StoreUnavailable
from server.mcp.standing import Standing, instructions, stand
from server.metrics import count_refusal
from server.models import DEFAULT_LIMIT, MAX_LIMIT, ApprovalRequest, Ask, Caller, Held, NeedsPerson, answered
from server.settings import APPROVAL_WAIT_S, Settings
from server.shapes import (
    ApprovalOut,
    ContextOut,
    ForgottenOrHeldOut,
    HeldOut,
    MemoryOut,
    RecallOut,
    ReferenceOut,
    ReplacedOrHeldOut,
    WrittenOut,
)

if TYPE_CHECKING:
    from server.facade import Esfis

log = logging.getLogger("esfis.mcp")
T = TypeVar("T")


# -- answers --------------------------------------------------------------------------------


class Approval(BaseModel):
    """What the person at the call answers."""

    approve: bool = Field(description="true: let esfis do exactly this one call")


# -- descriptions, written for the model ----------------------------------------------------


HTTP_INSTRUCTIONS = (
    "esfis keeps memories: short, self-contained facts that should outlive this conversation "
    "(decisions, conventions, how things work here, the user's preferences). Recall before you "
    "start a task or when you lack context; remember what a later session will need.\n\n"
    "This session works in the space it was opened in (its token's scope, or the space named in "
    "its URL): recall sees that space, the spaces below it and, for an unscoped token, the user's "
    "personal memories; it never sees other spaces, and no argument can change that."
)


def _where(standing: Standing | None) -> str:
    if standing is None:
        return (
            "This session works in the space it was opened in: it sees that space, the spaces below "
            "it, and (for an unscoped token) the user's personal memories, and nothing of any other space."
        )
    if standing.space is None:
        return "This server stands in no space: only personal memories are within reach."
    return (
        f"This server works in space {standing.space!r}: it sees that space, the spaces below it, "
        "and the user's personal memories, and nothing of any other space."
    )


def descriptions(standing: Standing | None) -> dict[str, str]:
    where = _where(standing)
    target = (
        "It goes into the space this session works in, seen only by agents working there; set "
        "personal=true for facts about the user that hold in every project."
        if standing is None
        else "This server stands in no space, so only personal memories can be written: set "
        "personal=true, and keep to facts about the user that hold in every project."
        if standing.space is None
        else f"It goes into space {standing.space!r}, seen only by agents working there; set "
        "personal=true for facts about the user that hold in every project."
    )
    return {
        "remember": (
            "Store one memory: a short, self-contained fact that a later session should know, such "
            "as a decision, a convention, how something works here, or a preference the user "
            "stated. Use it when you learn something durable that is not obvious from the code; "
            "do not store secrets, passwords or tokens, or what is only true for this one task. "
            'Write it so it makes sense on its own ("Acme\'s login uses Auth0", not "it uses '
            f'Auth0"), one fact per memory. {target} Set `labels` (e.g. ["source:slack"]) when the '
            "fact comes from outside (slack, email, a webhook, a web page). esfis follows what this "
            "session has read: a write that would carry one space's data where it may not go is "
            "refused (data_barrier), or, into personal memories, needs a person's approval: then "
            "nothing is written yet and the answer is an approval (apr_…) to check with "
            "check_approval. Returns the new id and its labels."
        ),
        "recall": (
            "Find the memories that best answer a question or fit a task: conventions, past "
            "decisions, how things work here, the user's preferences. Call it before you start a "
            'task and whenever you lack context; ask in plain words ("how does login work?"). '
            f"{where} There is no argument to look anywhere else. Returns up to `limit` memories, "
            "best first, each with id, text, space (null: personal) and score."
        ),
        "replace": (
            "Supersede a memory with corrected or updated text: the old one stops being current "
            "and the new one takes its place, keeping the trail. Use it when a recalled memory is "
            "outdated or wrong, rather than storing a second fact that contradicts it. Leave "
            "`space` out and the new memory stays in the old one's space. Returns the new id."
        ),
        "forget": (
            "Delete a memory for good: its text leaves the store. Use it only for a memory that "
            "should never have been kept (wrong, private, a secret) or when the user asks; to "
            "correct a fact, use replace. If this session has read content from an outside source "
            "(a memory with an origin mark), a person must approve: the answer may then be an "
            "approval (apr_…) to check with check_approval. forget(apr_…) withdraws a call of this "
            "session that waits for approval."
        ),
        "check_approval": (
            "Ask whether a call of this session that waited for a person's approval (an id apr_… "
            "that remember, replace or forget answered) was approved and applied, declined, or "
            "expired. Approved: `memory` is the id it wrote. Do not retry a held call; check it."
        ),
        "share": (
            "Make a context reference to memories you can see, to hand to another agent instead "
            "of copying their text: it names the memories with their labels, never their text. "
            "Returns the reference (ctx_…)."
        ),
        "open_context": (
            "Open a context reference (ctx_…) another agent shared: returns its memories with "
            "their labels, if this session may read data of where they come from. What you open "
            "counts as read by this session, like recall."
        ),
    }


# -- inputs -----------------------------------------------------------------------------------

# ``source`` was ``remember``'s name for one origin mark until origin marks were called ``labels``
# on every interface; accepted for one release (CHANGELOG.md), then removed.
OLD_SOURCE = "deprecated, accepted until the next release: use labels; one origin mark, e.g. slack"


def origin_marks(labels: list[str] | None, source: str | None) -> list[str] | None:
    """The origin marks a ``remember`` call gives, by their name or by the old one."""
    if source is None:
        return labels
    if labels is not None:
        raise InvalidInput(
            "give labels or source, not both: source is the old name of labels (one origin mark); use labels",
            field="labels",
        )
    return [source]


# -- the server -----------------------------------------------------------------------------


def _defer(request: ApprovalRequest) -> bool | None:
    """The first pass's ``Ask``: the answer is awaited on the event loop, not here."""
    raise NeedsPerson(request)


def _can_elicit(ctx: Context) -> bool:
    params = ctx.session.client_params
    return params is not None and params.capabilities.elicitation is not None


class PersonAtCall:
    """Who answers a call that needs a person, for one server: the host's user (elicitation,
    when ``trusts_host`` says this call's host may ask) or the operator's queue.

    A gated call runs in two passes, each one trip to a worker thread: the first stops before
    anything is recorded if a person must answer (``NeedsPerson``); the prompt is awaited on
    the event loop with a deadline, holding no thread; the second pass runs the call with that
    answer, for that exact request only (``answered``)."""

    def __init__(self, *, wait_s: float, trusts_host: Callable[[Context], bool]) -> None:
        self.wait_s = wait_s
        self.trusts_host = trusts_host
        self._asking: set[str] = set()  # runs with a prompt open: at most one each

    def how(self, ctx: Context) -> tuple[Ask | None, bool]:
        """The ``ask`` and ``hold`` for a call: prompt the host's user, or hold for the operator."""
        if self.trusts_host(ctx) and _can_elicit(ctx):
            return _defer, False
        return None, True

    async def ask(self, ctx: Context, run_id: str, request: ApprovalRequest) -> bool:
        """The person's answer: True only for an explicit approval within the deadline."""
        if run_id in self._asking:
            raise ToolError(
                "this run already waits for the person's answer to another call; retry once it is answered "
                "(approval_pending)"
            )
        self._asking.add(run_id)
        try:
            with anyio.fail_after(self.wait_s):
                answer = await ctx.elicit(request.message(), Approval)
        except TimeoutError:
            log.info("nobody answered the approval request in time: declined")
            return False
        except Exception:  # the client failed to answer: nobody approved
            log.warning("the client did not answer the approval request", exc_info=True)
            return False
        finally:
            self._asking.discard(run_id)
        return answer.action == "accept" and bool(answer.data.approve)


def _client_name(ctx: Context) -> str | None:
    """The client's name from the handshake (or the request envelope), if it gave one."""
    params = ctx.session.client_params
    return None if params is None else params.client_info.name


async def _serve(call: Callable[[], T]) -> T:
    """Run one façade call off the event loop; the one place that maps esfis errors."""
    try:
        return await anyio.to_thread.run_sync(call)
    except EsfisError as exc:
        count_refusal(exc.code)
        raise ToolError(f"{exc.message} ({exc.code})") from None


class Opening:
    """The service, opened and warmed in a background thread; ``get`` waits for it.

    Opening imports the vector stack (~0.2 s) and warming imports torch (~10 s), so neither runs
    before the handshake has been answered; a call that needs the service starts it if nothing
    else has, and waits.
    """

    def __init__(self, open_service: Callable[[], "Esfis"]) -> None:
        self._open = open_service
        self._lock = threading.Lock()
        self._started = False
        self._opened = threading.Event()
        self._service: Esfis | None = None
        self._error: EsfisError | None = None

    def start(self) -> None:
        """Begin opening (idempotent)."""
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._run, name="esfis-open", daemon=True).start()

    def _run(self) -> None:
        try:
            self._service = self._open()
        except EsfisError as exc:
            self._error = exc
        except Exception as exc:  # e.g. an OSError from the data directory: still the agent's answer
            log.exception("could not open the esfis service")
            self._error = StoreUnavailable(f"could not open the esfis store: {exc}")
        finally:
            self._opened.set()
        if self._error is not None:
            log.error("%s", self._error.message)
        if self._service is not None:
            _warm_up(self._service)

    def opened(self) -> "Esfis | None":
        """The service if it has opened; None if it never started or is still opening."""
        return self._service if self._opened.is_set() else None

    def get(self) -> "Esfis":
        self.start()
        self._opened.wait()
        if self._error is not None:
            raise self._error
        assert self._service is not None
        return self._service


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

    @server.tool(description=about["remember"], annotations=ToolAnnotations(title="Remember", read_only_hint=False))
    async def remember(
        text: Annotated[str, Field(description=inputs.TEXT)],
        ctx: Context,
        personal: Annotated[bool, Field(description=inputs.PERSONAL)] = False,
        labels: Annotated[list[str] | None, Field(description=inputs.LABELS)] = None,
        source: Annotated[str | None, Field(description=OLD_SOURCE, json_schema_extra={"deprecated": True})] = None,
    ) -> WrittenOut:
        memory = await gated(
            ctx,
            lambda service, who, ask, hold: service.remember(
                who, text, personal=personal, labels=origin_marks(labels, source), ask=ask, hold=hold
            ),
        )
        return WrittenOut.held(memory) if isinstance(memory, Held) else WrittenOut.written(MemoryOut.of(memory))

    @server.tool(description=about["recall"], annotations=ToolAnnotations(title="Recall", read_only_hint=True))
    async def recall(
        query: Annotated[str, Field(description=inputs.QUERY)],
        ctx: Context,
        # Bounds in the schema only: the core checks them, with its own message.
        limit: Annotated[
            int, Field(description=inputs.LIMIT, json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT})
        ] = DEFAULT_LIMIT,
    ) -> RecallOut:
        result = await call(ctx, lambda service, who: service.recall(who, query, limit=limit))
        return RecallOut.of(result.memories)  # the delivery id stays in the trail: agents never see it

    @server.tool(description=about["replace"], annotations=ToolAnnotations(title="Replace", destructive_hint=False))
    async def replace(
        id: Annotated[str, Field(description="the id of the memory to supersede")],
        text: Annotated[str, Field(description=inputs.NEW_TEXT)],
        ctx: Context,
        space: Annotated[str | None, Field(description="rarely needed: " + inputs.NEW_SPACE)] = None,
    ) -> ReplacedOrHeldOut:
        memory = await gated(
            ctx, lambda service, who, ask, hold: service.replace(who, id, text, space=space, ask=ask, hold=hold)
        )
        if isinstance(memory, Held):
            return ReplacedOrHeldOut(**WrittenOut.held(memory).model_dump())
        return ReplacedOrHeldOut(**MemoryOut.of(memory).model_dump(), replaced=id)

    @server.tool(description=about["forget"], annotations=ToolAnnotations(title="Forget", destructive_hint=True))
    async def forget(
        id: Annotated[str, Field(description="the id of the memory to delete")],
        ctx: Context,
    ) -> ForgottenOrHeldOut:
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
        held = await call(ctx, lambda service, who: service.check_approval(who, id))
        return ApprovalOut.of(held)

    @server.tool(description=about["share"], annotations=ToolAnnotations(title="Share", read_only_hint=True))
    async def share(
        ids: Annotated[list[str], Field(description=inputs.MEMORY_IDS)],
        ctx: Context,
    ) -> ReferenceOut:
        reference = await call(ctx, lambda service, who: service.share(who, ids))
        return ReferenceOut.of(reference)

    @server.tool(
        description=about["open_context"], annotations=ToolAnnotations(title="Open context", read_only_hint=True)
    )
    async def open_context(
        ref: Annotated[str, Field(description="a context reference, ctx_…")],
        ctx: Context,
    ) -> ContextOut:
        reference, memories = await call(ctx, lambda service, who: service.open_context(who, ref))
        return ContextOut.of(reference, memories)

    return server


def _version() -> str:
    try:
        return importlib.metadata.version("esfis")  # the SDK has imported importlib.metadata already
    except importlib.metadata.PackageNotFoundError:
        return ""


def _warm_up(service: "Esfis") -> None:
    """Load the model (and the store's engine) now, so the first recall does not pay for it."""
    try:
        service.warm_up()
        log.info("model loaded")
    except Exception as exc:  # the first call that needs the model reports it as a tool error
        log.warning("could not load the model at start: %s", exc)


# -- stdio ----------------------------------------------------------------------------------


def _quiet() -> None:
    """Keep libraries from drawing progress bars or chattering; what remains goes to stderr."""
    for name, value in {
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TQDM_DISABLE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "TRANSFORMERS_VERBOSITY": "error",
        "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    }.items():
        os.environ.setdefault(name, value)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING,
        format="esfis mcp: %(levelname)s %(name)s: %(message)s",
    )
    logging.captureWarnings(True)


def run_stdio() -> None:
    """``esfis mcp``: serve MCP over stdin/stdout until the client closes stdin."""
    _quiet()
    settings = Settings.from_env()
    standing = stand(settings, os.environ, os.getcwd())
    if standing.problem is not None:
        log.error("%s", standing.problem.message)
    log.info("space %s, run %s", standing.space or "(none: personal only)", standing.run_id)

    def open_() -> "Esfis":
        from server.facade import open_service  # the vector stack: after the handshake

        service = open_service(settings)
        service.start_upkeep()  # as `esfis serve`: checkpoints and the trail's pruning
        return service

    opening = Opening(open_)
    try:
        build_server(opening.get, standing, warm=opening.start, approval_wait_s=settings.approval_wait_s).run("stdio")
    finally:
        _end_session(opening, standing)


def _end_session(opening: Opening, standing: Standing) -> None:
    """The client closed stdin: this process's run is over. Its trail stays (the upkeep prunes
    it in time) and the operator's run list shows it ended ``by mcp exit``; a session that took
    no step has no run to end."""
    service = opening.opened()
    if service is None:
        return
    try:
        service.operator.end_run(standing.caller(service, None).run_id, by="mcp exit")
    except RunNotFound:
        pass  # no step was taken: no run was recorded
    except EsfisError as exc:  # the space removed meanwhile, the catalog gone: the upkeep ends it later
        log.warning("could not end this session's run: %s", exc.message)
    finally:
        service.close()
