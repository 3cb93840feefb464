"""How the service stands, for ``/healthz``: the model is the interface's to tell; the disk and
the catalog are told here. Asked by anyone, so it tells no secret: states, not figures of data."""

from __future__ import annotations

from dataclasses import dataclass

from server.errors import CatalogUnavailable, EsfisError
from server.facade.parts import Parts
from server.faults import fault_of
from server.metrics import show_disk


@dataclass(frozen=True)
class Standing:
    """``disk``: ``full`` while writes are refused for want of room (reads go on); ``catalog``:
    ``unavailable`` while it cannot be reached (every call is refused with 503 then)."""

    disk: str  # ok | full
    catalog: str  # ok | unavailable


def standing(parts: Parts) -> Standing:
    """The disk's room (one ``statvfs``) and the catalog's answer to one trivial read."""
    try:
        room = parts.room.room()
    except OSError:
        disk = "ok"  # not made yet, or gone: the next write tells
    else:
        disk = "full" if room.full else "ok"
        show_disk(room.free, room.full)
    try:
        parts.catalog.one("SELECT 1 AS one")
    except Exception as exc:
        fault = exc if isinstance(exc, EsfisError) else fault_of(exc)
        if isinstance(fault, CatalogUnavailable) or fault is None:
            return Standing(disk=disk, catalog="unavailable")
    return Standing(disk=disk, catalog="ok")
