"""Fewer malloc arenas: what keeps a long import (or a long-lived server) inside its memory bound.

glibc gives each thread that allocates its own arena, up to eight per core, and rarely hands
their free pages back. An import runs three threads of its own beside LanceDB's pool, and with
glibc's default its peak grows past its bound (``scripts/import-scale`` measures both).
``MALLOC_ARENA_MAX`` in the environment does the same before start; this is for the processes
started without it: ``esfis serve``, ``esfis mcp`` and every import call it (not the short CLI
commands, which would pay for importing ctypes).
"""

from __future__ import annotations

import ctypes
import os

_M_ARENA_MAX = -8  # from glibc's malloc.h
ARENAS = 2


def limit_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Cap the arenas of threads started from now on; False where the C library is not glibc
    or the environment already chose (``MALLOC_ARENA_MAX``)."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        # The process's own symbols, libc's among them: ctypes.util.find_library("c") would
        # run ldconfig in a subprocess, 60 ms on every CLI call.
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False  # macOS: no mallopt
    return bool(mallopt(_M_ARENA_MAX, arenas))  # musl's is a stub that answers 0
