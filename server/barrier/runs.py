"""Runs: one agent's unit of work, what it carries, and the book that records its steps.

The platform decides which run a step belongs to, never the caller (docs/barrier.md):

- **standing**: every request of one agent token over HTTP. Its seal is the token's scope (its
  subtree, or everywhere for an unscoped token); an operator who ends it starts a fresh one.
- **token**: a run token's one run (``POST /v1/runs``), sealed at its first step. A run token
  opened with an agent token shares what that token's standing run carries, both ways: whoever
  holds the agent token could read with one and write with the other.
- **session**: an interface's own session: an MCP process, a CLI ``--run``.
- **once**: one CLI command without ``--run``.

An id is derived from who owns the name and the name (``server.records.run_id_for``), so an id another owner
uses is another run and two first steps of one run at once land on one row.

A run is **sealed** at its first step: a later step from outside that subtree is refused. It
**carries** the marks (``server.labels``) of everything delivered to it; the set only grows, and
lives in the catalog, so it survives a restart. An ended run takes no further step. Each step is
recorded in the run's trail (``server.barrier.trail``) with ids, marks and rules, never a text.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
from collections.abc import Iterable

from server.barrier.trail import insert_steps, read_steps
from server.catalog import Catalog, Tx
from server.clock import Clock, from_micros, to_micros
from server.errors import DataBarrier, InvalidInput, RunEnded, RunNotFound
from server.labels import Carried
from server.models import Caller
from server.records import RUN_ID, Run, Step, TrailStep  # Run, Step, TrailStep: also named here
from server.spaces import contains


def check_run_id(run_id: object) -> str:
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise RunNotFound(f"no run {str(run_id)[:80]}")
    return run_id


def admits(run: Run, caller: Caller) -> bool:
    """Whether a step from where ``caller`` stands lies inside the run's sealed scope."""
    if not run.opened or run.everywhere:
        return True
    if run.space is None:
        return caller.space is None
    return caller.space is not None and contains(run.space, caller.space)


def reaches(run: Run, space: str) -> bool:
    """Whether the run's sealed scope reaches ``space``: only then may an answer name it."""
    return run.everywhere or (run.space is not None and contains(run.space, space))


# A run token still alive (its run may not be opened yet); the one parameter is now, in micros.
_LIVE_RUN_TOKEN = "run_id IS NOT NULL AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)"


class RunBook:
    def __init__(self, catalog: Catalog, clock: Clock) -> None:
        self.catalog = catalog
        self.clock = clock

    def current(self, caller: Caller) -> Run:
        """The caller's run as it stands now (not opened yet if it has no step), carrying its own
        marks and those of the run it shares them with."""
        row = self.catalog.one("SELECT * FROM runs WHERE id = ?", (caller.run_id,))
        if row is not None:
            return self._run(row)
        standing = caller.run_kind == "standing"
        return Run(
            caller.run_id,
            caller.run_name,
            caller.ai,
            caller.transport,
            caller.scope if standing else caller.space,
            caller.scope,
            None,
            Carried.of(self._marks(caller.run_id, caller.run_parent)),
            kind=caller.run_kind,
            token_id=caller.token_id,
            parent=caller.run_parent,
            everywhere=standing and caller.scope is None,
            expires_at=caller.run_expires,
        )

    def ended_refusal(self, run: Run) -> RunEnded:
        how = "it expired" if run.ended_by is None else f"it was ended by {run.ended_by}"
        return RunEnded(f"run {run.id} takes no further step: {how} (start a new run)")

    def sealed_refusal(self, run: Run, caller: Caller) -> DataBarrier:
        where = "no space" if run.space is None else f"space {run.space!r}"
        here = "no space" if caller.space is None else f"space {caller.space!r}"
        return DataBarrier(
            f"data_barrier: this run was sealed in {where} at its first step; a step from {here} lies outside it "
            "(start a new run there)"
        )

    def record(self, tx: Tx, run: Run, caller: Caller, *, steps: Iterable[Step], carry: Iterable[str] = ()) -> None:
        """Open the run if this is its first step, add what it now carries, append the steps."""
        now = to_micros(self.clock())
        if not run.opened:
            opened = tx.execute(
                "INSERT INTO runs (id, name, ai, transport, space, token_scope, opened_at, kind, token_id, parent, "
                "everywhere, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    run.id,
                    run.name,
                    caller.ai,
                    caller.transport,
                    run.space if run.kind == "standing" else caller.space,
                    caller.scope,
                    now,
                    run.kind,
                    run.token_id,
                    run.parent,
                    int(run.everywhere),
                    None if run.expires_at is None else to_micros(run.expires_at),
                ),
            ).rowcount
            if not opened:  # another first step won the race: its seal holds for this one
                row = tx.one("SELECT * FROM runs WHERE id = ?", (run.id,))
                if not admits(self._run(row), caller):
                    raise self.sealed_refusal(self._run(row), caller)
        else:
            # Ended meanwhile (an operator, the upkeep): checked again under the write lock.
            ended = tx.one("SELECT ended_at, ended_by FROM runs WHERE id = ?", (run.id,))
            if ended is not None and ended["ended_at"] is not None and not any(s.kind == "end" for s in steps):
                raise self.ended_refusal(dataclasses.replace(run, ended_by=ended["ended_by"]))
        marks = sorted(set(carry))
        if marks:
            # Into the run it shares its marks with as well, so that neither can write what the
            # other read. WHERE true: SQLite would read the ON of the upsert as a join's.
            for holder in (run.id, run.parent):
                if holder is not None:
                    tx.execute(
                        f"INSERT INTO run_labels (run, label) SELECT ?, value FROM {tx.sql.values} "
                        "WHERE true ON CONFLICT DO NOTHING",
                        (holder, json.dumps(marks)),
                    )
        insert_steps(tx, run.id, now, steps)

    def note(self, tx: Tx, run_id: str, steps: Iterable[Step]) -> None:
        """Steps that are not the run's own (an operator's answer to its held call): recorded
        whether or not the run is still open, carrying nothing into it."""
        insert_steps(tx, run_id, to_micros(self.clock()), steps)

    def record_now(self, run: Run, caller: Caller, steps: Iterable[Step], *, carry: Iterable[str] = ()) -> None:
        with self.catalog.transaction() as tx:
            self.record(tx, run, caller, steps=steps, carry=carry)

    # -- ending (operator) ------------------------------------------------------------------

    def end(self, run_id: str, *, by: str) -> Run:
        """End a run. A run token stops working at its next request; a standing run starts afresh
        at its token's next request, and the run tokens it opened (which share its labels) stop
        too; any other run takes no further step. A step in the trail records who ended it."""
        check_run_id(run_id)
        now = to_micros(self.clock())
        with self.catalog.transaction() as tx:
            row = tx.one("SELECT * FROM runs WHERE id = ?", (run_id,))
            token = tx.one("SELECT * FROM tokens WHERE run_id = ?", (run_id,))
            if row is None and token is None:
                raise RunNotFound(f"no run {run_id}")
            if row is None:  # a run token that took no step yet: recorded now, as ended
                tx.execute(
                    "INSERT INTO runs (id, name, ai, transport, space, token_scope, opened_at, kind, token_id, "
                    "parent, expires_at) VALUES (?, 'token', ?, 'http', ?, ?, ?, 'token', ?, ?, ?)",
                    (
                        run_id,
                        token["ai"],
                        token["space"],
                        token["space"],
                        now,
                        token["id"],
                        token["parent_run"],
                        token["expires_at"],
                    ),
                )
                row = tx.one("SELECT * FROM runs WHERE id = ?", (run_id,))
            if row["ended_at"] is None:
                tx.execute("UPDATE runs SET ended_at = ?, ended_by = ? WHERE id = ?", (now, by, run_id))
                tx.execute(
                    "UPDATE tokens SET revoked_at = ? WHERE revoked_at IS NULL AND (run_id = ? OR parent_run = ?)",
                    (now, run_id, run_id),
                )
                if row["kind"] == "standing":
                    tx.execute("UPDATE tokens SET standing = standing + 1 WHERE id = ?", (row["token_id"],))
                insert_steps(tx, run_id, now, [Step("end", actor=by)])
        return self.get(run_id)

    # -- reading (operator) -----------------------------------------------------------------

    def list(self, *, last: int = 20) -> builtins.list[Run]:
        """The ``last`` runs, oldest first: those that took a step, and the run tokens still
        alive that have not yet (``opened_at`` None), by when they were opened or made."""
        if not 1 <= last <= 10_000:
            raise InvalidInput("last must be from 1 to 10000", field="last")
        rows = self.catalog.all("SELECT * FROM runs ORDER BY opened_at DESC, id LIMIT ?", (last,))
        waiting = self.catalog.all(
            f"SELECT * FROM tokens WHERE {_LIVE_RUN_TOKEN} AND run_id NOT IN (SELECT id FROM runs) "
            "ORDER BY created_at DESC LIMIT ?",
            (to_micros(self.clock()), last),
        )
        found = [(r["opened_at"], r["id"], self._run(r, count_steps=True)) for r in rows]
        found += [(t["created_at"], t["run_id"], self._waiting(t)) for t in waiting]
        found.sort(key=lambda f: (f[0], f[1]), reverse=True)
        return [run for _, _, run in reversed(found[:last])]

    def get(self, run_id: str) -> Run:
        check_run_id(run_id)
        row = self.catalog.one("SELECT * FROM runs WHERE id = ?", (run_id,))
        if row is None:
            token = self.catalog.one(
                f"SELECT * FROM tokens WHERE run_id = ? AND {_LIVE_RUN_TOKEN}", (run_id, to_micros(self.clock()))
            )
            if token is None:
                raise RunNotFound(f"no run {str(run_id)[:80]}")
            return self._waiting(token)
        return self._run(row, count_steps=True)

    def _waiting(self, token) -> Run:
        """A run token's run before its first step: not opened, not sealed, carrying what the run
        it shares its labels with carries."""
        return Run(
            token["run_id"],
            "token",
            token["ai"],
            "http",
            None,
            token["space"],
            None,
            Carried.of(self._marks(token["run_id"], token["parent_run"])),
            0,
            kind="token",
            token_id=token["id"],
            parent=token["parent_run"],
            expires_at=from_micros(token["expires_at"]),
        )

    def trail(self, run_id: str) -> tuple[Run, builtins.list[TrailStep]]:
        return self.get(run_id), read_steps(self.catalog, run_id)

    def page(self, *, ai: str | None = None, offset: int = 0, limit: int = 25) -> tuple[builtins.list[Run], int]:
        """Newest first: ``limit`` runs after ``offset``, and how many match in all. As ``list``,
        the run tokens still alive that took no step yet are among them, by when they were made."""
        clause, params = (" WHERE ai = ?", (ai,)) if ai is not None else ("", ())
        waiting_sql = f"FROM tokens WHERE {_LIVE_RUN_TOKEN} AND run_id NOT IN (SELECT id FROM runs)" + (
            " AND ai = ?" if ai is not None else ""
        )
        now = (to_micros(self.clock()),)
        total = self.catalog.one("SELECT count(*) AS n FROM runs" + clause, params)
        waiting_total = self.catalog.one("SELECT count(*) AS n " + waiting_sql, (*now, *params))
        reach = offset + limit  # the newest of both kinds, merged, then this page's slice
        rows = self.catalog.all(f"SELECT * FROM runs{clause} ORDER BY opened_at DESC, id LIMIT ?", (*params, reach))
        waiting = self.catalog.all(
            f"SELECT * {waiting_sql} ORDER BY created_at DESC, id LIMIT ?", (*now, *params, reach)
        )
        found = [(r["opened_at"], r["id"], r, False) for r in rows] + [
            (t["created_at"], t["run_id"], t, True) for t in waiting
        ]
        found.sort(key=lambda f: (-f[0], f[1]))
        shown = [self._waiting(row) if token else self._run(row, count_steps=True) for _, _, row, token in found]
        count = (int(total["n"]) if total else 0) + (int(waiting_total["n"]) if waiting_total else 0)
        return shown[offset:reach], count

    def ais(self) -> builtins.list[str]:
        """Every AI that has taken a step (each recall, write, get, share or open is one)."""
        return [r["ai"] for r in self.catalog.all("SELECT DISTINCT ai FROM runs ORDER BY ai")]

    def _marks(self, run_id: str, parent: str | None) -> builtins.list[str]:
        ids = [run_id] if parent is None else [run_id, parent]
        rows = self.catalog.all(
            f"SELECT DISTINCT label FROM run_labels WHERE run IN ({', '.join('?' for _ in ids)})", tuple(ids)
        )
        return [r["label"] for r in rows]

    def _run(self, row, *, count_steps: bool = False) -> Run:
        marks = self._marks(row["id"], row["parent"])
        steps = 0
        if count_steps:
            found = self.catalog.one("SELECT count(*) AS n FROM run_steps WHERE run = ?", (row["id"],))
            steps = int(found["n"]) if found else 0
        return Run(
            row["id"],
            row["name"],
            row["ai"],
            row["transport"],
            row["space"],
            row["token_scope"],
            from_micros(row["opened_at"]),
            Carried.of(marks),
            steps,
            kind=row["kind"],
            token_id=row["token_id"],
            parent=row["parent"],
            everywhere=bool(row["everywhere"]),
            ended_at=from_micros(row["ended_at"]),
            ended_by=row["ended_by"],
            expires_at=from_micros(row["expires_at"]),
        )
