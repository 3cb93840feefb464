"""How domain objects are shown: the JSON shapes every interface shares, and the CLI's text.

``recall_json`` is the one shape of a recall answer, used alike by ``esfis recall --json`` and
``POST /v1/recall``: memories best first, ``space`` null for personal, and nothing else.
"""

from __future__ import annotations

from typing import Any

from server.barrier import Grant
from server.clock import iso
from server.labels import Labels
from server.models import (
    Delivery,
    Memory,
    OpenedMemory,
    RecalledMemory,
    Reference,
    Space,
    Token,
    TrustedSource,
    Why,
)
from server.policies import Rule
from server.registry import folder_label
from server.runs import Run, TrailStep


_time = iso


def labels_json(labels: Labels) -> dict[str, Any]:
    return {
        "space": labels.space,
        "origin": list(labels.origin),
        "digest": None if labels.digest is None else "sha256:" + labels.digest,
        "run": labels.run,
        "from": list(labels.from_),
    }


def recalled_json(m: RecalledMemory) -> dict[str, Any]:
    return {
        "id": m.id,
        "text": m.text,
        "space": m.space,
        "score": m.score,
        "created_at": _time(m.created_at),
        "valid_until": _time(m.valid_until),
        "labels": labels_json(m.labels),
    }


def recall_json(memories: list[RecalledMemory]) -> dict[str, Any]:
    return {"memories": [recalled_json(m) for m in memories]}


def memory_json(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id,
        "text": m.text,
        "space": m.space,
        "ai": m.ai,
        "created_at": _time(m.created_at),
        "valid_from": _time(m.valid_from),
        "valid_until": _time(m.valid_until),
        "superseded_by": m.superseded_by,
        "labels": labels_json(m.labels),
    }


def reference_json(r: Reference) -> dict[str, Any]:
    return {
        "ref": r.ref,
        "run": r.run,
        "created_at": _time(r.created_at),
        "memories": [{"id": i, "labels": labels_json(l)} for i, l in r.items],
    }


def opened_json(r: Reference, memories: list[OpenedMemory]) -> dict[str, Any]:
    return {
        "ref": r.ref,
        "run": r.run,
        "memories": [
            {"id": m.id, "text": m.text, "forgotten": m.text is None, "labels": labels_json(m.labels)}
            for m in memories
        ],
    }


def grant_json(g: Grant) -> dict[str, Any]:
    return {
        "id": g.id,
        "from": g.from_space,
        "to": g.to_space,
        "ai": g.ai,
        "until": _time(g.until),
        "created_at": _time(g.created_at),
        "revoked_at": _time(g.revoked_at),
    }


def token_json(t: Token) -> dict[str, Any]:
    return {
        "id": t.id,
        "ai": t.ai,
        "space": t.space,
        "operator": t.operator,
        "created_at": _time(t.created_at),
        "revoked_at": _time(t.revoked_at),
    }


def tokens_table(tokens: list[Token]) -> str:
    if not tokens:
        return "(no tokens: esfis token create)"
    lines = []
    for t in tokens:
        who = "operator" if t.operator else f"ai {t.ai}" + (f" in {t.space}" if t.space else "")
        state = "active" if t.active else f"revoked {_time(t.revoked_at)}"
        lines.append(f"{t.id}  {who}  created {_time(t.created_at)}  {state}")
    return "\n".join(lines)


def trusted_json(t: TrustedSource) -> dict[str, Any]:
    return {"source": t.source, "created_at": _time(t.created_at)}


def run_json(r: Run, steps: list[TrailStep] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "run": r.id,
        "name": r.name,
        "ai": r.ai,
        "transport": r.transport,
        "scope": r.space,
        "opened_at": _time(r.opened_at),
        "carries": r.carried.marks(),
    }
    if steps is None:
        out["step_count"] = r.steps
    else:
        out["steps"] = [
            {
                "at": _time(t.at),
                "kind": t.step.kind,
                "labels": list(t.step.labels),
                "decision": t.step.decision,
                "rule": t.step.rule,
                "grant": t.step.grant,
                "target": t.step.target,
                "memory_ids": list(t.step.memory_ids),
            }
            for t in steps
        ]
    return out


def space_json(s: Space) -> dict[str, Any]:
    return {"name": s.name, "folders": list(s.folders), "memories": s.memories, "created_at": _time(s.created_at)}


def rule_json(r: Rule) -> dict[str, Any]:
    return {"ai": r.ai, "space": r.space, "effect": r.effect}


def delivery_json(d: Delivery) -> dict[str, Any]:
    return {
        "id": d.id,
        "at": _time(d.at),
        "ai": d.ai,
        "space": d.space,
        "transport": d.transport,
        "run_id": d.run_id,
        "query": d.query,
        "limit": d.limit,
        "searched": ["personal" if s is None else s for s in d.reached],
        "items": [
            {"memory_id": i.memory_id, "rank": i.rank, "score": i.score, "outcome": i.outcome} for i in d.items
        ],
        "cut": d.cut,
    }


def why_json(w: Why) -> dict[str, Any]:
    return {
        "delivery": delivery_json(w.delivery),
        "went_in": [
            {"memory_id": i.item.memory_id, "rank": i.item.rank, "score": i.item.score, "space": i.space,
             "text": i.text, "forgotten": i.text is None}
            for i in w.items if i.item.outcome == "delivered"
        ],
        "cut_by_limit": [
            {"memory_id": i.item.memory_id, "rank": i.item.rank, "score": i.item.score, "forgotten": i.text is None}
            for i in w.items if i.item.outcome == "limit"
        ],
        "other_spaces": {
            "note": "scored now for the operator; never seen by the agent",
            "top": [
                {"memory_id": o.memory_id, "space": o.space, "score": o.score, "text": o.text, "reason": o.reason}
                for o in w.others
            ],
            "more": w.others_more,
        },
    }


# -- text -----------------------------------------------------------------------------------


def _where(space: str | None) -> str:
    return "personal" if space is None else space


def _clip(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def recall_table(memories: list[RecalledMemory]) -> str:
    if not memories:
        return "(no memories)"
    return "\n".join(
        f"{m.score:.3f}  {m.id}  [{_where(m.space)}]  {_clip(m.text)}"
        + (f"  ({', '.join(m.labels.origin)})" if m.labels.origin else "")
        for m in memories
    )


def runs_table(runs: list[Run]) -> str:
    if not runs:
        return "(no runs)"
    return "\n".join(
        f"{r.id}  {_time(r.opened_at)}  {r.ai}  [{_where(r.space)}]  {r.transport}  {r.steps} steps  "
        f"carries {', '.join(r.carried.marks()) or 'nothing'}"
        for r in runs
    )


def trail_text(r: Run, steps: list[TrailStep]) -> str:
    out = [
        f"run {r.id} ({r.name}): {r.ai} via {r.transport}, sealed in {_where(r.space)} at {_time(r.opened_at)}",
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
        lines.append(f"{s.name}  {s.memories} memories  {folders}")
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
            f"{d.id}  {_time(d.at)}  {d.ai}  [{_where(d.space)}]  {d.transport}  "
            f"{went} in  {_clip(d.query, 60)!r}"
        )
    return "\n".join(lines)


def why_text(w: Why) -> str:
    d = w.delivery
    out = [
        f"delivery {d.id} at {_time(d.at)}: {d.ai} in {_where(d.space)} via {d.transport}"
        + (f" (run {d.run_id})" if d.run_id else ""),
        f"query: {d.query!r} (limit {d.limit})",
        "searched: " + (", ".join(_where(s) for s in d.reached) or "nothing"),
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
        "relevance": "scored in scope, ranked below the recorded candidates",
        "limit": "past the limit",
    }
    for reason, count in d.cut.items():
        if reason != "limit":
            out.append(f"  {reason}: {count} memories {explain.get(reason, '')}".rstrip())
    out.append("other spaces that would have answered (scored now, for the operator; never seen by the agent):")
    out += [
        f"  {o.score:.3f}  {o.memory_id}  [{_where(o.space)}, {o.reason}]  {_clip(o.text)}" for o in w.others
    ] or ["  (none)"]
    if w.others_more:
        out.append(f"  … and {w.others_more} more")
    return "\n".join(out)
