"""What was measured about each target the last full run missed, by the target's key.

Kept apart from the targets themselves: a target's bound and its justification (``why``) belong to
the target; the reason a run misses it belongs to the run, and is written after reading that run's
raw file and profile. The report prints both under "The targets missed, and why".
"""

from __future__ import annotations

MISSED_BECAUSE: dict[str, str] = {}
