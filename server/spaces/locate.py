"""The light door: where a caller stands, answered from the catalog alone.

``esfis mcp`` must answer its handshake before the vector stack (numpy, pyarrow, LanceDB) has
loaded, yet it needs to know its space to describe its tools. This is the one thing an
interface may ask without the façade (``server.facade``), and it goes through the same rule
(docs/design.md §2): a named space must exist; else the longest registered folder containing ``cwd``.
"""

from __future__ import annotations

import os

from server.catalog import open_catalog
from server.clock import system_clock
from server.settings import Settings
from server.spaces.policies import validate_ai
from server.spaces.registry import Registry


def locate(
    settings: Settings, *, space: str | None, cwd: str | os.PathLike[str], ai: str | None = None, ai_field: str = "ai"
) -> str | None:
    """The space a caller named (checked) or stands in by its folder; None: no space. An AI
    name, when given, is checked by the same rule as the façade's."""
    if ai is not None:
        validate_ai(ai, field=ai_field)
    catalog = open_catalog(settings)
    try:
        registry = Registry(catalog, system_clock)
        return registry.require(space) if space else registry.space_at(cwd)
    finally:
        catalog.close()
