"""A clean-up for what is already there: a space's copies folded into their earliest memory.

Walks the space's current memories earliest first; for each, its nearest rows in the same
partition (never another: one space's copies are its own), and of those the later ones that are
the same fact (``server.memories.duplicates.same_fact``) are superseded by it: each copy's
``superseded_by`` names the earliest, its validity ends now, as a replace would end it. One
transaction per copy, so a kill half way leaves every copy folded or current, never half, and a
rerun finds only those still current: resumable by construction. ``dry_run`` counts and changes
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from indexing import failpoints
from indexing.partitions.store import VectorStore
from server.catalog import Catalog
from server.clock import to_micros
from server.memories import MemoryBook
from server.memories.duplicates import MOST_SCORED, NEIGHBOURS, SHARED_TERMS, same_fact


@dataclass(frozen=True)
class FoldReport:
    space: str | None
    current: int  # current memories looked at
    copies: int  # copies found (folded, unless a dry run)
    kept: int  # memories that absorbed at least one copy
    dry_run: bool

    def summary(self) -> str:
        where = "personal memories" if self.space is None else f"space {self.space}"
        verb = "would fold" if self.dry_run else "folded"
        return (
            f"{where}: {self.current} current memories, {verb} {self.copies} copies into {self.kept} earliest memories"
        )


def fold_copies_of(
    book: MemoryBook, store: VectorStore, key: str, space: str | None, *, now: datetime, dry_run: bool
) -> FoldReport:
    """Fold the copies of partition ``key`` (space ``space``) into their earliest memory."""
    current = _current(book.catalog, key, now)
    if not current or not store.exists(key):
        return FoldReport(space, len(current), 0, 0, dry_run)
    order = {id_: i for i, id_ in enumerate(current)}
    folded: set[str] = set()
    kept = 0
    micros = to_micros(now)
    for id_ in current:
        if id_ in folded:
            continue
        vector, text = store.vector(key, id_), store.text(key, id_)
        if vector is None or text is None:
            continue
        copies = [
            hit.id
            for hit in store.search_sharing(
                key, vector, NEIGHBOURS, now=micros, text=text, share=SHARED_TERMS, most=MOST_SCORED
            ).hits
            if hit.id in order and order[hit.id] > order[id_] and hit.id not in folded
            if same_fact(text, hit.text, hit.score)
        ]
        if not copies:
            continue
        kept += 1
        for copy in copies:
            folded.add(copy)
            if not dry_run:
                book.fold(copy, into=id_, at=now)
                failpoints.hit("dedupe:after-fold")
    return FoldReport(space, len(current), len(folded), kept, dry_run)


def _current(catalog: Catalog, key: str, now: datetime) -> list[str]:
    """The partition's current memories, earliest first (ids sort by time within a millisecond)."""
    micros = to_micros(now)
    rows = catalog.all(
        "SELECT id FROM memories WHERE partition = ? AND forgotten_at IS NULL AND superseded_by IS NULL "
        "AND valid_from <= ? AND (valid_until IS NULL OR valid_until > ?) ORDER BY created_at, id",
        (key, micros, micros),
    )
    return [r["id"] for r in rows]
