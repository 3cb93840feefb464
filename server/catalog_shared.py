"""What both catalog backends share (``server.catalog`` is the contract): the schema's
version, the dialect fragments, and how a catalog names itself in an error."""

from __future__ import annotations

import re
from dataclasses import dataclass

from server.errors import StoreUnavailable

SCHEMA_VERSION = 5  # 2: labels beside every memory (from_spaces), runs and their trail, grants; 3: forgetting;
#                    4: the store's live total (totals), kept by triggers; 5: partition versions
#                    (several machines: server.partition_sync)


@dataclass(frozen=True)
class Dialect:
    """The fragments of SQL the backends write differently. Each takes one ``?``.

    ``values``: a FROM item giving one column ``value`` (text) for each element of a JSON array
    of scalars. ``rows`` with ``item(i, type)``: a FROM item giving one ``value`` per element of
    a JSON array of arrays, and the ``i``-th field of one, as ``type``. ``find``: the function
    giving where a string lies in another (0: nowhere)."""

    values: str
    rows: str
    item_template: str  # formatted with i and type
    find: str

    def item(self, i: int, type_: str = "TEXT") -> str:
        return self.item_template.format(i=i, type=type_)


def refuse_newer(version: int) -> None:
    """A catalog whose schema is newer than this esfis is never opened (nor marked older)."""
    if version > SCHEMA_VERSION:
        raise StoreUnavailable(f"the catalog has schema version {version}, newer than this esfis's "
                               f"({SCHEMA_VERSION}): upgrade esfis")


def redacted(url: str) -> str:
    """A connection URL fit for an error message: without its user and password."""
    return re.sub(r"//[^@/]*@", "//", url)
