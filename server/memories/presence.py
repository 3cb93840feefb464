"""What the catalog holds already, asked in bulk: an import's duplicate checks (by key, else by
the text's digest), the rows written since a mark, and which ids it names at all.

Each question is one or two statements whatever the batch's size: the keys, digests, ids or
partitions travel as one JSON array (``Dialect.values``), not as thousands of parameters.
"""

from __future__ import annotations

import json

from server.catalog import Catalog
from server.spaces import partition_key

_DIGEST_PREFIX = 16  # hex digits the catalog's digest index holds (server.catalog)


class Presence:
    """The memories table read for what it holds, never for what a caller may see."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def absent(self, space: str | None, keys: list[str | None], digests: list[str]) -> list[bool]:
        """For each row (its key, else its text's digest): True when no memory of ``space`` has the
        key or, for a row without a key, the text.

        Two queries a batch at most, whatever its size: the batch's keys and digests travel as one
        JSON array each (``Dialect.values``), not as thousands of parameters.
        """
        present_keys, present_digests = self._present(space, keys, digests)
        return [
            (k not in present_keys) if k is not None else (d not in present_digests)
            for k, d in zip(keys, digests, strict=True)
        ]

    def _present(self, space: str | None, keys: list[str | None], digests: list[str]) -> tuple[set[str], set[str]]:
        """The keys and digests of ``space``'s memories among those asked for."""
        partition = partition_key(space)
        values = self.catalog.sql.values
        wanted_keys = [k for k in keys if k is not None]
        wanted_digests = [d[:_DIGEST_PREFIX] for k, d in zip(keys, digests, strict=True) if k is None]
        present_keys: set[str] = set()
        present_digests: set[str] = set()
        if wanted_keys:
            # A key stays in import_keys until its memory is forgotten, and in the memory's row.
            found = self.catalog.all(
                f"SELECT key FROM import_keys WHERE partition = ? AND key IN (SELECT value FROM {values})",
                (partition, json.dumps(wanted_keys)),
            )
            present_keys = {r["key"] for r in found}
        if wanted_digests:
            found = self.catalog.all(
                "SELECT digest FROM memories WHERE partition = ? AND forgotten_at IS NULL "
                f"AND substr(digest, 1, {_DIGEST_PREFIX}) IN (SELECT value FROM {values})",
                (partition, json.dumps(wanted_digests)),
            )
            present_digests = {r["digest"] for r in found}
        return present_keys, present_digests

    def written_since(self, since: int, partitions: list[str]) -> dict[str, tuple[set[str], set[str]]]:
        """The keys and digests of the memories of ``partitions`` written after rowid ``since``,
        by partition. Rowids only grow (memories are never deleted): these are the rows written
        since a first check, a batch or two whatever the number of spaces, read in one query by
        rowid and compared by the caller (matching them in SQL had PostgreSQL probe the whole
        range once per key asked for). Only the partitions asked for come back: an import
        writes each space about once, so the rows of its previous batch are mostly of other
        spaces, and turning them into sets was a tenth of a thin spread's time. ``|| ''``
        keeps the partition's index out of the plan: the range of rowids is what is read."""
        written: dict[str, tuple[set[str], set[str]]] = {}
        rows = self.catalog.all(
            "SELECT partition, key, digest FROM memories WHERE rowid > ? AND forgotten_at IS NULL "
            f"AND partition || '' IN (SELECT value FROM {self.catalog.sql.values})",
            (since, json.dumps(partitions)),
        )
        for r in rows:
            keys, digests = written.setdefault(r["partition"], (set(), set()))
            if r["key"] is not None:
                keys.add(r["key"])
            if r["digest"] is not None:
                digests.add(r["digest"])
        return written

    def last_rowid(self) -> int:
        """The newest memory's rowid: rowids follow the order of commits (rows are never
        deleted; on PostgreSQL an identity column, assigned under the write lock)."""
        row = self.catalog.one("SELECT coalesce(max(rowid), 0) AS last FROM memories")
        return int(row["last"]) if row is not None else 0

    def known_ids(self, ids: list[str]) -> set[str]:
        """Of ``ids``, those the catalog names (the rest are orphans a killed write left)."""
        known: set[str] = set()
        for start in range(0, len(ids), 900):
            chunk = ids[start : start + 900]
            marks = ",".join("?" * len(chunk))
            known.update(
                r["id"] for r in self.catalog.all(f"SELECT id FROM memories WHERE id IN ({marks})", tuple(chunk))
            )
        return known
