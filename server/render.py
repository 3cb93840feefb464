"""How domain objects are shown as the CLI's text: tables, trails, explanations.

Their JSON is the one definition of each shape (``server.shapes``), which every interface,
the CLI's ``--json`` included, builds its answers from.
"""

from __future__ import annotations

import os
from pathlib import Path

from server import visible
from server.clock import iso
from server.models import (
    Delivery,
    HeldView,
    RecalledMemory,
    Space,
    Token,
    Why,
)
from server.records import Grant, Rule, Run, TrailStep

_time = iso
_PLURALS = {"memory": "memories"}


def folder_label(path: str) -> str:
    """A folder as shown to people: with ~ for the home directory."""
    home = str(Path.home())
    return "~" + path[len(home) :] if path == home or path.startswith(home + os.sep) else path


def inert(name: str) -> str:
    """A name a stranger chose (an OAuth client's name or id, a run's name), as every text and
    page shows it: control, bidirectional and invisible characters written as escapes, a
    backslash doubled (``visible.one_line``), so it cannot rewind, recolour or reorder what is
    around it. The web pages' ``inert`` filter is this function."""
    return visible.one_line(name)


def counted(n: int, noun: str) -> str:
    """``n`` and the noun, singular for one: "1 space", "2 spaces", "1 memory", "3 memories"."""
    return f"{n} {noun if n == 1 else _PLURALS.get(noun, noun + 's')}"


# -- text -----------------------------------------------------------------------------------


def _where(space: str | None) -> str:
    return "personal" if space is None else space


def _sealed(r: Run) -> str:
    if not r.opened:
        return "not sealed yet"
    return "everywhere" if r.everywhere else _where(r.space)


def _clip(text: str, width: int = 100) -> str:
    """A memory text on one line of a listing: runs of whitespace as one space, every other
    control character escaped (``server.visible``), cut at ``width``."""
    flat = visible.one_line(" ".join(text.split()))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def memory_text(text: str | None) -> str:
    """A whole memory text as the CLI prints it: exactly what was written, controls escaped."""
    return "(forgotten)" if text is None else visible.one_line(text)


def recall_table(memories: list[RecalledMemory]) -> str:
    if not memories:
        return "(no memories)"
    return "\n".join(
        f"{m.score:.3f}  {m.id}  [{_where(m.space)}]  {_clip(m.text)}"
        + (f"  ({', '.join(m.labels.origin)})" if m.labels.origin else "")
        for m in memories
    )


def tokens_table(tokens: list[Token]) -> str:
    if not tokens:
        return "(no tokens: esfis token create)"
    lines = []
    for t in tokens:
        who = "operator" if t.operator else f"ai {t.ai}" + (f" in {t.space}" if t.space else "")
        if t.kind in ("run", "runs"):
            who += " (run token)" if t.kind == "run" else " (opens runs only)"
        if t.client is not None:  # a stranger chose this name (registration, a metadata document)
            who += f" (OAuth: {inert(t.client)})"
        state = "active" if t.active else f"revoked {_time(t.revoked_at)}"
        lines.append(f"{t.id}  {who}  created {_time(t.created_at)}  {state}")
    return "\n".join(lines)


def runs_table(runs: list[Run]) -> str:
    if not runs:
        return "(no runs)"
    return "\n".join(
        f"{r.id}  {_time(r.opened_at) if r.opened else 'no step yet'}  {r.ai}  [{_sealed(r)}]  {r.kind} via {r.transport}"
        + (f" ({r.token_id})" if r.token_id else "")
        + f"  {r.steps} steps  carries {', '.join(r.carried.marks()) or 'nothing'}"
        + (f"  ended by {r.ended_by}" if r.ended_at else "")
        for r in runs
    )


def approvals_text(views: list[HeldView]) -> str:
    """Held calls, each with its request as the person must read it (already escaped)."""
    if not views:
        return "(no calls wait for approval)"
    out = []
    for v in views:
        h = v.held
        where = "personal" if h.target is None else h.target
        line = f"{h.id}  {h.status}  {h.ai}  {h.action} into {where}  run {h.run_id}  held {_time(h.created_at)}"
        if h.pending:
            line += f"  expires {_time(h.expires_at)}"
        elif h.reason:
            line += f"  ({h.reason})"
        out.append(line)
        if v.approvable:
            out.append(v.message)
            out.append(f"  esfis approvals approve {h.id}    esfis approvals decline {h.id}")
        out.append("")
    return "\n".join(out).rstrip()


def trail_text(r: Run, steps: list[TrailStep]) -> str:
    out = [
        f"run {r.id} ({r.kind}, {r.name}): {r.ai} via {r.transport}, sealed in {_sealed(r)} at {_time(r.opened_at)}"
        + (f", ended by {r.ended_by} at {_time(r.ended_at)}" if r.ended_at else ""),
        "carries: " + (", ".join(r.carried.marks()) or "nothing"),
    ]
    for t in steps:
        s = t.step
        parts = [f"{_time(t.at)}  {s.kind}"]
        if s.decision:
            parts.append(f"{s.decision} by {s.rule}")
        elif s.rule:
            parts.append(f"({s.rule})")
        if s.grant:
            parts.append(f"under grant {s.grant}")
        if s.target:
            parts.append(f"target {s.target}")
        if s.memory_ids:
            parts.append(" ".join(s.memory_ids))
        if s.labels:
            parts.append("[" + ", ".join(s.labels) + "]")
        if s.actor:
            parts.append(f"by {s.actor}")
        out.append("  " + "  ".join(parts))
    return "\n".join(out)


def grants_table(grants: list[Grant]) -> str:
    if not grants:
        return "(no grants)"
    return "\n".join(
        f"{g.id}  {g.from_space} → {_where(g.to_space)}  ai {g.ai or '*'}  until {_time(g.until) or 'revoked'}"
        for g in grants
    )


def spaces_table(spaces: list[Space]) -> str:
    if not spaces:
        return "(no spaces: esfis space add FOLDER)"
    lines = []
    for s in spaces:
        folders = ", ".join(folder_label(f) for f in s.folders) or "(no folder)"
        lines.append(f"{s.name}  {counted(s.memories, 'memory')}  {folders}")
    return "\n".join(lines)


def rules_table(rules: list[Rule]) -> str:
    return "\n".join(r.describe() for r in rules) if rules else "(no rules: everything allowed)"


def deliveries_table(deliveries: list[Delivery]) -> str:
    if not deliveries:
        return "(no deliveries)"
    lines = []
    for d in deliveries:
        went = sum(1 for i in d.items if i.outcome == "delivered")
        lines.append(
            f"{d.id}  {_time(d.at)}  {d.ai}  [{_where(d.space)}]  {d.transport}  {went} in  {_clip(d.query, 60)!r}"
        )
    return "\n".join(lines)


def why_text(w: Why) -> str:
    d = w.delivery
    out = [
        f"delivery {d.id} at {_time(d.at)}: {d.ai} in {_where(d.space)} via {d.transport}"
        + (f" (run {d.run_id})" if d.run_id else ""),
        f"query: {d.query!r} (limit {d.limit})",
        "searched: " + (", ".join(_where(s) for s in d.searched) or "nothing"),
        "went in:",
    ]
    went = [i for i in w.items if i.item.outcome == "delivered"]
    out += [
        f"  {i.item.rank}. {i.item.score:.3f}  {i.item.memory_id}  [{_where(i.space)}]  "
        + (_clip(i.text) if i.text is not None else "(forgotten)")
        for i in went
    ] or ["  (nothing)"]
    out.append("cut:")
    for i in w.items:
        if i.item.outcome == "limit":
            out.append(f"  limit: {i.item.memory_id} (rank {i.item.rank}, {i.item.score:.3f})")
    explain = {
        "space": "in other spaces, never scored",
        "policy": "in partitions denied by policy, never scored",
        "superseded": "superseded, skipped before ranking",
        "expired": "expired, skipped before ranking",
        "not_yet_valid": "not yet valid, skipped before ranking",
        "filter": "their data did not match the recall's filter, skipped before ranking",
        "relevance": "scored in scope, ranked below the recorded candidates",
        "copy": "copies of a delivered memory's fact, folded (the later one wins)",
        "limit": "past the limit",
    }
    for reason, count in d.cut.items():
        if reason != "limit":
            out.append(f"  {reason}: {counted(count, 'memory')} {explain.get(reason, '')}".rstrip())
    out.append(
        "other spaces that would have answered (scored now, for the operator; never seen by the agent; "
        "'policy': in the caller's reach, a rule kept it out; 'space': out of its reach):"
    )
    out += [f"  {o.score:.3f}  {o.memory_id}  [{_where(o.space)}, {o.reason}]  {_clip(o.text)}" for o in w.others] or [
        "  (none)"
    ]
    if w.others_more:
        out.append(f"  … and {w.others_more} more")
    return "\n".join(out)
