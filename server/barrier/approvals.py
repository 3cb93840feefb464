"""Held writes: a write or a forget that needs a person, waiting for the operator's answer.

Over HTTP (the API and ``/mcp``) the client that would answer an approval may be the model
itself, so no answer of the caller counts as a person's (docs/barrier.md). Such a call is
**held** instead: a row here with exactly what would be written, shown on Settings › Approvals,
and applied only if the operator approves it there (or with ``esfis approvals approve``). The
caller learns the outcome by the approval's id (``GET /v1/approvals/{id}``, MCP
``check_approval``). The same queue serves an MCP host over stdio that cannot elicit.

The rules this book keeps:

- **One pending a principal.** A run holds at most one write at a time (a unique index on the
  pending rows), and so does its *principal*: the token that opened it, with every run token
  that token opened (an agent token, a runs-only token, an OAuth connection). A second answers
  ``approval_pending``: with the first's id when its own run holds it, without when another run
  does (which it could neither check nor withdraw). So no agent fills the queue by opening runs. Write
  transactions are serialized on both catalogs, so the check and the insert cannot interleave.
- **Texts never outlive the decision.** A held text is cleared the moment its approval is
  decided, expires, is withdrawn by its run (``forget apr_…``) or is purged with a space it
  targets or carries; ``Catalog.scrub`` then leaves no copy of it in the catalog's files
  (SQLite: ``secure_delete``, a checkpoint, a rebuild when a page's gap kept a fragment;
  PostgreSQL: a VACUUM). An approved write's text lives in its memory, as any other.
- **Expiry and voiding.** A held write expires after ``ESFIS_APPROVAL_HOURS`` (24). It is void,
  never applied, once its run has ended or expired, or its token is revoked: ``settle`` marks
  these, and ``Operator.decide`` checks again under the write lock before applying.

A row carries ids, marks and the text, never a token; the operator's listing shows the text
escaped and quoted (``ApprovalRequest.message``).
"""

from __future__ import annotations

import builtins
import json
import re
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import get_args

from server.catalog import Catalog, Tx
from server.clock import Clock, from_micros, to_micros
from server.errors import ApprovalDecided, ApprovalNotFound, ApprovalPending, InvalidInput, RunEnded
from server.models import ApprovalRequest, Caller, Held, Status

STATUSES: tuple[Status, ...] = get_args(Status)
APPROVAL_ID = re.compile(r"apr_[0-9a-f]{24}")
DEFAULT_HOURS = 24


def is_approval_id(value: object) -> bool:
    return isinstance(value, str) and value.startswith("apr_")


class ApprovalBook:
    def __init__(self, catalog: Catalog, clock: Clock, *, hours: float = DEFAULT_HOURS) -> None:
        self.catalog = catalog
        self.clock = clock
        self.life = timedelta(hours=hours)

    def hold(
        self,
        caller: Caller,
        request: ApprovalRequest,
        *,
        carried: Iterable[str],
        blocked: Iterable[str],
        origins: Iterable[str] = (),
        memory_id: str | None = None,
        valid_until: datetime | None = None,
        tx: Tx,
    ) -> Held:
        """Hold ``request`` for the operator, in ``tx`` (with the trail's steps). ``carried``: every
        mark the run carries; ``blocked``: those that need the person, named in full (the
        operator reaches every space). Refused with ``approval_pending`` while the run holds one."""
        now = self.clock()
        self._expire(tx, now, run_id=caller.run_id)
        waiting = tx.one("SELECT id FROM approvals WHERE run_id = ? AND status = 'pending'", (caller.run_id,))
        if waiting is not None:
            raise _pending(waiting["id"])
        if caller.token_id is not None and self._principals_pending(tx, caller.token_id, now) is not None:
            # Another run's call: not named (this run can neither check nor withdraw it).
            raise ApprovalPending(
                "a call of this token, or of another run its opener opened, already waits for the "
                "operator's approval: one at a time; ask again once the operator has answered it or "
                "the run that holds it has withdrawn it"
            )
        held = Held(
            id="apr_" + secrets.token_hex(12),
            status="pending",
            action=request.action,
            rule=request.rule,
            ai=caller.ai,
            transport=caller.transport,
            run_id=caller.run_id,
            run_kind=caller.run_kind,
            run_name=caller.run_name,
            run_parent=caller.run_parent,
            token_id=caller.token_id,
            scope=caller.scope,
            space=caller.space,
            target=request.target,
            carried=tuple(sorted(set(carried))),
            blocked=tuple(blocked),
            origins=tuple(origins),
            text=None if request.action == "forget" else request.text,
            data=request.data,
            memory_id=memory_id,
            valid_until=valid_until,
            created_at=now,
            expires_at=now + self.life,
        )
        inserted = tx.execute(
            "INSERT INTO approvals (id, status, action, rule, ai, transport, run_id, run_kind, run_name, run_parent, "
            "token_id, scope, space, target, carried, blocked, origins, text, memory_id, valid_until, created_at, "
            "expires_at, data) VALUES (?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (
                held.id,
                held.action,
                held.rule,
                held.ai,
                held.transport,
                held.run_id,
                held.run_kind,
                held.run_name,
                held.run_parent,
                held.token_id,
                held.scope,
                held.space,
                held.target,
                json.dumps(list(held.carried)),
                json.dumps(list(held.blocked)),
                json.dumps(list(held.origins)),
                held.text,
                held.memory_id,
                None if valid_until is None else to_micros(valid_until),
                to_micros(now),
                to_micros(held.expires_at),
                held.data,
            ),
        ).rowcount
        if not inserted:  # another call of this run won the race for its one pending row
            waiting = tx.one("SELECT id FROM approvals WHERE run_id = ? AND status = 'pending'", (caller.run_id,))
            raise _pending(waiting["id"] if waiting is not None else "another")
        return held

    def _principals_pending(self, tx: Tx, token_id: str, now: datetime):
        """A live pending call of the principal behind ``token_id``: the token that opened it
        (itself when it opened nothing), or any run token that one opened. Rows whose run or
        token is dead, or that expired, do not count (``settle`` marks them later)."""
        row = tx.one("SELECT COALESCE(parent, id) AS principal FROM tokens WHERE id = ?", (token_id,))
        if row is None:
            return None
        at = to_micros(now)
        return tx.one(
            "SELECT a.id FROM approvals a JOIN tokens t ON t.id = a.token_id "
            "WHERE a.status = 'pending' AND a.expires_at > ? AND (t.id = ? OR t.parent = ?) "
            f"AND a.token_id NOT IN ({_DEAD_TOKENS}) AND a.run_id NOT IN (SELECT id FROM runs "
            "WHERE ended_at IS NOT NULL OR (expires_at IS NOT NULL AND expires_at <= ?)) "
            "ORDER BY a.created_at LIMIT 1",
            (at, row["principal"], row["principal"], at, at),
        )

    # -- reading --------------------------------------------------------------------------

    def get(self, approval_id: str, *, settle: bool = True) -> Held:
        """One approval; with ``settle``, what can no longer be applied is marked first."""
        if not isinstance(approval_id, str) or not APPROVAL_ID.fullmatch(approval_id):
            raise ApprovalNotFound(f"no approval {str(approval_id)[:80]}")
        if settle:
            self.settle()
        row = self.catalog.one("SELECT * FROM approvals WHERE id = ?", (approval_id,))
        if row is None:
            raise ApprovalNotFound(f"no approval {approval_id}")
        return _held(row)

    def of(self, caller: Caller, approval_id: str) -> Held:
        """An approval as its own caller asks after it: one its run (or its token) made; any
        other answers exactly like an id that never existed."""
        try:
            held = self.get(approval_id)
        except ApprovalNotFound:
            raise ApprovalNotFound(f"no approval {str(approval_id)[:80]}") from None
        if held.run_id != caller.run_id and (held.token_id is None or held.token_id != caller.token_id):
            raise ApprovalNotFound(f"no approval {approval_id}")
        return held

    def list(self, *, status: str | None = "pending", last: int = 100) -> builtins.list[Held]:
        """Newest first; the pending ones by default. ``status`` comes from an interface as typed:
        checked here against the statuses."""
        if status is not None and status not in STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}", field="status")
        if not 1 <= last <= 10_000:
            raise InvalidInput("last must be from 1 to 10000", field="last")
        self.settle()
        clause, params = ("WHERE status = ? ", (status,)) if status is not None else ("", ())
        rows = self.catalog.all(
            f"SELECT * FROM approvals {clause}ORDER BY created_at DESC, id LIMIT ?", (*params, last)
        )
        return [_held(r) for r in rows]

    def waiting(self) -> int:
        row = self.catalog.one("SELECT count(*) AS n FROM approvals WHERE status = 'pending'")
        return int(row["n"]) if row else 0

    # -- settling ---------------------------------------------------------------------------

    def settle(self) -> int:
        """Mark what can no longer be applied, clearing its text: expired ones, and those whose
        run has ended or expired or whose token was revoked (or expired). Returns how many."""
        now = to_micros(self.clock())
        with self.catalog.transaction() as tx:
            held = {
                r["id"]: (r["text"], r["data"])
                for r in tx.all("SELECT id, text, data FROM approvals WHERE status = 'pending'")
            }
            changed = self._expire(tx, self.clock())
            changed += self.void_dead(tx, now)
            if changed:
                left = {r["id"] for r in tx.all("SELECT id FROM approvals WHERE status = 'pending'")}
        if changed:
            self.catalog.scrub([v.encode() for i, pair in held.items() if i not in left for v in pair if v])
        return changed

    def _expire(self, tx: Tx, now: datetime, *, run_id: str | None = None) -> int:
        clause, params = ("AND run_id = ?", (run_id,)) if run_id is not None else ("", ())
        return int(
            tx.execute(
                "UPDATE approvals SET status = 'expired', text = NULL, data = NULL, decided_at = expires_at, "
                "reason = 'nobody answered in time' "
                f"WHERE status = 'pending' AND expires_at <= ? {clause}",
                (to_micros(now), *params),
            ).rowcount
            or 0
        )

    def void_dead(self, tx: Tx, now: int) -> int:
        """Pending rows whose run ended or expired, or whose token is revoked or expired."""
        return int(
            tx.execute(
                "UPDATE approvals SET status = 'void', text = NULL, data = NULL, decided_at = ?, "
                "reason = 'its run ended or its token was revoked' WHERE status = 'pending' AND ("
                "run_id IN (SELECT id FROM runs WHERE ended_at IS NOT NULL OR (expires_at IS NOT NULL AND expires_at <= ?))"
                f" OR token_id IN ({_DEAD_TOKENS}))",
                (now, now, now),
            ).rowcount
            or 0
        )

    def lapsed(self, held: Held) -> tuple[Status, str] | None:
        """Why a pending call can no longer be applied, if so: it expired, its run ended or
        expired, or its token can no longer act."""
        now = to_micros(self.clock())
        if to_micros(held.expires_at) <= now:
            return "expired", "nobody answered in time"
        run = self.catalog.one("SELECT ended_at, expires_at FROM runs WHERE id = ?", (held.run_id,))
        if run is not None and (
            run["ended_at"] is not None or (run["expires_at"] is not None and run["expires_at"] <= now)
        ):
            return "void", "its run ended"
        if held.token_id is not None and self.catalog.one(
            f"SELECT 1 FROM ({_DEAD_TOKENS}) d WHERE d.id = ?", (now, held.token_id)
        ):
            return "void", "its token was revoked or expired"
        return None

    def close(
        self, tx: Tx, held: Held, status: Status, *, by: str, reason: str | None = None, result: str | None = None
    ) -> None:
        """Decide a pending row in ``tx``, clearing its text; refused if it is no longer pending,
        and, to approve, if its token can no longer act (checked under the write lock)."""
        if status == "approved" and held.token_id is not None:
            dead = tx.one(f"SELECT 1 FROM ({_DEAD_TOKENS}) d WHERE d.id = ?", (to_micros(self.clock()), held.token_id))
            if dead is not None:
                raise RunEnded("its token was revoked or expired")
        changed = tx.execute(
            "UPDATE approvals SET status = ?, text = NULL, data = NULL, decided_at = ?, decided_by = ?, reason = ?, result = ? "
            "WHERE id = ? AND status = 'pending'",
            (status, to_micros(self.clock()), by, reason, result, held.id),
        ).rowcount
        if not changed:
            raise ApprovalDecided(f"approval {held.id} was decided already")

    def void(self, tx: Tx, held: Held, reason: str, *, status: Status = "void") -> bool:
        """Void (or expire) a pending row in ``tx``: it can no longer be applied. Its text goes."""
        changed = tx.execute(
            "UPDATE approvals SET status = ?, text = NULL, data = NULL, decided_at = ?, reason = ? "
            "WHERE id = ? AND status = 'pending'",
            (status, to_micros(self.clock()), reason, held.id),
        ).rowcount
        return bool(changed)

    def purge_space(self, tx: Tx, space: str) -> int:
        """Clear the pending rows that write into ``space`` or carry its data (its space removed
        with its memories): their texts go with the space's."""
        mark = json.dumps(f"space:{space}")
        return int(
            tx.execute(
                "UPDATE approvals SET status = 'void', text = NULL, data = NULL, decided_at = ?, reason = 'its space was purged' "
                f"WHERE status = 'pending' AND (target = ? OR {tx.sql.find}(carried, ?) > 0)",
                (to_micros(self.clock()), space, mark),
            ).rowcount
            or 0
        )


# Tokens that can no longer act (one parameter: now): revoked, expired, or a run token whose opener is revoked.
_DEAD_TOKENS = (
    "SELECT t.id FROM tokens t LEFT JOIN tokens p ON p.id = t.parent WHERE t.revoked_at IS NOT NULL "
    "OR (t.expires_at IS NOT NULL AND t.expires_at <= ?) OR p.revoked_at IS NOT NULL"
)


def _pending(approval_id: str) -> ApprovalPending:
    return ApprovalPending(
        f"this run already has a call waiting for the operator's approval ({approval_id}): check it "
        "(GET /v1/approvals/{id}, MCP check_approval), or withdraw it with forget, before asking again"
    )


def _held(row) -> Held:
    created, expires = from_micros(row["created_at"]), from_micros(row["expires_at"])
    assert created is not None and expires is not None
    return Held(
        id=row["id"],
        status=row["status"],
        action=row["action"],
        rule=row["rule"],
        ai=row["ai"],
        transport=row["transport"],
        run_id=row["run_id"],
        run_kind=row["run_kind"],
        run_name=row["run_name"],
        run_parent=row["run_parent"],
        token_id=row["token_id"],
        scope=row["scope"],
        space=row["space"],
        target=row["target"],
        carried=tuple(json.loads(row["carried"])),
        blocked=tuple(json.loads(row["blocked"])),
        origins=tuple(json.loads(row["origins"])),
        text=row["text"],
        memory_id=row["memory_id"],
        valid_until=from_micros(row["valid_until"]),
        created_at=created,
        expires_at=expires,
        decided_at=from_micros(row["decided_at"]),
        decided_by=row["decided_by"],
        reason=row["reason"],
        result=row["result"],
        data=row["data"],
    )
