"""The data folder, ESFIS_HOME, is private to its owner.

It holds memory texts (LanceDB), queries and token hashes (the catalog): nobody else on the
machine may read it. The folder is made 0700 (an existing one open to others is closed), and
the process's umask becomes 077 before anything is written in it, so every file and folder
that esfis, SQLite (database, WAL, shared memory) and LanceDB create there is the owner's
only: 0600 and 0700, whatever the umask of the shell that started esfis.

Every process opens the home here first: through the catalog (``Catalog``), and through
``open_service`` before the vector store. What esfis writes outside the home that holds texts
(an export) is made 0600 from its first byte (``private_file``), whatever the umask.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from server.errors import InvalidInput

PRIVATE_UMASK = 0o077


def make_private(home: Path) -> Path:
    """Create ``home`` (0700) or close an existing one to others; set the umask to 077."""
    os.umask(PRIVATE_UMASK)
    home = Path(home)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(home.stat().st_mode) & 0o077:
        os.chmod(home, 0o700)
    return home


def private_file(path: str | os.PathLike[str], *, field: str = "output") -> BinaryIO:
    """A new file (never an existing one, nor through a link) open for writing, readable by its
    owner only from its first byte: created 0600, then set to exactly that, whatever the umask."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise InvalidInput(f"{path} exists: esfis writes this into a new file only", field=field) from None
    except OSError as exc:
        raise InvalidInput(f"cannot make {path}: {exc.strerror}", field=field) from None
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "wb")
