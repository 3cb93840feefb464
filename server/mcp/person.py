"""Who answers an MCP call that needs a person (a write into personal memories carrying a
space's data, a forget in a run that read untrusted content):

- **the host's user**, by an elicitation request showing the real text and target, when the
  host is trusted to ask its user (over stdio the host is the application the user runs; over
  HTTP only a token made with ``--approvals host``) and the client advertises elicitation. The
  wait runs on the event loop, never in a thread, for at most ``approval_wait_s`` (then it is
  declined), and a run has at most one such prompt open;
- **the operator** otherwise: the call is held (``server.barrier.approvals``), the tool answers
  its approval's id, and ``check_approval`` tells the outcome.
"""

import logging
from collections.abc import Callable

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from server.models import ApprovalRequest, Ask, NeedsPerson

log = logging.getLogger("esfis.mcp")


class Approval(BaseModel):
    """What the person at the call answers."""

    approve: bool = Field(description="true: let esfis do exactly this one call")


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
