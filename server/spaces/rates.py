"""Rate counters kept in the catalog, so every worker of every server counts the same calls.

The ``limits`` library decides (fixed windows, parsed from ``"600/minute"``); this is the storage
it counts in (``server.http.rate_limits`` adapts it). A counter is a key (a limit's name and
whom it counts: a token id, an address; never a secret), a count and the end of its window; one
upsert per hit that returns the count it left, atomic by itself (``Catalog.write_returning``),
so two workers never both see room for the last call, and a hit costs one statement, not a
transaction under the catalog's write lock. Counters past their window are pruned by the server's upkeep.

**A cap on the rows.** A stranger picks its address (an IPv6 block holds billions), so between
two prunes the rows could grow with every new address. A key that may be a stranger's is hit
*capped*: once the table holds ``MAX_ROWS`` rows, a capped key with no row of its own is counted
in its limit's overflow key instead (one count for every newcomer under that limit, limited as
one), so the rows stop at ``MAX_ROWS`` plus one overflow key a limit. A key that has its row
goes on counting in it, so a caller already counted keeps its own count; a token's keys are
never capped (tokens are the operator's to make, and bounded). The row count is kept by triggers
(``rate_rows``), so knowing whether the table is full costs a one-row read in the hit's
statement, not a count; writers at the same instant on PostgreSQL may each take the last room.
"""

from __future__ import annotations

from dataclasses import dataclass

from server.catalog import Catalog
from server.clock import Clock, system_clock, to_micros

MAX_KEY = 300
MAX_ROWS = 100_000  # rows before a newcomer's capped key is counted in its limit's overflow key


@dataclass(frozen=True)
class RateCount:
    """One key's hit: the key it was counted under (its own, or its overflow key), the count
    after it, and when that window ends (seconds since the epoch)."""

    key: str
    count: int
    ends: float


@dataclass(frozen=True)
class RateKey:
    """A key to hit: its window's length, for a capped key its overflow key, and how many hits
    to count at once (a worker's lease, ``server.http.rate_limits``; a newcomer counted in its
    overflow key counts one, so strangers sharing it are not refused sooner)."""

    key: str
    expiry_s: int
    overflow: str | None = None  # None: never capped (a token's key)
    amount: int = 1


class RateBook:
    def __init__(self, catalog: Catalog, clock: Clock = system_clock, max_rows: int = MAX_ROWS) -> None:
        self.catalog = catalog
        self.clock = clock
        self.max_rows = max_rows

    def incr(self, key: str, expiry_s: int, amount: int = 1) -> int:
        """The count after adding ``amount``; a window past its end starts again."""
        now = to_micros(self.clock())
        ends = now + expiry_s * 1_000_000
        key = key[:MAX_KEY]
        rows = self.catalog.write_returning(
            "INSERT INTO rate_counters (key, count, expires_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
            "count = CASE WHEN rate_counters.expires_at <= ? THEN excluded.count "
            "ELSE rate_counters.count + excluded.count END, "
            "expires_at = CASE WHEN rate_counters.expires_at <= ? THEN excluded.expires_at "
            "ELSE rate_counters.expires_at END RETURNING count",
            (key, amount, ends, now, now),
            durable=False,
        )
        return int(rows[0]["count"]) if rows else amount

    def incr_many(self, keys: list[tuple[str, int]]) -> list[int]:
        """``incr`` of each (key, expiry) by one, in one statement (never capped)."""
        return [hit.count for hit in self.hit_many([RateKey(key, expiry_s) for key, expiry_s in keys])]

    def hit_many(self, hits: list[RateKey]) -> list[RateCount]:
        """Each key hit once, in one statement: a request's counters (its address's and its
        token's) cost one write, not one each. A capped key with no row, the table full, is
        counted under its overflow key. The keys, and their overflow keys, must differ."""
        now = to_micros(self.clock())
        hits = [RateKey(h.key[:MAX_KEY], h.expiry_s, h.overflow and h.overflow[:MAX_KEY], h.amount) for h in hits]
        rows_sql: list[str] = []
        params: list[object] = []
        room = "(SELECT n FROM rate_rows WHERE one = 1) < ? OR EXISTS (SELECT 1 FROM rate_counters WHERE key = ?)"
        for hit in hits:
            ends = now + hit.expiry_s * 1_000_000
            if hit.overflow is None:
                rows_sql.append("(?, ?, ?)")
                params += [hit.key, hit.amount, ends]
            else:  # its own key while there is room, or while it has its row already
                rows_sql.append(f"(CASE WHEN {room} THEN ? ELSE ? END, CASE WHEN {room} THEN ? ELSE 1 END, ?)")
                params += [self.max_rows, hit.key, hit.key, hit.overflow, self.max_rows, hit.key, hit.amount, ends]
        rows = self.catalog.write_returning(
            f"INSERT INTO rate_counters (key, count, expires_at) VALUES {', '.join(rows_sql)} "
            "ON CONFLICT (key) DO UPDATE SET "
            "count = CASE WHEN rate_counters.expires_at <= ? THEN excluded.count "
            "ELSE rate_counters.count + excluded.count END, "
            "expires_at = CASE WHEN rate_counters.expires_at <= ? THEN excluded.expires_at "
            "ELSE rate_counters.expires_at END RETURNING key, count, expires_at",
            (*params, now, now),
            durable=False,  # counts a power cut may lose weaken no limit for long: not fsynced
        )
        counted = {row["key"]: (int(row["count"]), int(row["expires_at"]) / 1_000_000) for row in rows}
        answers: list[RateCount] = []
        for hit in hits:
            key = hit.overflow if hit.overflow is not None and hit.key not in counted else hit.key
            count, window_ends = counted.get(key, (hit.amount, (now + hit.expiry_s * 1_000_000) / 1_000_000))
            answers.append(RateCount(key, count, window_ends))
        return answers

    def get(self, key: str) -> int:
        row = self.catalog.one("SELECT count, expires_at FROM rate_counters WHERE key = ?", (key[:MAX_KEY],))
        if row is None or row["expires_at"] <= to_micros(self.clock()):
            return 0
        return int(row["count"])

    def expiry(self, key: str) -> float:
        """When the key's window ends, in seconds since the epoch (now, when it has none)."""
        row = self.catalog.one("SELECT expires_at FROM rate_counters WHERE key = ?", (key[:MAX_KEY],))
        now = to_micros(self.clock())
        return max(now, row["expires_at"] if row is not None else now) / 1_000_000

    def clear(self, key: str) -> None:
        with self.catalog.transaction() as tx:
            tx.execute("DELETE FROM rate_counters WHERE key = ?", (key[:MAX_KEY],))

    def prune(self) -> int:
        with self.catalog.transaction() as tx:
            return tx.execute("DELETE FROM rate_counters WHERE expires_at <= ?", (to_micros(self.clock()),)).rowcount
