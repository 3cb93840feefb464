"""What a new memory is made of: its id, its checked text, and the rows written for it.

``NewMemory`` is one memory about to be written (its vector already computed); ``MemoryBatch``
is many of one space by column, as a bulk import writes them. ``server.memories`` stores both.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import secrets
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from indexing.rows import OPEN_END, Row, RowBatch
from server.clock import to_micros
from server.errors import InvalidInput, InvalidMemoryId, TextTooLong
from server.inputs import MAX_QUERY_BYTES as MAX_QUERY_BYTES  # the limits every interface states
from server.inputs import MAX_TEXT_BYTES
from server.memories.data import stored

ID_PATTERN = re.compile(r"mem_[a-z2-7]{26}")


# Base32 digits in ASCII order, so that an id's text sorts as its number does.
_ID_DIGITS = np.frombuffer(b"234567abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
_FIVE_BITS = np.array([16, 8, 4, 2, 1], dtype=np.uint8)


def new_ids(count: int) -> list[str]:
    """``count`` fresh ids: the time in milliseconds (48 bits), then 80 random bits.

    80 random bits keep an id unguessable; the time first makes new ids sort after old ones,
    so the catalog appends them to its index instead of inserting at random (at a million
    memories, bulk inserts are faster). The time is no secret: ``created_at`` says it.
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
    data: dict[str, Any] = dataclasses.field(default_factory=dict, hash=False)  # checked (server.memories.data)

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
    ``from_spaces`` None: none for any memory (imports). ``data``: each memory's as the catalog
    stores it (compact JSON, None for none); None: none for any memory.
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
    data: list[str | None] | None = None

    @classmethod
    def of(cls, memories: list[NewMemory]) -> MemoryBatch:
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
            data=[stored(m.data) for m in memories] if any(m.data for m in memories) else None,
        )

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, keep: list[bool]) -> MemoryBatch:
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
            data=None if self.data is None else [self.data[i] for i in chosen],
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
