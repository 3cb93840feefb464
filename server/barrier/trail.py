"""A run's trail: the steps (``server.records.Step``) as the catalog keeps them (``run_steps``).

Every step a run takes is one row: its kind, the marks it carried or named, a gate's decision
with the rule or grant behind it, its target, the memories it touched, and who took it when it
is not the run's own (an operator ending the run, answering its held call). Ids, marks and
rules only, never a text. ``server.barrier.runs`` records the steps as the run takes them;
``server.barrier.trail_upkeep`` keeps the trail bounded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from server.catalog import Catalog, Tx
from server.clock import from_micros
from server.records import Step, TrailStep


def insert_steps(tx: Tx, run_id: str, now: int, steps: Iterable[Step]) -> None:
    """Append ``steps`` to the trail of ``run_id``, all at ``now`` (micros)."""
    rows = [
        (
            run_id,
            now,
            s.kind,
            json.dumps(list(s.labels)),
            s.decision,
            s.rule,
            s.grant,
            s.target,
            json.dumps(list(s.memory_ids)),
            s.actor,
        )
        for s in steps
    ]
    sql = (
        "INSERT INTO run_steps (run, at, kind, labels, decision, rule, grant_id, target, memory_ids, actor) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    if len(rows) == 1:  # a recall's or a write's one step: a statement, not PostgreSQL's pipeline of many
        tx.execute(sql, rows[0])
    elif rows:
        tx.executemany(sql, rows)


def read_steps(catalog: Catalog, run_id: str) -> list[TrailStep]:
    """Every step of ``run_id``, in the order they were taken."""
    rows = catalog.all("SELECT * FROM run_steps WHERE run = ? ORDER BY id", (run_id,))
    return [
        TrailStep(
            from_micros(r["at"]),
            Step(
                r["kind"],
                tuple(json.loads(r["labels"])),
                r["decision"],
                r["rule"],
                r["grant_id"],
                r["target"],
                tuple(json.loads(r["memory_ids"])),
                r["actor"],
            ),
        )
        for r in rows
    ]
