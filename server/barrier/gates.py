"""The gates a run's step passes before it acts: the seal, the barrier, untrusted content.

Each gate returns the trail steps of an allowed decision, to be recorded with the act itself,
or records the refusal (and any approval asked and declined) and raises. A refusal names the
rule, the carried label and the target, and never a space the run has not reached, a grant,
or another run.

**A person at the call.** An interface that can ask a person passes an ``Ask``: it shows the
request (the real text, escaped, and target) and answers True (approved), False (declined), or
None (nobody can be asked: no terminal, a client without elicitation). An ``Ask`` that must wait
for its answer without holding a thread raises ``NeedsPerson`` instead, before anything is
recorded; the interface asks on its event loop and calls again with the answer
(``answered``). HTTP passes none: no answer of an HTTP caller is a person's.

**Held for the operator.** With ``hold``, a call nobody could approve at the call is held
(``server.barrier.approvals``): its row and an ``approval_requested`` step (decision ``held``)
commit together, and the gate answers the ``Held`` instead of steps. Nothing is written yet.

**Policies above all.** A grant or an approval moves data between spaces, never past a policy:
data of a space this AI is denied crosses under neither, and nobody is asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from server.barrier import Crossing, judge, may_hold
from server.barrier.approvals import ApprovalBook
from server.barrier.grants import GrantBook
from server.barrier.runs import RunBook, admits, reaches
from server.clock import Clock
from server.errors import DataBarrier, UntrustedSource
from server.labels import Carried, space_mark
from server.models import Action, ApprovalRequest, Ask, Caller, Held
from server.records import Run, Step
from server.spaces.policies import PolicySet


@dataclass(frozen=True)
class HeldCall:
    """What a held call needs besides its request: kept with it, applied with it."""

    origins: tuple[str, ...] = ()
    memory_id: str | None = None  # replace: the old memory; forget: the memory
    valid_until: datetime | None = None


class Gates:
    def __init__(self, runs: RunBook, grants: GrantBook, approvals: ApprovalBook, clock: Clock) -> None:
        self.runs = runs
        self.grants = grants
        self.approvals = approvals
        self.clock = clock

    def enter(self, caller: Caller) -> Run:
        """The caller's run, refused when it was ended or expired, and (the refusal recorded)
        when the step lies outside its seal."""
        run = self.runs.current(caller)
        if run.ended_at is not None or (run.expires_at is not None and run.expires_at <= self.clock()):
            raise self.runs.ended_refusal(run)
        if not admits(run, caller):
            refusal = self.runs.sealed_refusal(run, caller)
            self.runs.record_now(
                run, caller, [Step("gate", (), "refused", "data_barrier", None, space_mark(caller.space))]
            )
            raise refusal
        return run

    def write(
        self,
        caller: Caller,
        run: Run,
        *,
        carried: Carried,
        target: str | None,
        action: Action,
        text: str,
        ask: Ask | None,
        policies: PolicySet,
        hold: HeldCall | None = None,
        data: str | None = None,
    ) -> list[Step] | Held:
        """Whether ``target`` may hold what the write carries; the steps to record with the write,
        or, with ``hold`` and nobody to ask, the call held for the operator. ``data``: the write's
        data as stored, shown to the person with the text and kept with a held call."""
        crossing = judge(
            carried.spaces,
            may_hold(target),
            target=target,
            grants=self.grants.list(),
            ai=caller.ai,
            now=self.clock(),
            denied=_denied(policies, caller.ai),
        )
        marks = tuple(carried.marks())
        target_mark = space_mark(target)
        grant = ", ".join(crossing.grants) or None
        if crossing.allowed:
            return [Step("gate", marks, "allowed", "data_barrier", grant, target_mark)]
        steps: list[Step] = []
        if target is None and not crossing.denied:  # nobody is asked to approve past a policy
            blocked = tuple(space_mark(s) for s in crossing.blocked)  # for the trail: the operator's
            shown = tuple(
                dict.fromkeys(
                    space_mark(s) if _reached(run, s) else "a space outside this run's reach" for s in crossing.blocked
                )
            )  # for the person at the call
            request = ApprovalRequest(action, caller.ai, text, None, shown, "data_barrier", data)
            answer = ask(request) if ask is not None else None
            if answer is None and hold is not None:
                return self._hold(caller, run, request, carried=marks, blocked=blocked, call=hold)
            if answer is not None:
                steps.append(Step("approval_requested", blocked, None, "data_barrier", None, target_mark))
                if answer:
                    return [
                        *steps,
                        Step("approved", blocked, None, "data_barrier", None, target_mark),
                        Step("gate", marks, "allowed", "data_barrier", grant, target_mark),
                    ]
                steps.append(Step("declined", blocked, None, "data_barrier", None, target_mark))
        steps.append(Step("gate", marks, "refused", "data_barrier", grant, target_mark))
        self.runs.record_now(run, caller, steps)
        raise DataBarrier(self._refusal(run, crossing, target, asked=bool(steps[:-1])))

    def forget(
        self,
        caller: Caller,
        run: Run,
        *,
        trusted: Iterable[str],
        target: str | None,
        text: str,
        ask: Ask | None,
        hold: HeldCall | None = None,
    ) -> list[Step] | Held:
        """A run that carries untrusted content forgets only with a person's approval."""
        untrusted = tuple(sorted(run.carried.origins - set(trusted)))
        if not untrusted:
            return []
        target_mark = space_mark(target)
        request = ApprovalRequest("forget", caller.ai, text, target, untrusted, "untrusted_source")
        answer = ask(request) if ask is not None else None
        if answer is None and hold is not None:
            return self._hold(caller, run, request, carried=tuple(run.carried.marks()), blocked=untrusted, call=hold)
        steps: list[Step] = []
        if answer is not None:
            steps.append(Step("approval_requested", untrusted, None, "untrusted_source", None, target_mark))
            if answer:
                return [
                    *steps,
                    Step("approved", untrusted, None, "untrusted_source", None, target_mark),
                    Step("gate", untrusted, "allowed", "untrusted_source", None, target_mark),
                ]
            steps.append(Step("declined", untrusted, None, "untrusted_source", None, target_mark))
        steps.append(Step("gate", untrusted, "refused", "untrusted_source", None, target_mark))
        self.runs.record_now(run, caller, steps)
        how = "the person declined" if answer is False else "nobody could be asked to approve it here"
        raise UntrustedSource(
            f"untrusted_source: this run carries untrusted content ({', '.join(untrusted)}), so forget needs "
            f"a person's approval at the call, and {how}"
        )

    def _hold(
        self,
        caller: Caller,
        run: Run,
        request: ApprovalRequest,
        *,
        carried: tuple[str, ...],
        blocked: tuple[str, ...],
        call: HeldCall,
    ) -> Held:
        """Hold the call for the operator: its row and its step commit together."""
        target_mark = space_mark(request.target)
        with self.runs.catalog.transaction() as tx:
            held = self.approvals.hold(
                caller,
                request,
                carried=carried,
                blocked=blocked,
                origins=call.origins,
                memory_id=call.memory_id,
                valid_until=call.valid_until,
                tx=tx,
            )
            step = Step("approval_requested", blocked, "held", request.rule, None, target_mark, memory_ids=(held.id,))
            self.runs.record(tx, run, caller, steps=[step])
        return held

    def open(
        self,
        caller: Caller,
        run: Run,
        *,
        spaces: Iterable[str | None],
        reaches: Callable[[str | None], bool],
        marks: tuple[str, ...],
        policies: PolicySet,
    ) -> list[Step]:
        """Whether the run may open a reference holding data of ``spaces``: each is reached, or
        crosses under a grant, and none is a space a policy denies this AI."""
        target = caller.space
        personal_ok = reaches(None)
        named = [s for s in spaces if s is not None]
        denied = _denied(policies, caller.ai)
        crossing = judge(
            named,
            lambda s: reaches(s) and not denied(s),
            target=target,
            grants=self.grants.list(),
            ai=caller.ai,
            now=self.clock(),
            denied=denied,
        )
        if None in set(spaces) and not personal_ok:
            crossing = Crossing((*crossing.blocked, "(personal)"), crossing.grants)
        grant = ", ".join(crossing.grants) or None
        if crossing.allowed:
            return [Step("gate", marks, "allowed", "data_barrier", grant, space_mark(target))]
        if run.opened:  # a run whose first step is refused is never opened
            self.runs.record_now(
                run, caller, [Step("gate", marks, "refused", "data_barrier", grant, space_mark(target))]
            )
        raise DataBarrier(
            "data_barrier: this reference holds data from outside this run's reach"
            + ("" if target is None else f" (space {target!r})")
            + "; it cannot be opened here"
        )

    def _refusal(self, run: Run, crossing: Crossing, target: str | None, *, asked: bool) -> str:
        first = crossing.blocked[0]
        label = f"data labelled {space_mark(first)!r}" if _reached(run, first) else "data from outside this run's reach"
        if crossing.denied:
            denied = crossing.denied[0]
            named = f"space {denied!r}" if _reached(run, denied) else "a space it read from"
            return (
                f"data_barrier: this run carries data of {named}, which a policy now denies this AI; "
                "no grant or approval moves data past a policy"
            )
        if target is None:
            where = "personal memories, which hold personal data only"
            fix = (
                " and the person declined"
                if asked
                else "; a person may approve such a write at the call (MCP or a terminal), or an operator may grant it"
            )
        else:
            where = f"space {target!r}, which may hold only its own data and that of the spaces below it"
            fix = "; an operator may grant the crossing"
        return f"data_barrier: this run carries {label}, and {where}{fix}"


def _reached(run: Run, space: str) -> bool:
    """Whether the run's sealed scope reaches ``space``: only then may an answer name it."""
    return reaches(run, space)


def _denied(policies: PolicySet, ai: str) -> Callable[[str], bool]:
    return lambda space: not policies.decide(ai, space).allowed
