"""What a store touched, per partition: how often it was opened and loaded, how many vectors
were scored, how many images were built, how many lexical postings were read and how often
rows were appended. The
instrumentation that lets a test prove an Acme recall never touched Globex.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class IndexStats:
    """What the store touched, per partition, since the last ``reset``."""

    opened: Counter[str] = field(default_factory=Counter)
    loaded: Counter[str] = field(default_factory=Counter)
    scored: Counter[str] = field(default_factory=Counter)
    built: Counter[str] = field(default_factory=Counter)  # images built
    postings: Counter[str] = field(default_factory=Counter)  # lexical postings read
    appended: Counter[str] = field(default_factory=Counter)  # appends of rows (table or small file)
    refreshed: Counter[str] = field(default_factory=Counter)  # held partitions brought up by their tail alone

    def reset(self) -> None:
        for counter in (
            self.opened,
            self.loaded,
            self.scored,
            self.built,
            self.postings,
            self.appended,
            self.refreshed,
        ):
            counter.clear()
