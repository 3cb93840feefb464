"""``server.catalog.scrub_rounds``: one scrub at a time, and callers who arrive while one runs
share the next round, each returning only once a round that covered its values has ended."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from server.catalog.scrub_rounds import ScrubRounds


class BlockingScrub:
    """A scrub that records what each round was given and waits for the test to let it end."""

    def __init__(self, answers: list[bool | Exception]) -> None:
        self.rounds: list[list[bytes] | None] = []
        self.release = [threading.Event() for _ in answers]
        self.answers = answers
        self.running = 0
        self.most_at_once = 0

    def __call__(self, cleared: Sequence[bytes] | None) -> bool:
        index = len(self.rounds)
        self.rounds.append(None if cleared is None else sorted(cleared))
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        self.release[index].wait(10)
        self.running -= 1
        answer = self.answers[index]
        if isinstance(answer, Exception):
            raise answer
        return answer


def _call_in_thread(rounds: ScrubRounds, values: list[bytes] | None, answers: dict) -> threading.Thread:
    def call() -> None:
        try:
            answers[None if values is None else values[0]] = rounds(values)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            answers[None if values is None else values[0]] = exc

    thread = threading.Thread(target=call)
    thread.start()
    return thread


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def _first_round_running(answers: list[bool | Exception]) -> tuple[BlockingScrub, ScrubRounds, dict, threading.Thread]:
    """A scrub, its rounds, the callers' answers, and a first caller (of ``b"a"``) whose round
    runs now, held until the test releases it."""
    scrub = BlockingScrub(answers)
    rounds = ScrubRounds(scrub)
    answered: dict = {}
    first = _call_in_thread(rounds, [b"a"], answered)
    _wait_for(lambda: scrub.rounds, "the first round did not start")
    return scrub, rounds, answered, first


def test_callers_during_a_round_share_the_next_and_wait_for_it():
    scrub, rounds, answers, first = _first_round_running([True, True])
    later = [_call_in_thread(rounds, [value], answers) for value in (b"b", b"c", b"d")]
    _wait_for(lambda: len(rounds._gathering.cleared or []) == 3, "the callers did not join the next round")
    assert answers == {}  # nobody returns before a round that covered its values ended
    scrub.release[0].set()
    first.join(10)
    assert answers == {b"a": True}  # the first round covered a alone; b, c, d still wait
    _wait_for(lambda: len(scrub.rounds) == 2, "the second round did not start")
    assert all(t.is_alive() for t in later)
    scrub.release[1].set()
    for thread in later:
        thread.join(10)
    assert scrub.rounds == [[b"a"], [b"b", b"c", b"d"]]
    assert answers == {b"a": True, b"b": True, b"c": True, b"d": True}
    assert scrub.most_at_once == 1 and rounds.rounds == 2


def test_a_caller_who_knows_not_what_was_cleared_makes_its_round_whole():
    scrub, rounds, answers, first = _first_round_running([True, True])
    later = [_call_in_thread(rounds, [b"b"], answers), _call_in_thread(rounds, None, answers)]
    _wait_for(lambda: rounds._gathering.cleared is None, "the unknown caller did not join")
    scrub.release[0].set()
    scrub.release[1].set()
    for thread in [first, *later]:
        thread.join(10)
    assert scrub.rounds == [[b"a"], None]


def test_a_failed_round_answers_false_to_its_callers_and_the_next_round_runs():
    scrub, rounds, answers, first = _first_round_running([True, OSError("catalog busy"), True])
    later = [_call_in_thread(rounds, [value], answers) for value in (b"b", b"c")]
    _wait_for(lambda: len(rounds._gathering.cleared or []) == 2, "the callers did not join")
    scrub.release[0].set()
    scrub.release[1].set()
    for thread in [first, *later]:
        thread.join(10)
    raised = [v for v in answers.values() if isinstance(v, Exception)]
    assert len(raised) == 1  # the caller who ran the round sees its error
    assert sorted(v for k, v in answers.items() if k != b"a" and not isinstance(v, Exception)) == [False]
    scrub.release[2].set()
    assert rounds([b"e"]) is True  # not stuck: the next caller runs a round of its own
    assert scrub.rounds[-1] == [b"e"]


@pytest.mark.parametrize("answer", [True, False])
def test_a_caller_alone_runs_its_own_round_at_once(answer):
    scrub = BlockingScrub([answer])
    scrub.release[0].set()
    assert ScrubRounds(scrub)([b"x"]) is answer
    assert scrub.rounds == [[b"x"]]
