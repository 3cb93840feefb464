"""The Settings pages' templates: the Jinja2 environment and the filters the templates use.

Autoescaped, so memory texts, queries and names are shown as text; a name a stranger chose goes
through ``inert`` as well, since autoescaping stops markup but not a bidi override that reorders
a line. ``server.web.pages`` renders with this environment and adds the headers, the session and
the notices; no route renders a template itself.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from server.render import folder_label, inert

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"


def when(moment: datetime | None) -> str:
    return "—" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(moment: datetime | None) -> str:
    return "" if moment is None else moment.isoformat().replace("+00:00", "Z")


def where(space: str | None) -> str:
    return "personal" if space is None else space


def clip(text: str, width: int = 90) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def data_text(data: dict) -> str:
    """A memory's data as a page shows it: compact JSON with its own characters (``inert`` then
    escapes control and bidi ones; autoescaping, the markup)."""
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(", ", ": ")) if data else ""


ENV = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(["html"]),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
# ``inert``: a name a stranger chose (an OAuth client's, a run's), escaped as the CLI escapes it
# (``server.render.inert``).
ENV.filters.update(
    when=when,
    iso=iso,
    where=where,
    folder=folder_label,
    clip=clip,
    q=lambda s: quote(str(s), safe=""),
    inert=inert,
    data_text=data_text,
)
