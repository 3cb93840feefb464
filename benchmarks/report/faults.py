"""The section on the fault drill (``test_fault_drill.py``): each fault's answers while it lasted,
the time to recover, and the promises held (no acknowledged write lost, no 500, no traceback)."""

from __future__ import annotations

from benchmarks.report.common import Checks, fmt, table


def _answers(counts: dict | None, limit: int = 4) -> str:
    """The most frequent answers of a phase, ``label × count``; ``none`` for an empty one."""
    if not counts:
        return "none"
    shown = [f"{label} ×{n}" for label, n in list(counts.items())[:limit]]
    more = len(counts) - limit
    return ", ".join(shown) + (f", {more} more kinds" if more > 0 else "")


def section_faults(rows: list[dict], checks: Checks) -> list[str]:
    body = []
    for r in rows:
        cell = r.get("fault") or r["name"]
        body.append(
            [
                cell,
                _answers((r.get("answers") or {}).get("during")),
                _answers(r.get("answers_across")),
                fmt(r.get("longest_answer_across_s")),
                f"{fmt(r.get('recovered_write_s'))} / {fmt(r.get('recovered_recall_s'))}",
                f"{fmt(r.get('acknowledged'))}, lost " + checks.check("faults.lost", cell, r.get("lost")),
                checks.check(
                    "faults.unhandled",
                    cell,
                    None if r.get("answers_500") is None else r.get("answers_500", 0) + r.get("unhandled_in_log", 0),
                ),
                r["outcome"],
            ]
        )
    intro = (
        "A real server under 4 clients (20% remembers, 80% recalls, back to back), one fault at a time, each in a "
        "world of its own; every acknowledged write read back from a fresh server afterwards. An answer counts in "
        "the phase it arrived in; *in flight* is every request that was waiting at some moment of the fault."
    )
    return [intro, ""] + table(
        body,
        [
            "fault",
            "answers during",
            "answers of requests in flight",
            "longest s",
            "recovered: write / recall s",
            "acknowledged, lost",
            "500s and tracebacks",
            "test",
        ],
    )
