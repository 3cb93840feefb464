"""A target: the bound one benchmark figure is checked against, and what the bound is for.

The book of them is ``benchmarks/targets.py``; the report prints each measured figure beside its
target with ✅ or ❌, and each missed one with its ``why`` and what was measured about the miss
(``benchmarks/missed.py``).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

_OPS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq}
_SIGNS = {"<=": "≤", ">=": "≥", "==": "="}


@dataclass(frozen=True)
class Target:
    what: str
    op: str  # "<=", ">=" or "=="
    value: float
    unit: str = ""
    relative_to: str | None = None  # the figure the bound multiplies, when it is relative
    source: str = ""
    full_only: bool = False  # stated for the full mode's sizes; quick mode shows it, its verdict says so
    why: str = ""  # what the bound is for: the target's own justification

    def limit(self, reference: float | None = None) -> float | None:
        if self.relative_to is None:
            return self.value
        return None if reference is None else self.value * reference

    def met(self, measured: float | None, reference: float | None = None) -> bool | None:
        limit = self.limit(reference)
        if measured is None or limit is None:
            return None
        if self.op == "==" and isinstance(limit, float):
            return abs(measured - limit) <= 1e-9
        return bool(_OPS[self.op](measured, limit))

    def describe(self, reference: float | None = None) -> str:
        sign = _SIGNS[self.op]
        if self.relative_to is None:
            return f"{sign} {_num(self.value)}{' ' + self.unit if self.unit else ''}"
        limit = self.limit(reference)
        shown = f" = {_num(limit)}{' ' + self.unit if self.unit else ''}" if limit is not None else ""
        return f"{sign} {_num(self.value)}× {self.relative_to}{shown}"


def _num(value: float) -> str:
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:,.1f}"
