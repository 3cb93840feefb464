"""Runs and their trail: one agent's unit of work, what it carries, and every step it took.

A run is named by its interface: an MCP session, the HTTP requests of one token that share an
``X-Esfis-Run`` header, a CLI ``--run``. Its id is derived from who owns the name (the token,
the MCP session, the CLI's AI) and the name, so an id another token uses is another run and
two first steps of one run at once land on one row.

A run is **sealed** at its first step with the caller's space: a later step from outside that
subtree is refused. It **carries** the marks (``server.labels``) of everything delivered to it;
the set only grows, and lives in the catalog, so it survives a restart. Each step is recorded
with ids, marks and rules, never a text.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable

from server.catalog import Catalog, Tx
from server.clock import Clock, from_micros, to_micros
from server.errors import DataBarrier, InvalidInput, RunNotFound
from server.labels import Carried
from server.models import Caller
from server.spaces import contains

STEP_KINDS = ("recall", "get", "share", "context_open", "gate", "approval_requested", "approved", "declined",
              "write", "forget")


def run_id_for(owner: str, name: str) -> str:
    return "run_" + hashlib.sha256(f"{owner}\n{name}".encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Step:
    kind: str
    labels: tuple[str, ...] = ()
    decision: str | None = None  # gates: allowed | refused
    rule: str | None = None
    grant: str | None = None
    target: str | None = None  # a space mark
    memory_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrailStep:
    at: datetime
    step: Step


@dataclass(frozen=True)
class Run:
    id: str
    name: str
    ai: str
    transport: str
    space: str | None  # sealed at the first step
    token_scope: str | None
    opened_at: datetime | None  # None: not opened yet (no step recorded)
    carried: Carried
    steps: int = 0

    @property
    def opened(self) -> bool:
        return self.opened_at is not None

    def admits(self, caller: Caller) -> bool:
        """Whether a step from where ``caller`` stands lies inside the run's sealed scope."""
        if not self.opened:
            return True
        if self.space is None:
            return caller.space is None
        return caller.space is not None and contains(self.space, caller.space)


class RunBook:
    def __init__(self, catalog: Catalog, clock: Clock) -> None:
        self.catalog = catalog
        self.clock = clock

    def current(self, caller: Caller) -> Run:
        """The caller's run as it stands now (not opened yet if it has no step)."""
        row = self.catalog.one("SELECT * FROM runs WHERE id = ?", (caller.run_id,))
        if row is None:
            return Run(caller.run_id, caller.run_name, caller.ai, caller.transport, caller.space, caller.scope,
                       None, Carried.of(()))
        return self._run(row)

    def sealed_refusal(self, run: Run, caller: Caller) -> DataBarrier:
        where = "no space" if run.space is None else f"space {run.space!r}"
        here = "no space" if caller.space is None else f"space {caller.space!r}"
        return DataBarrier(
            f"data_barrier: this run was sealed in {where} at its first step; a step from {here} lies outside it "
            "(start a new run there)"
        )

    def record(self, tx: Tx, run: Run, caller: Caller, steps: Iterable[Step], carry: Iterable[str] = ()) -> None:
        """Open the run if this is its first step, add what it now carries, append the steps."""
        now = to_micros(self.clock())
        if not run.opened:
            opened = tx.execute(
                "INSERT INTO runs (id, name, ai, transport, space, token_scope, opened_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (run.id, run.name, caller.ai, caller.transport, caller.space, caller.scope, now),
            ).rowcount
            if not opened:  # another first step won the race: its seal holds for this one
                row = tx.one("SELECT * FROM runs WHERE id = ?", (run.id,))
                if not self._run(row).admits(caller):
                    raise self.sealed_refusal(self._run(row), caller)
        marks = sorted(set(carry))
        if marks:
            # WHERE true: SQLite would read the ON of the upsert as a join's.
            tx.execute(f"INSERT INTO run_labels (run, label) SELECT ?, value FROM {tx.sql.values} "
                       "WHERE true ON CONFLICT DO NOTHING", (run.id, json.dumps(marks)))
        tx.executemany(
            "INSERT INTO run_steps (run, at, kind, labels, decision, rule, grant_id, target, memory_ids) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(run.id, now, s.kind, json.dumps(list(s.labels)), s.decision, s.rule, s.grant, s.target,
              json.dumps(list(s.memory_ids))) for s in steps],
        )

    def record_now(self, run: Run, caller: Caller, steps: Iterable[Step], carry: Iterable[str] = ()) -> None:
        with self.catalog.transaction() as tx:
            self.record(tx, run, caller, steps, carry)

    # -- reading (operator) -----------------------------------------------------------------

    def list(self, *, last: int = 20) -> list[Run]:
        if not 1 <= last <= 10_000:
            raise InvalidInput("last must be from 1 to 10000", field="last")
        rows = self.catalog.all("SELECT * FROM runs ORDER BY opened_at DESC, id LIMIT ?", (last,))
        return [self._run(r, count_steps=True) for r in reversed(rows)]

    def get(self, run_id: str) -> Run:
        row = self.catalog.one("SELECT * FROM runs WHERE id = ?", (run_id,))
        if row is None:
            raise RunNotFound(f"no run {str(run_id)[:80]}")
        return self._run(row, count_steps=True)

    def trail(self, run_id: str) -> tuple[Run, list[TrailStep]]:
        run = self.get(run_id)
        rows = self.catalog.all("SELECT * FROM run_steps WHERE run = ? ORDER BY id", (run_id,))
        return run, [
            TrailStep(
                from_micros(r["at"]),  # type: ignore[arg-type]
                Step(r["kind"], tuple(json.loads(r["labels"])), r["decision"], r["rule"], r["grant_id"], r["target"],
                     tuple(json.loads(r["memory_ids"]))),
            )
            for r in rows
        ]

    def page(self, *, ai: str | None = None, offset: int = 0, limit: int = 25) -> tuple[list[Run], int]:
        """Newest first: ``limit`` runs after ``offset``, and how many match in all."""
        clause, params = (" WHERE ai = ?", (ai,)) if ai is not None else ("", ())
        total = self.catalog.one("SELECT count(*) AS n FROM runs" + clause, params)
        rows = self.catalog.all(f"SELECT * FROM runs{clause} ORDER BY opened_at DESC, id LIMIT ? OFFSET ?",
                                (*params, limit, offset))
        return [self._run(r, count_steps=True) for r in rows], int(total["n"]) if total else 0

    def ais(self) -> list[str]:
        """Every AI that has taken a step (each recall, write, get, share or open is one)."""
        return [r["ai"] for r in self.catalog.all("SELECT DISTINCT ai FROM runs ORDER BY ai")]

    def _run(self, row, *, count_steps: bool = False) -> Run:
        marks = [r["label"] for r in self.catalog.all("SELECT label FROM run_labels WHERE run = ?", (row["id"],))]
        steps = 0
        if count_steps:
            found = self.catalog.one("SELECT count(*) AS n FROM run_steps WHERE run = ?", (row["id"],))
            steps = int(found["n"]) if found else 0
        return Run(row["id"], row["name"], row["ai"], row["transport"], row["space"], row["token_scope"],
                   from_micros(row["opened_at"]), Carried.of(marks), steps)
