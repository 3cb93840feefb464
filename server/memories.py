"""Memories on disk: text and vector in the partition's LanceDB table, the rest in the catalog.

This module stores and loads; it decides nothing about who may. Writes go vectors first, then
the catalog: a crash in between leaves at worst an orphan row that no catalog entry names, and
recall drops anything the catalog does not hold as current.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from indexing.snapshot import Row
from indexing.store import VectorStore
from server.catalog import Catalog, Tx
from server.clock import from_micros, to_micros
from server.errors import AlreadySuperseded, InvalidInput, InvalidMemoryId, TextTooLong
from server.models import Memory
from server.spaces import partition_key

MAX_TEXT_BYTES = 32 * 1024
MAX_QUERY_BYTES = 4 * 1024
MAX_LABELS = 32
ID_PATTERN = re.compile(r"mem_[a-z2-7]{26}")


def new_id() -> str:
    """128 random bits, base32: unguessable and never sequential."""
    return "mem_" + base64.b32encode(secrets.token_bytes(16)).decode().rstrip("=").lower()


def check_id(value: object, *, field: str = "id") -> str:
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise InvalidMemoryId(
            f"malformed memory id {str(value)[:80]!r}: ids look like mem_ followed by 26 of [a-z2-7]",
            field=field,
        )
    return value


def check_text(value: object, *, field: str = "text", limit: int = MAX_TEXT_BYTES) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string", field=field)
    if not value.strip():
        raise InvalidInput(f"{field} is empty or blank", field=field)
    if "\x00" in value:
        raise InvalidInput(f"{field} holds a NUL character", field=field)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(f"{field} is not valid Unicode (it holds a lone surrogate)", field=field) from None
    if size > limit:
        raise TextTooLong(f"{field} is {size} bytes; the limit is {limit} bytes", field=field)
    return value


def check_labels(labels: object, *, field: str = "labels") -> tuple[str, ...]:
    if labels is None:
        return ()
    if not isinstance(labels, (list, tuple)) or not all(isinstance(x, str) for x in labels):
        raise InvalidInput(f"{field} must be a list of strings", field=field)
    if len(labels) > MAX_LABELS or any(not 0 < len(x) <= 128 for x in labels):
        raise InvalidInput(f"{field}: at most {MAX_LABELS} labels of 1 to 128 characters", field=field)
    return tuple(dict.fromkeys(labels))


def digest_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class NewMemory:
    """A memory about to be written; the vector is already computed."""

    id: str
    space: str | None
    text: str
    vector: np.ndarray
    ai: str
    created_at: datetime
    valid_from: datetime
    valid_until: datetime | None
    labels: tuple[str, ...] = ()
    key: str | None = None
    run_id: str | None = None

    def row(self) -> Row:
        return Row(
            id=self.id,
            text=self.text,
            vector=self.vector,
            created_at=to_micros(self.created_at),
            valid_from=to_micros(self.valid_from),
            valid_until=None if self.valid_until is None else to_micros(self.valid_until),
        )


class MemoryBook:
    def __init__(self, catalog: Catalog, store: VectorStore) -> None:
        self.catalog = catalog
        self.store = store

    def load(self, id_: str) -> Memory | None:
        row = self.catalog.one("SELECT * FROM memories WHERE id = ?", (id_,))
        if row is None:
            return None
        forgotten = row["forgotten_at"] is not None
        text = None if forgotten else self.store.text(row["partition"], id_)
        return Memory(
            id=row["id"],
            space=row["space"],
            text=text,
            ai=row["ai"],
            created_at=from_micros(row["created_at"]),  # type: ignore[arg-type]
            valid_from=from_micros(row["valid_from"]),  # type: ignore[arg-type]
            valid_until=from_micros(row["valid_until"]),
            superseded_by=row["superseded_by"],
            digest=row["digest"],
            labels=tuple(json.loads(row["labels"])),
            key=row["key"],
            forgotten=forgotten or text is None,
        )

    def write(self, memories: list[NewMemory], *, supersedes: tuple[str, datetime] | None = None) -> None:
        """Store new memories of one space; optionally supersede one old memory atomically."""
        if not memories:
            return
        key = partition_key(memories[0].space)
        assert all(partition_key(m.space) == key for m in memories)
        self.store.add(key, [m.row() for m in memories])
        try:
            with self.catalog.transaction() as tx:
                if supersedes is not None:
                    self._claim(tx, supersedes[0], memories[0].id, supersedes[1])
                self._insert(tx, key, memories, supersedes[0] if supersedes else None)
        except BaseException:
            self.store.purge(key, [m.id for m in memories])
            raise
        if supersedes is not None:
            old = self.catalog.one("SELECT partition FROM memories WHERE id = ?", (supersedes[0],))
            if old is not None:
                self.store.end_validity(old["partition"], supersedes[0], to_micros(supersedes[1]))

    def _claim(self, tx: Tx, old_id: str, new_id_: str, at: datetime) -> None:
        cursor = tx.execute(
            "UPDATE memories SET superseded_by = ?, valid_until = ? "
            "WHERE id = ? AND superseded_by IS NULL AND forgotten_at IS NULL",
            (new_id_, to_micros(at), old_id),
        )
        if cursor.rowcount != 1:
            raise AlreadySuperseded(f"memory {old_id} is already superseded")
        tx.execute(
            "UPDATE partitions SET superseded = superseded + 1 "
            "WHERE key = (SELECT partition FROM memories WHERE id = ?)",
            (old_id,),
        )

    def _insert(self, tx: Tx, key: str, memories: list[NewMemory], supersedes: str | None) -> None:
        tx.executemany(
            "INSERT INTO memories (id, partition, space, ai, created_at, valid_from, valid_until, "
            "supersedes, digest, labels, key, run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    m.id,
                    key,
                    m.space,
                    m.ai,
                    to_micros(m.created_at),
                    to_micros(m.valid_from),
                    None if m.valid_until is None else to_micros(m.valid_until),
                    supersedes,
                    digest_of(m.text),
                    json.dumps(list(m.labels)),
                    m.key,
                    m.run_id,
                )
                for m in memories
            ],
        )
        tx.executemany(
            "INSERT OR IGNORE INTO import_keys (partition, key, memory_id) VALUES (?, ?, ?)",
            [(key, m.key, m.id) for m in memories if m.key is not None],
        )
        tx.execute(
            "INSERT INTO partitions (key, live) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET live = live + excluded.live",
            (key, len(memories)),
        )

    def forget(self, memory: Memory, at: datetime) -> None:
        """Remove the text and vector for good; keep the id, known as forgotten."""
        key = partition_key(memory.space)
        self.store.purge(key, [memory.id])
        with self.catalog.transaction() as tx:
            row = tx.one("SELECT forgotten_at, superseded_by FROM memories WHERE id = ?", (memory.id,))
            if row is None or row["forgotten_at"] is not None:
                return
            tx.execute(
                "UPDATE memories SET forgotten_at = ?, digest = NULL, key = NULL WHERE id = ?",
                (to_micros(at), memory.id),
            )
            tx.execute("DELETE FROM import_keys WHERE memory_id = ?", (memory.id,))
            tx.execute(
                "UPDATE partitions SET live = live - 1, superseded = superseded - ? WHERE key = ?",
                (1 if row["superseded_by"] is not None else 0, key),
            )

    def current_ids(self, ids: list[str], now: datetime) -> set[str]:
        """Of ``ids``, those the catalog holds as current at ``now`` (the final word on validity)."""
        if not ids:
            return set()
        marks = ",".join("?" * len(ids))
        micros = to_micros(now)
        rows = self.catalog.all(
            f"SELECT id FROM memories WHERE id IN ({marks}) AND forgotten_at IS NULL "
            "AND superseded_by IS NULL AND valid_from <= ? AND (valid_until IS NULL OR valid_until > ?)",
            (*ids, micros, micros),
        )
        return {r["id"] for r in rows}

    def counts(self, keys: list[str]) -> tuple[dict[str, tuple[int, int]], int]:
        """For ``keys``: (live memories, of which superseded); and the live total of all."""
        marks = ",".join("?" * len(keys))
        rows = self.catalog.all(f"SELECT key, live, superseded FROM partitions WHERE key IN ({marks})", tuple(keys))
        total = self.catalog.one("SELECT coalesce(sum(live), 0) AS total FROM partitions")
        return {r["key"]: (r["live"], r["superseded"]) for r in rows}, int(total["total"] if total else 0)

    def drop_space(self, space: str, at: datetime) -> int:
        """Purge a space's partition; its ids stay known as forgotten."""
        key = partition_key(space)
        self.store.drop(key)
        with self.catalog.transaction() as tx:
            removed = tx.execute(
                "UPDATE memories SET forgotten_at = ?, digest = NULL, key = NULL "
                "WHERE partition = ? AND forgotten_at IS NULL",
                (to_micros(at), key),
            ).rowcount
            tx.execute("DELETE FROM import_keys WHERE partition = ?", (key,))
            tx.execute("DELETE FROM partitions WHERE key = ?", (key,))
        return removed
