"""Context references: how one agent passes context to another without copying text.

A reference (``ctx_`` and 26 random base32 characters: unguessable) names memories with the
labels, digests and run they had when shared, and the run that shared them. Opening it reads
the memories as they are now (a forgotten one reads as forgotten; the digest lets the reader
check that a text is the one that was shared). Nothing here decides who may open: the façade
asks the barrier first.
"""

from __future__ import annotations

import base64
import json
import re
import secrets

from server.catalog import Catalog, Tx
from server.clock import Clock, from_micros, to_micros
from server.errors import ContextNotFound
from server.inputs import MAX_SHARED as MAX_SHARED  # the limit every interface states
from server.labels import Labels
from server.models import Reference

REF = re.compile(r"ctx_[a-z2-7]{26}")


def new_ref() -> str:
    return "ctx_" + base64.b32encode(secrets.token_bytes(16)).decode("ascii").lower()[:26]


class ContextBook:
    def __init__(self, catalog: Catalog, clock: Clock) -> None:
        self.catalog = catalog
        self.clock = clock

    def create(self, run_id: str, items: list[tuple[str, Labels]]) -> Reference:
        reference = Reference(new_ref(), run_id, self.clock(), tuple(items))
        with self.catalog.transaction() as tx:
            tx.execute(
                "INSERT INTO contexts (ref, run, created_at, items) VALUES (?, ?, ?, ?)",
                (reference.ref, run_id, to_micros(reference.created_at), json.dumps([_item(i, l) for i, l in items])),
            )
        return reference

    def scrub(self, tx: Tx, memory_id: str) -> None:
        """A forgotten memory keeps its place in the references that name it, but not its digest:
        with no text left to check, a digest could only confirm a guess of it."""
        rows = tx.all(f"SELECT ref, items FROM contexts WHERE {tx.sql.find}(items, ?) > 0", (f'"{memory_id}"',))
        for row in rows:
            items = json.loads(row["items"])
            for item in items:
                if item["id"] == memory_id:
                    item["labels"]["digest"] = None
            tx.execute("UPDATE contexts SET items = ? WHERE ref = ?", (json.dumps(items), row["ref"]))

    def get(self, ref: object) -> Reference:
        # A malformed ref answers like an unknown one: a reference is a capability, not a name.
        row = None
        if isinstance(ref, str) and REF.fullmatch(ref):
            row = self.catalog.one("SELECT * FROM contexts WHERE ref = ?", (ref,))
        if row is None:
            raise ContextNotFound(f"no context reference {str(ref)[:40]!r}")
        items = tuple((i["id"], _labels(i["labels"])) for i in json.loads(row["items"]))
        return Reference(row["ref"], row["run"], from_micros(row["created_at"]), items)


def _item(memory_id: str, labels: Labels) -> dict:
    return {
        "id": memory_id,
        "labels": {
            "space": labels.space,
            "origin": list(labels.origin),
            "digest": labels.digest,
            "run": labels.run,
            "from": list(labels.from_),
        },
    }


def _labels(raw: dict) -> Labels:
    return Labels(raw["space"], tuple(raw["origin"]), raw["digest"], raw["run"], tuple(raw["from"]))
