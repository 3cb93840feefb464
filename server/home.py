"""The data folder, ESFIS_HOME, is private to its owner.

It holds memory texts (LanceDB), queries and token hashes (the catalog): nobody else on the
machine may read it. The folder is made 0700 (an existing one open to others is closed), and
the process's umask becomes 077 before anything is written in it, so every file and folder
that esfis, SQLite (database, WAL, shared memory) and LanceDB create there is the owner's
only: 0600 and 0700, whatever the umask of the shell that started esfis.

Every process opens the home here first: through the catalog (``Catalog``), and through
``open_service`` before the vector store.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077


def make_private(home: Path) -> Path:
    """Create ``home`` (0700) or close an existing one to others; set the umask to 077."""
    os.umask(PRIVATE_UMASK)
    home = Path(home)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(home.stat().st_mode) & 0o077:
        os.chmod(home, 0o700)
    return home
