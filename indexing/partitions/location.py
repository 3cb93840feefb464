"""Where a store's files live: its LanceDB tables, and this machine's own files beside them.

The tables (the store of record) lie in a local folder or under an S3 prefix
(``s3://bucket/prefix``, credentials and endpoint from the usual ``AWS_*`` variables, which
Lance's object store reads itself). What belongs to one machine never goes there: the partition
locks, the write tokens and the mapped images stay in a local folder (with a local store, the
same folder as the tables, so a store from before keeps its layout).

A remote store's manifest (the model its vectors were made with) is an empty Lance table,
``store.lance``, whose schema carries the model: Lance creates a table with a conditional put,
so of two machines opening a new store at once one wins and the other reads what it recorded.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from indexing.identity import ModelIdentity

REMOTE_SCHEMES = ("s3://",)


def is_remote(uri: str) -> bool:
    return uri.lower().startswith(REMOTE_SCHEMES)


@dataclass(frozen=True)
class Location:
    tables: str  # a folder's path, or s3://bucket/prefix (no trailing slash)
    local: Path  # this machine's folder: locks, tokens, images

    @classmethod
    def of(cls, tables: str | Path, local: Path | None = None) -> Location:
        """A local store keeps everything in its one folder; a remote one needs ``local``."""
        text = str(tables)
        if not is_remote(text):
            return cls(tables=text, local=Path(text))
        if local is None:
            raise ValueError(f"a store at {text} needs a local folder for this machine's files")
        return cls(tables=text.rstrip("/"), local=Path(local))

    @property
    def remote(self) -> bool:
        return is_remote(self.tables)

    def table(self, name: str) -> str:
        """The URI (or path) of the table ``name``."""
        return f"{self.tables}/{name}.lance"

    def prepare(self) -> None:
        self.local.mkdir(parents=True, exist_ok=True)
        if not self.remote:
            Path(self.tables).mkdir(parents=True, exist_ok=True)

    def table_exists(self, name: str) -> bool:
        """Whether the table was ever written. Local: one stat. Remote: an open (a listing of
        its versions), so the hot paths ask the partition's version instead."""
        if not self.remote:
            return os.path.exists(self.table(name))
        return open_dataset(self.table(name)) is not None

    def remove_table(self, name: str) -> None:
        if not self.remote:
            shutil.rmtree(self.table(name), ignore_errors=True)
            return
        import lancedb

        try:
            lancedb.connect(self.tables).drop_table(name)
        except (FileNotFoundError, ValueError) as exc:
            if "not found" not in str(exc).lower() and "does not exist" not in str(exc).lower():
                raise  # an object store that failed: the texts are still there, say so
            # never written, or already dropped


def open_dataset(uri: str, session=None):
    """The Lance dataset at ``uri`` at its latest version, or None when no table is there."""
    import lance

    try:
        return lance.dataset(uri, session=session)
    except ValueError as exc:  # Lance's "Dataset at path … was not found"
        if "not found" in str(exc).lower():
            return None
        raise
    except FileNotFoundError:
        return None


def read_manifest(location: Location) -> dict | None:
    """What a remote store recorded of its model, or None for a new store."""
    dataset = open_dataset(location.table("store"))
    if dataset is None:
        return None
    if dataset.version != 1:
        # Lance's create is not exclusive: racing creators may commit on top of the first one.
        # The first commit decides, whichever each of them was told.
        dataset = dataset.checkout_version(1)
    meta = {k.decode(): v.decode() for k, v in (dataset.schema.metadata or {}).items()}
    recorded: dict = {"model": meta.get("model", ""), "dimension": int(meta.get("dimension", "0"))}
    if "query_prompt" in meta or "document_prompt" in meta:
        recorded["prompts"] = {"query": meta.get("query_prompt", ""), "document": meta.get("document_prompt", "")}
    return recorded


def write_manifest(location: Location, identity: ModelIdentity) -> dict:
    """Record a new remote store's model; of racing writers the first wins, and every caller
    gets what was recorded. Prompts are written only when the model has any, as locally."""
    import lance
    import pyarrow as pa

    meta = {"model": identity.model, "dimension": str(identity.dimension)}
    if identity.prompts:
        meta |= {"query_prompt": identity.prompts.query, "document_prompt": identity.prompts.document}
    schema = pa.schema([pa.field("model", pa.string())], metadata=meta)
    try:
        lance.write_dataset(schema.empty_table(), location.table("store"), schema=schema, mode="create")
    except (OSError, ValueError) as exc:
        if read_manifest(location) is None:
            raise RuntimeError(f"cannot record the store's model at {location.tables}: {exc}") from exc
    recorded = read_manifest(location)
    assert recorded is not None
    return recorded
