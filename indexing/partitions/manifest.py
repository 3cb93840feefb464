"""The store's manifest: the model every vector of a store was made with, recorded by the first
process that opens it, and checked by every later one.

A vector is comparable only with vectors of the same model, dimension and prompts: a store opened
under another model would rank nonsense without a word of complaint. So ``store.json`` records
the ``ModelIdentity`` (``indexing/identity.py``) once, and a store opens only under the identity
it records; anything else is refused with ``StoreMismatch``, which says how to move on (the same
model, a reindex, or another home). On S3 the manifest lies beside the tables
(``indexing/partitions/location.py``), so every machine checks the one record.
"""

from __future__ import annotations

import json
import os
import secrets

from indexing.errors import StoreMismatch
from indexing.identity import ModelIdentity
from indexing.partitions.location import Location, read_manifest, write_manifest

MANIFEST = "store.json"


def check_manifest(location: Location, identity: ModelIdentity) -> None:
    """Record ``identity`` in a new store; in one that has a record, refuse any other."""
    if location.remote:
        recorded = read_manifest(location) or write_manifest(location, identity)
        _refuse_other_model(recorded, identity)
        return
    path = location.local / MANIFEST
    if path.exists():
        _refuse_other_model(json.loads(path.read_text()), identity)
        return
    # Several processes may open a new store at once: each writes its own file, and the first
    # link wins; the others then check what the winner recorded.
    tmp = path.with_name(f"store.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    tmp.write_text(json.dumps(identity.manifest()))
    try:
        os.link(tmp, path)
    except FileExistsError:
        tmp.unlink()
        check_manifest(location, identity)
        return
    tmp.unlink()


def _refuse_other_model(recorded: dict, identity: ModelIdentity) -> None:
    built = ModelIdentity.from_manifest(recorded)
    if built != identity:
        raise StoreMismatch(
            f"this store was built with model {built.describe()}; the model in use is "
            f"{identity.describe()}. Use the same model (ESFIS_MODEL), move the store to "
            f"this one (esfis reindex) or use another ESFIS_HOME"
        )
