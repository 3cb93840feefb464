"""Memories on disk: text and vector in the partition's LanceDB table, the rest in the catalog.

This module stores and loads; it decides nothing about who may. Writes go vectors first, then
the catalog: a crash in between leaves at worst an orphan row that no catalog entry names, and
recall drops anything the catalog does not hold as current.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import secrets
import time
from concurrent.futures import Executor, wait
from dataclasses import dataclass
from datetime import datetime
from typing import Callable

import numpy as np

from indexing.snapshot import OPEN_END, Row, RowBatch
from indexing.store import VectorStore
from server.catalog import Catalog, Tx
from server.clock import from_micros, to_micros
from server.errors import AlreadySuperseded, InvalidInput, InvalidMemoryId, TextTooLong
from server.labels import Labels
from server.models import Memory
from server.spaces import partition_key

log = logging.getLogger("esfis.store")

MAX_TEXT_BYTES = 32 * 1024
MAX_QUERY_BYTES = 4 * 1024
ID_PATTERN = re.compile(r"mem_[a-z2-7]{26}")


# Base32 digits in ASCII order, so that an id's text sorts as its number does.
_ID_DIGITS = np.frombuffer(b"234567abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
_FIVE_BITS = np.array([16, 8, 4, 2, 1], dtype=np.uint8)


def new_ids(count: int) -> list[str]:
    """``count`` fresh ids: the time in milliseconds (48 bits), then 80 random bits.

    80 random bits keep an id unguessable; the time first makes new ids sort after old ones,
    so the catalog appends them to its index instead of inserting at random (at a million
    memories, bulk inserts ran 1.5x faster). The time is no secret: ``created_at`` says it.
    """
    if count <= 0:
        return []
    millis = time.time_ns() // 1_000_000
    raw = np.empty((count, 16), dtype=np.uint8)
    raw[:, :6] = np.frombuffer(millis.to_bytes(6, "big"), dtype=np.uint8)
    raw[:, 6:] = np.frombuffer(secrets.token_bytes(10 * count), dtype=np.uint8).reshape(count, 10)
    bits = np.unpackbits(raw, axis=1)  # 128 bits, then 2 zero bits: 26 base32 digits
    bits = np.concatenate([bits, np.zeros((count, 2), dtype=np.uint8)], axis=1).reshape(count, 26, 5)
    digits = _ID_DIGITS[bits @ _FIVE_BITS]
    text = digits.tobytes().decode("ascii")
    return ["mem_" + text[i : i + 26] for i in range(0, 26 * count, 26)]


def new_id() -> str:
    return new_ids(1)[0]


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
    labels: tuple[str, ...] = ()  # origin marks
    key: str | None = None
    run_id: str | None = None
    from_spaces: tuple[str, ...] = ()

    def row(self) -> Row:
        return Row(
            id=self.id,
            text=self.text,
            vector=self.vector,
            created_at=to_micros(self.created_at),
            valid_from=to_micros(self.valid_from),
            valid_until=None if self.valid_until is None else to_micros(self.valid_until),
        )


@dataclass(frozen=True)
class MemoryBatch:
    """New memories of one space, by column: a bulk import writes thousands in one piece.

    Times are microseconds since the epoch; ``valid_until`` holds ``OPEN_END`` for no end.
    ``labels`` (origin marks) and ``from_spaces`` are JSON lists, as the catalog stores them;
    ``from_spaces`` None: none for any memory (imports).
    """

    space: str | None
    ai: str
    created_at: int
    ids: list[str]
    texts: list[str]
    digests: list[str]
    vectors: np.ndarray
    valid_from: np.ndarray
    valid_until: np.ndarray
    labels: list[str]
    keys: list[str | None]
    run_ids: list[str | None]
    from_spaces: list[str] | None = None

    @classmethod
    def of(cls, memories: list[NewMemory]) -> "MemoryBatch":
        first = memories[0]
        return cls(
            space=first.space,
            ai=first.ai,
            created_at=to_micros(first.created_at),
            ids=[m.id for m in memories],
            texts=[m.text for m in memories],
            digests=[digest_of(m.text) for m in memories],
            vectors=np.stack([m.vector for m in memories]).astype(np.float32, copy=False),
            valid_from=np.array([to_micros(m.valid_from) for m in memories], dtype=np.int64),
            valid_until=np.array(
                [OPEN_END if m.valid_until is None else to_micros(m.valid_until) for m in memories], dtype=np.int64
            ),
            labels=[json.dumps(list(m.labels)) for m in memories],
            keys=[m.key for m in memories],
            run_ids=[m.run_id for m in memories],
            from_spaces=[json.dumps(list(m.from_spaces)) for m in memories],
        )

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, keep: list[bool]) -> "MemoryBatch":
        """The memories whose ``keep`` is True (the batch itself when all are)."""
        if all(keep):
            return self
        chosen = [i for i, k in enumerate(keep) if k]
        return dataclasses.replace(
            self,
            ids=[self.ids[i] for i in chosen],
            texts=[self.texts[i] for i in chosen],
            digests=[self.digests[i] for i in chosen],
            vectors=self.vectors[chosen],
            valid_from=self.valid_from[chosen],
            valid_until=self.valid_until[chosen],
            labels=[self.labels[i] for i in chosen],
            keys=[self.keys[i] for i in chosen],
            run_ids=[self.run_ids[i] for i in chosen],
            from_spaces=None if self.from_spaces is None else [self.from_spaces[i] for i in chosen],
        )

    def rows(self) -> RowBatch:
        return RowBatch(
            ids=self.ids,
            texts=self.texts,
            vectors=self.vectors,
            created_at=np.full(len(self.ids), self.created_at, dtype=np.int64),
            valid_from=self.valid_from,
            valid_until=self.valid_until,
        )


class MemoryBook:
    def __init__(self, catalog: Catalog, store: VectorStore) -> None:
        self.catalog = catalog
        self.store = store

    def load(self, id_: str) -> Memory | None:
        memory = self.meta(id_)
        return None if memory is None else self.with_text(memory)

    def meta(self, id_: str) -> Memory | None:
        """The catalog's row, without the text: no partition is opened."""
        row = self.catalog.one("SELECT * FROM memories WHERE id = ?", (id_,))
        if row is None:
            return None
        return Memory(
            id=row["id"],
            space=row["space"],
            text=None,
            ai=row["ai"],
            created_at=from_micros(row["created_at"]),  # type: ignore[arg-type]
            valid_from=from_micros(row["valid_from"]),  # type: ignore[arg-type]
            valid_until=from_micros(row["valid_until"]),
            superseded_by=row["superseded_by"],
            digest=row["digest"],
            origin=tuple(json.loads(row["labels"])),
            key=row["key"],
            forgotten=row["forgotten_at"] is not None,
            from_spaces=tuple(json.loads(row["from_spaces"])),
            run_id=row["run_id"],
        )

    def with_text(self, memory: Memory) -> Memory:
        """The memory with its text from its partition (forgotten when the partition has none)."""
        if memory.forgotten:
            return memory
        text = self.store.text(partition_key(memory.space), memory.id)
        return dataclasses.replace(memory, text=text, forgotten=text is None)

    def write(
        self,
        memories: list[NewMemory],
        *,
        supersedes: tuple[str, datetime] | None = None,
        also: Callable[[Tx], None] | None = None,
    ) -> None:
        """Store new memories of one space; optionally supersede one old memory atomically.
        ``also`` runs in the same catalog transaction (the run's trail of the write)."""
        if not memories:
            return
        assert len({partition_key(m.space) for m in memories}) == 1
        assert len({(m.ai, m.created_at) for m in memories}) == 1
        self.write_batch(MemoryBatch.of(memories), supersedes=supersedes, also=also)

    def write_batch(
        self,
        batch: MemoryBatch,
        *,
        supersedes: tuple[str, datetime] | None = None,
        vectors_in: Executor | None = None,
        also: Callable[[Tx], None] | None = None,
    ) -> None:
        """Store new memories of one space. With ``vectors_in`` (a thread), the vectors are
        written while the catalog rows are inserted; the catalog still commits only after the
        vectors are on disk, so a crash never leaves a catalog entry without its vector."""
        if not len(batch):
            return
        key = partition_key(batch.space)
        if vectors_in is None:
            self.store.add(key, batch.rows())
        else:
            adding = vectors_in.submit(self.store.add, key, batch.rows(), compact=False)
        try:
            with self.catalog.transaction() as tx:
                if supersedes is not None:
                    self._claim(tx, supersedes[0], batch.ids[0], supersedes[1])
                self._insert(tx, key, batch, supersedes[0] if supersedes else None)
                if also is not None:
                    also(tx)
                if vectors_in is not None:
                    adding.result()
        except BaseException:
            if vectors_in is not None:
                wait([adding])
            try:
                self.store.purge(key, batch.ids)
            except Exception:  # the first error is the one to report; orphans stay harmless:
                pass  # recall ignores rows the catalog does not name, an import's journal purges them
            raise
        if vectors_in is not None:
            # After the commit, in the vectors' thread: a compaction can take seconds, and the
            # next batch's catalog rows can go in meanwhile (its vectors queue behind it).
            vectors_in.submit(self._compact, key)
        if supersedes is not None:
            old = self.catalog.one("SELECT partition FROM memories WHERE id = ?", (supersedes[0],))
            if old is not None:
                self.store.end_validity(old["partition"], supersedes[0], to_micros(supersedes[1]))

    def _compact(self, key: str) -> None:
        try:
            self.store.compact_if_due(key)
        except Exception:  # routine upkeep: the table is whole without it, and the next one retries
            log.warning("compaction of partition %s failed", key, exc_info=True)

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

    def _insert(self, tx: Tx, key: str, batch: MemoryBatch, supersedes: str | None) -> None:
        # The rows travel as one JSON array and are inserted by one statement (json_extract,
        # not ->>, which needs SQLite 3.38: Ubuntu 22.04's is 3.37). executemany
        # would step once per row, giving up the GIL each time and waiting to get it back:
        # beside a busy Python thread (an import parsing its next batch) it fell to ~500 rows/s.
        until = [None if u == OPEN_END else u for u in batch.valid_until.tolist()]
        from_spaces = batch.from_spaces or ["[]"] * len(batch)
        columns = (batch.ids, batch.valid_from.tolist(), until, batch.digests, batch.labels, batch.keys, batch.run_ids,
                   from_spaces)
        rows = json.dumps(list(zip(*columns, strict=True)))
        tx.execute(
            "INSERT INTO memories (id, partition, space, ai, created_at, valid_from, valid_until, "
            "supersedes, digest, labels, key, run_id, from_spaces) "
            "SELECT json_extract(value, '$[0]'), ?, ?, ?, ?, json_extract(value, '$[1]'), "
            "json_extract(value, '$[2]'), ?, json_extract(value, '$[3]'), json_extract(value, '$[4]'), "
            "json_extract(value, '$[5]'), json_extract(value, '$[6]'), json_extract(value, '$[7]') FROM json_each(?)",
            (key, batch.space, batch.ai, batch.created_at, supersedes, rows),
        )
        keyed = [(k, i) for k, i in zip(batch.keys, batch.ids) if k is not None]
        if keyed:
            tx.execute(
                "INSERT OR IGNORE INTO import_keys (partition, key, memory_id) "
                "SELECT ?, json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?)",
                (key, json.dumps(keyed)),
            )
        tx.execute(
            "INSERT INTO partitions (key, live) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET live = live + excluded.live",
            (key, len(batch)),
        )

    def forget(self, memory: Memory, at: datetime, *, also: Callable[[Tx], None] | None = None) -> None:
        """Remove the text and vector for good; keep the id, known as forgotten. ``also`` runs
        in the catalog's transaction."""
        key = partition_key(memory.space)
        self.store.purge(key, [memory.id])
        with self.catalog.transaction() as tx:
            if also is not None:
                also(tx)
            row = tx.one("SELECT forgotten_at, superseded_by FROM memories WHERE id = ?", (memory.id,))
            if row is None or row["forgotten_at"] is not None:
                return
            tx.execute(
                "UPDATE memories SET forgotten_at = ?, digest = NULL, key = NULL, labels = '[]', from_spaces = '[]' "
                "WHERE id = ?",
                (to_micros(at), memory.id),
            )
            tx.execute("DELETE FROM import_keys WHERE memory_id = ?", (memory.id,))
            tx.execute(
                "UPDATE partitions SET live = live - 1, superseded = superseded - ? WHERE key = ?",
                (1 if row["superseded_by"] is not None else 0, key),
            )

    def current_ids(self, ids: list[str], now: datetime) -> set[str]:
        """Of ``ids``, those the catalog holds as current at ``now`` (the final word on validity)."""
        return set(self.current_labels(ids, now))

    def current_labels(self, ids: list[str], now: datetime) -> dict[str, Labels]:
        """Of ``ids``, those current at ``now``, with their labels (one read for both)."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        micros = to_micros(now)
        rows = self.catalog.all(
            f"SELECT id, space, labels, digest, run_id, from_spaces FROM memories WHERE id IN ({marks}) "
            "AND forgotten_at IS NULL AND superseded_by IS NULL AND valid_from <= ? "
            "AND (valid_until IS NULL OR valid_until > ?)",
            (*ids, micros, micros),
        )
        return {
            r["id"]: Labels(r["space"], tuple(json.loads(r["labels"])), r["digest"], r["run_id"],
                            tuple(json.loads(r["from_spaces"])))
            for r in rows
        }

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
                "UPDATE memories SET forgotten_at = ?, digest = NULL, key = NULL, labels = '[]', from_spaces = '[]' "
                "WHERE partition = ? AND forgotten_at IS NULL",
                (to_micros(at), key),
            ).rowcount
            tx.execute("DELETE FROM import_keys WHERE partition = ?", (key,))
            tx.execute("DELETE FROM partitions WHERE key = ?", (key,))
        return removed
