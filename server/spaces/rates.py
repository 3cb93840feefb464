"""Rate counters kept in the catalog, so every worker of every server counts the same calls.

The ``limits`` library decides (fixed windows, parsed from ``"600/minute"``); this is the storage
it counts in (``server.http.rate_limits`` adapts it). A counter is a key (a limit's name and
whom it counts: a token id, an address; never a secret), a count and the end of its window; one
upsert per hit that returns the count it left, atomic by itself (``Catalog.write_returning``),
so two workers never both see room for the last call, and a hit costs one statement, not a
transaction under the catalog's write lock. Counters past their window are pruned by the server's upkeep.
"""

from __future__ import annotations

from server.catalog import Catalog
from server.clock import Clock, system_clock, to_micros

MAX_KEY = 300


class RateBook:
    def __init__(self, catalog: Catalog, clock: Clock = system_clock) -> None:
        self.catalog = catalog
        self.clock = clock

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
        )
        return int(rows[0]["count"]) if rows else amount

    def incr_many(self, keys: list[tuple[str, int]]) -> list[int]:
        """``incr`` of each (key, expiry) by one, in one statement: a request's counters (its
        address's and its token's) cost one write, not one each. The keys must differ."""
        now = to_micros(self.clock())
        keys = [(key[:MAX_KEY], expiry_s) for key, expiry_s in keys]
        values = ", ".join(["(?, 1, ?)"] * len(keys))
        params = tuple(v for key, expiry_s in keys for v in (key, now + expiry_s * 1_000_000))
        rows = self.catalog.write_returning(
            f"INSERT INTO rate_counters (key, count, expires_at) VALUES {values} ON CONFLICT (key) DO UPDATE SET "
            "count = CASE WHEN rate_counters.expires_at <= ? THEN excluded.count "
            "ELSE rate_counters.count + excluded.count END, "
            "expires_at = CASE WHEN rate_counters.expires_at <= ? THEN excluded.expires_at "
            "ELSE rate_counters.expires_at END RETURNING key, count",
            (*params, now, now),
        )
        counts = {row["key"]: int(row["count"]) for row in rows}
        return [counts.get(key, 1) for key, _ in keys]

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
