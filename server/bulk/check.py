"""``esfis check``: whether a home is whole, and with ``--repair`` whatever can be made so.

A home is whole when its catalog and its partitions say the same thing: every memory the
catalog holds (not forgotten) has its row in a partition file and no other row lies there,
nothing a killed write left waits to be settled, each partition's image holds only rows its
partition holds, and the counts the catalog keeps are its rows' counts. ``check_home`` looks
(``server.bulk.check_look``, which changes nothing), and with ``repair`` mends what it found
(``server.bulk.check_mend``) and looks again: what that second look finds is what is left.

Each finding has a kind, the partition it is of (None: the home's own, a journal or the total),
what is wrong in words, and ids, never a text:

    lost        a memory the catalog holds whose row is in no partition file: its text and vector
                are gone. Repair forgets it, so it is never served; restore it from a backup.
    orphan      a row no catalog entry names (a write killed between its vectors and its catalog
                rows), older than the age bound: repair purges it
    forgotten   a forgotten memory's row still in a partition file: repair purges it
    leftover    what a killed write left: a temporary file, an unsettled fold, a tail's last frame
                cut short, a promotion cut short, a dead process's journal, its unfinished forget:
                repair settles it as the next writer, sweep or open would
    count       a count the catalog keeps (``partitions.live``, ``.superseded``, ``totals.live``)
                that its rows do not give: repair recounts
    index       a memory whose rows in the catalog's index over data are not what its data gives
                (a filter would miss it or take it wrongly), or rows of a memory gone
                (``server.bulk.check_data``): repair indexes its data again
    image       an image that cannot be opened, holds rows gone, or is of a partition gone:
                repair builds it again or removes it
    unreadable  a partition file that fails to read: said, never touched

A server may keep running while a check or a repair runs (``check_look``, ``check_mend`` say
why each step is safe beside writes).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from indexing.partitions.store import VectorStore
from server.barrier.contexts import ContextBook
from server.bulk.check_look import TOTALS, Damage, look_home
from server.bulk.check_mend import CheckedParts, mend
from server.catalog import Catalog
from server.clock import Clock, to_micros
from server.memories import MemoryBook
from server.render import counted
from server.spaces import space_of_key

Kind = Literal["lost", "orphan", "forgotten", "leftover", "count", "index", "image", "unreadable"]
KINDS: tuple[Kind, ...] = ("lost", "orphan", "forgotten", "leftover", "count", "index", "image", "unreadable")
ORPHAN_AGE = timedelta(minutes=10)  # unnamed rows younger than this are a write in flight (as sweep's default)
SHOWN_IDS = 10  # ids a finding's line names; the JSON names them all


@dataclass(frozen=True)
class Finding:
    """One thing wrong: ``partition`` None for the home's own (a journal, the total); ``remedy``
    what ``--repair`` does about it; ``mendable`` False where it can do nothing."""

    kind: Kind
    partition: str | None
    what: str
    ids: tuple[str, ...] = ()
    remedy: str = ""
    mendable: bool = True

    @property
    def place(self) -> str:
        """Where it is, in words: a space, personal memories, or the home."""
        if self.partition is None or self.partition == TOTALS:
            return "home"
        space = space_of_key(self.partition)
        return "personal" if space is None else f"space {space}"

    def line(self) -> str:
        shown = ", ".join(self.ids[:SHOWN_IDS])
        more = len(self.ids) - SHOWN_IDS
        ids = f": {shown}" + (f" and {more} more" if more > 0 else "") if self.ids else ""
        return f"{self.kind:<10} {self.place}: {self.what}{ids}"

    def as_dict(self) -> dict[str, Any]:
        space = None if self.partition in (None, TOTALS) else space_of_key(self.partition or "")
        return {
            "kind": self.kind,
            "partition": self.partition,
            "space": space,
            "what": self.what,
            "ids": list(self.ids),
            "remedy": self.remedy,
            "mendable": self.mendable,
        }


@dataclass(frozen=True)
class CheckReport:
    """What a check found (``found``), and what is still wrong (``left``: what it found, or
    with ``repaired`` what the look after the repair found)."""

    partitions: int  # partitions read
    memories: int  # memories the catalog holds, not forgotten
    found: tuple[Finding, ...]
    left: tuple[Finding, ...]
    repaired: bool
    in_flight: int  # rows no catalog entry names, younger than the age bound: left alone

    @property
    def whole(self) -> bool:
        """Nothing is wrong (any more, after a repair)."""
        return not self.left

    def summary(self) -> list[str]:
        """One line per finding (with a repair, whether it was mended), then the summary."""
        left = {(f.kind, f.partition) for f in self.left}
        lines = []
        for finding in self.found:
            if not self.repaired:
                lines.append(f"{finding.line()} (--repair: {finding.remedy})")
            elif (finding.kind, finding.partition) in left:
                lines.append(f"{finding.line()} (left: {finding.remedy})")
            else:
                lines.append(f"{finding.line()} (repaired: {finding.remedy})")
        found = {(f.kind, f.partition) for f in self.found}
        lines += [
            f"{f.line()} (left, seen after the repair: {f.remedy})"
            for f in self.left
            if (f.kind, f.partition) not in found
        ]
        checked = f"{counted(self.partitions, 'partition')}, {counted(self.memories, 'memory')} checked"
        if not self.found:
            lines.append(f"whole: {checked}")
        elif not self.repaired:
            lines.append(f"not whole: {_kinds(self.found)} in {checked}; esfis check --repair mends what it can")
        elif self.whole:
            lines.append(f"repaired {_kinds(self.found)}; whole now: {checked}")
        else:
            lines.append(f"not whole: {_kinds(self.left)} left after the repair of {_kinds(self.found)}; {checked}")
        if self.in_flight:
            lines.append(
                f"{counted(self.in_flight, 'row')} no catalog entry names, written less than "
                f"{int(ORPHAN_AGE.total_seconds() // 60)} minutes ago, left alone: writes in flight, "
                "or orphans for a later check"
            )
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "whole": self.whole,
            "repaired": self.repaired,
            "partitions": self.partitions,
            "memories": self.memories,
            "in_flight": self.in_flight,
            "found": [f.as_dict() for f in self.found],
            "left": [f.as_dict() for f in self.left],
        }


@dataclass(frozen=True)
class HomeParts:
    """What a check stands on when the home is opened without the model (``CheckedParts``)."""

    home: Path
    catalog: Catalog
    store: VectorStore
    memories: MemoryBook
    contexts: ContextBook
    clock: Clock

    @classmethod
    def over(cls, *, home: Path, catalog: Catalog, store: VectorStore, clock: Clock) -> HomeParts:
        return cls(home, catalog, store, MemoryBook(catalog, store), ContextBook(catalog, clock), clock)


def check_home(parts: CheckedParts, *, repair: bool, older_than: timedelta = ORPHAN_AGE) -> CheckReport:
    """Look at the whole home; with ``repair``, mend what can be and look again.
    ``older_than``: rows no catalog entry names that are younger are a write in flight."""
    damage = _look(parts, older_than)
    found = findings(damage)
    if not repair or not found:
        return CheckReport(damage.checked, damage.memories, found, found, False, damage.in_flight)
    mend(parts, damage)
    again = _look(parts, older_than)
    return CheckReport(damage.checked, damage.memories, found, findings(again), True, again.in_flight)


def _look(parts: CheckedParts, older_than: timedelta) -> Damage:
    return look_home(
        home=parts.home,
        catalog=parts.catalog,
        store=parts.store,
        orphans_before=to_micros(parts.clock() - older_than),
    )


def findings(damage: Damage) -> tuple[Finding, ...]:
    """What a look found, one finding per thing wrong, in the order of ``KINDS``."""
    found: list[Finding] = []
    for p in damage.partitions:
        if p.lost:
            found.append(
                Finding(
                    "lost",
                    p.key,
                    f"{counted(len(p.lost), 'memory')} in the catalog, in no partition file (text and vector gone)",
                    p.lost,
                    "forgotten, never served; restore from a backup",
                )
            )
        if p.orphans:
            found.append(
                Finding(
                    "orphan", p.key, f"{counted(len(p.orphans), 'row')} no catalog entry names", p.orphans, "purged"
                )
            )
        if p.forgotten:
            what = f"{counted(len(p.forgotten), 'memory')} forgotten in the catalog, still in a partition file"
            found.append(Finding("forgotten", p.key, what, p.forgotten, "purged"))
        found += [Finding("leftover", p.key, what, remedy="settled by the store's writer") for what in p.leftovers]
        if p.image_broken is not None:
            found.append(
                Finding("image", p.key, f"the image cannot be opened ({p.image_broken})", remedy="built again")
            )
        if p.image_gone:
            what = f"the image holds {counted(len(p.image_gone), 'row')} the partition no longer does"
            found.append(Finding("image", p.key, what, p.image_gone, "built again"))
        if p.unreadable is not None:
            found.append(
                Finding(
                    "unreadable",
                    p.key,
                    f"cannot be read ({p.unreadable})",
                    remedy="none: left as it is; restore the partition from a backup",
                    mendable=False,
                )
            )
    for name, ids in damage.journals:
        what = f"journal {name} of a dead process, naming {counted(ids, 'id')}"
        found.append(Finding("leftover", None, what, remedy="swept (its orphans purged)"))
    if damage.forgets:
        what = f"{counted(len(damage.forgets), 'forget')} a dead process left unfinished"
        found.append(Finding("leftover", None, what, damage.forgets, "finished"))
    for key in damage.stale_images:
        found.append(Finding("image", key, "an image of a partition that no longer exists", remedy="removed"))
    for drift in damage.counts:
        if drift.key == TOTALS:
            what = f"totals.live is {drift.kept}, the partitions' live counts add up to {drift.counted}"
        else:
            what = (
                f"partitions.live is {drift.kept}, the catalog holds {drift.counted} not forgotten; "
                f"superseded {drift.kept_superseded}, holds {drift.counted_superseded}"
            )
        found.append(Finding("count", drift.key, what, remedy="recounted"))
    for key, wrong in damage.misindexed:
        what = f"{counted(len(wrong), 'memory')} whose data the catalog's index over data does not hold as it is"
        found.append(Finding("index", key, what, wrong, "indexed again"))
    return tuple(sorted(found, key=lambda f: KINDS.index(f.kind)))


def _kinds(found: tuple[Finding, ...]) -> str:
    """``3 findings (lost 1, orphan 2)``."""
    by_kind = Counter(f.kind for f in found)
    return f"{counted(len(found), 'finding')} ({', '.join(f'{k} {by_kind[k]}' for k in KINDS if by_kind[k])})"
