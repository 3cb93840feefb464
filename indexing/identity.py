"""What a store's vectors were made with: the model, its dimension, and the prompts.

A vector compares only with vectors of the same model fed the same way. Models trained with
prompts (EmbeddingGemma's ``task: search result | query: ``, e5's ``query: `` / ``passage: ``)
put one before a query and another before a document, and a store whose documents were embedded
under one document prompt is not searched right by queries under another. So the prompts are
part of what a store records and checks when it opens, with the model's name and dimension.

A model without prompts (the default all-MiniLM-L6-v2) records exactly what stores recorded
before prompts were known — ``{"model", "dimension"}`` — so every existing store opens as it
did, and a manifest without prompts reads as "no prompts".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

PROMPT_KEYS = ("query", "document")


@dataclass(frozen=True)
class Prompts:
    """The text put before every query and before every document; empty for none."""

    query: str = ""
    document: str = ""

    def __bool__(self) -> bool:
        return bool(self.query or self.document)

    def as_dict(self) -> dict[str, str]:
        return {"query": self.query, "document": self.document}

    @classmethod
    def from_dict(cls, recorded: Mapping[str, object] | None) -> Prompts:
        recorded = recorded or {}
        return cls(**{k: str(recorded.get(k) or "") for k in PROMPT_KEYS})


NO_PROMPTS = Prompts()


@dataclass(frozen=True)
class ModelIdentity:
    """A model as a store records it."""

    model: str
    dimension: int
    prompts: Prompts = field(default=NO_PROMPTS)

    def manifest(self) -> dict[str, object]:
        """What ``store.json`` holds: prompts only when there are any."""
        out: dict[str, object] = {"model": self.model, "dimension": self.dimension}
        if self.prompts:
            out["prompts"] = self.prompts.as_dict()
        return out

    @classmethod
    def from_manifest(cls, recorded: Mapping[str, object]) -> ModelIdentity:
        prompts = recorded.get("prompts")
        return cls(
            model=str(recorded.get("model")),
            dimension=int(str(recorded.get("dimension") or 0)),
            prompts=Prompts.from_dict(prompts if isinstance(prompts, Mapping) else None),
        )

    def describe(self) -> str:
        """``'name' (768-d, query prompt '…', document prompt '…')`` for messages."""
        parts = [f"{self.dimension}-d"]
        if self.prompts:
            parts += [f"query prompt {self.prompts.query!r}", f"document prompt {self.prompts.document!r}"]
        return f"{self.model!r} ({', '.join(parts)})"


def identity_of(embedder) -> ModelIdentity:
    """The identity of an ``Embedder`` (``indexing.embedding.embedder``)."""
    return ModelIdentity(embedder.name, embedder.dimension, embedder.prompts)


class Identified:
    """The three things a store records of an embedder (``ModelIdentity``), read-only: what
    every embedder of ``indexing.embedding`` shares. Each sets ``_name``, ``_dimension`` and
    ``_prompts``."""

    _name: str
    _dimension: int
    _prompts: Prompts

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def prompts(self) -> Prompts:
        return self._prompts
