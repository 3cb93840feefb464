"""Plots drawn on the server, as inline SVG: a space's days, where a person would rather look
than read (memories written per day by AI, recalls per day and the empty ones).

Inline SVG is part of the page, not a resource: the pages' CSP (``default-src 'none'``,
``style-src 'self'``) holds, because every colour and size is a presentation attribute, never a
``style``. Names (an AI's) are escaped as text; each bar has a ``<title>`` a pointer shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import Protocol

from markupsafe import Markup, escape

WIDTH, HEIGHT, GAP, LEFT, BOTTOM = 640, 140, 2, 34, 18
PALETTE = ("#2f6f9f", "#c26a1b", "#4e8a3e", "#8a4e9c", "#b0413e", "#4a8c8c", "#7a6a3a", "#5c5c8a")
OTHERS = "#9a9a9a"


class Day(Protocol):
    """A day's counts (``server.facade.curation.Day``): its date, and a count per series."""

    @property
    def day(self) -> str: ...

    @property
    def counts(self) -> dict[str, int]: ...


def stacked_bars(days: Sequence[Day], *, today: date, last: int, title: str, series: list[str] | None = None) -> Markup:
    """One bar a day for the ``last`` days up to ``today``, each stacked by series (an AI's
    name, or "answered"/"empty"); ``series`` fixes their order."""
    end = today
    span = [(end - timedelta(days=last - 1 - i)).isoformat() for i in range(last)]
    counts = {d.day: d.counts for d in days}
    names = series or sorted({name for d in days for name in d.counts})
    colours = {name: PALETTE[i] if i < len(PALETTE) else OTHERS for i, name in enumerate(names)}
    top = max([sum(counts.get(day, {}).values()) for day in span] + [1])
    bar = (WIDTH - LEFT) / last
    plot_h = HEIGHT - BOTTOM
    parts = [
        f'<svg class="plot" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" '
        f'preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<line x1="{LEFT}" y1="{plot_h}" x2="{WIDTH}" y2="{plot_h}" stroke="#bbb" stroke-width="1"/>',
        f'<text x="{LEFT - 4}" y="10" font-size="10" text-anchor="end" fill="#666">{top}</text>',
        f'<text x="{LEFT - 4}" y="{plot_h}" font-size="10" text-anchor="end" fill="#666">0</text>',
    ]
    for i, day in enumerate(span):
        x = LEFT + i * bar
        y = float(plot_h)
        for name in names:
            n = counts.get(day, {}).get(name, 0)
            if not n:
                continue
            h = n / top * (plot_h - 4)
            y -= h
            parts.append(
                f'<rect x="{x + GAP / 2:.1f}" y="{y:.1f}" width="{max(bar - GAP, 1):.1f}" height="{h:.1f}" '
                f'fill="{colours[name]}"><title>{escape(day)}: {n} {escape(name)}</title></rect>'
            )
    for i, anchor in ((0, "start"), (last // 2, "middle"), (last - 1, "end")):
        x = LEFT + i * bar + (0 if anchor == "start" else bar if anchor == "end" else bar / 2)
        parts.append(
            f'<text x="{x:.1f}" y="{HEIGHT - 4}" font-size="10" text-anchor="{anchor}" fill="#666">{span[i][5:]}</text>'
        )
    parts.append("</svg>")
    legend = "".join(
        f'<span class="key"><svg width="10" height="10" aria-hidden="true"><rect width="10" height="10" '
        f'fill="{colours[name]}"/></svg> {escape(name)}</span>'
        for name in names
    )
    return Markup("".join(parts) + (f'<p class="legend small">{legend}</p>' if names else ""))
