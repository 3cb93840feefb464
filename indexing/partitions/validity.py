"""A partition's cut counts at a time: how many live rows had ended, had not yet started, and were
valid at ``now``, by a pass over the rows (``validity_counts``) or, for a large image, by binary
search over its sorted starts and ends (``ValidityCounts``), kept current by its rare writes; and
which held rows are valid, for the whole window of time in which none starts or ends
(``validity_window``), so a recall whose clock moved on reuses them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from indexing.rows import OPEN_END


def validity_counts(
    live: np.ndarray, *, valid_from: np.ndarray, valid_until: np.ndarray, now: int
) -> tuple[int, int, int]:
    """(ended, pending, valid) among live rows at ``now``: the delivery's cut counts."""
    ended_mask = live & (valid_until <= now)
    pending_mask = live & (valid_from > now) & ~ended_mask
    ended, pending = int(ended_mask.sum()), int(pending_mask.sum())
    return ended, pending, int(live.sum()) - ended - pending


class ValidityCounts:
    """The cut counts of a large image at any time, without a pass over its rows: the live rows'
    starts and ends, sorted, answer "how many ended by now" and "how many start later" by
    binary search. Rows that end before they start (none, in practice) are counted directly."""

    def __init__(self, live: np.ndarray, valid_from: np.ndarray, valid_until: np.ndarray) -> None:
        self.starts = np.sort(valid_from[live])
        self.ends = np.sort(valid_until[live])
        odd = live & (valid_until < valid_from)
        self.odd = list(zip(valid_from[odd].tolist(), valid_until[odd].tolist()))

    def at(self, now: int) -> tuple[int, int, int]:
        """(ended, pending, valid) at ``now``, as ``validity_counts`` computes them."""
        ended = int(np.searchsorted(self.ends, now, side="right"))
        later = len(self.starts) - int(np.searchsorted(self.starts, now, side="right"))
        both = sum(1 for start, end in self.odd if start > now and end <= now)  # ended, not pending
        pending = later - both
        return ended, pending, len(self.ends) - ended - pending

    def window(self, now: int) -> tuple[int, int]:
        """[lo, hi): the span around ``now`` in which no live row starts or ends."""
        lo, hi = np.iinfo(np.int64).min, int(OPEN_END)
        for bounds in (self.starts, self.ends):
            i = int(np.searchsorted(bounds, now, side="right"))
            if i:
                lo = max(lo, int(bounds[i - 1]))
            if i < len(bounds):
                hi = min(hi, int(bounds[i]))
        return lo, hi

    def change(self, start: int | None, end: int | None, new: tuple[int, int] | None) -> None:
        """Remove a row's (start, end) when given, add ``new`` when given: O(rows) memmoves of
        8 bytes a row, for the rare write to a row of the image."""
        if start is not None and end is not None:
            self.starts = np.delete(self.starts, np.searchsorted(self.starts, start))
            self.ends = np.delete(self.ends, np.searchsorted(self.ends, end))
            if end < start:
                self.odd.remove((start, end))
        if new is not None:
            self.starts = np.insert(self.starts, np.searchsorted(self.starts, new[0]), new[0])
            self.ends = np.insert(self.ends, np.searchsorted(self.ends, new[1]), new[1])
            if new[1] < new[0]:
                self.odd.append(new)


@dataclass(frozen=True)
class Validity:
    """Which rows are valid, and the cut counts, for every ``now`` in [lo, hi): no start or end
    of a row falls inside, so the masks stand until the clock passes ``hi`` or a row changes."""

    changes: int  # the partition's change count they were computed at
    lo: int
    hi: int
    held_valid: np.ndarray  # bool, one per held row
    held_rows: np.ndarray  # its true positions
    held_counts: tuple[int, int, int]  # (ended, pending, valid)
    base_counts: tuple[int, int, int]


def validity_window(
    changes: int,
    live: np.ndarray,
    *,
    valid_from: np.ndarray,
    valid_until: np.ndarray,
    now: int,
    base: ValidityCounts | None,
) -> Validity:
    """The held rows' validity at ``now`` (``live``, ``valid_from``, ``valid_until``: one per held
    row) and the image's counts (``base``), with the window around ``now`` they hold for."""
    lo, hi = np.iinfo(np.int64).min, int(OPEN_END)
    held_valid = live & (valid_until > now) & (valid_from <= now)
    held_counts = validity_counts(live, valid_from=valid_from, valid_until=valid_until, now=now)
    if len(live):
        bounds = np.concatenate([valid_from[live], valid_until[live]])
        past, future = bounds[bounds <= now], bounds[bounds > now]
        lo = int(past.max()) if len(past) else lo
        hi = int(future.min()) if len(future) else hi
    base_counts = (0, 0, 0)
    if base is not None:
        base_counts = base.at(now)
        base_lo, base_hi = base.window(now)
        lo, hi = max(lo, base_lo), min(hi, base_hi)
    return Validity(changes, lo, hi, held_valid, np.flatnonzero(held_valid), held_counts, base_counts)
