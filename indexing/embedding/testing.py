"""A deterministic embedder for fast unit tests of logic.

It is a real implementation of the ``Embedder`` protocol, not a patch: words are hashed into
buckets (a bag of words with a little character-trigram smear), so texts that share words are
near each other and the results are stable across runs and machines. Every promise about
retrieval is also proven with the real model; this one only keeps logic tests fast.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from indexing.identity import NO_PROMPTS, Identified, Prompts

_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder(Identified):
    """Bag-of-words vectors from a stable hash; unit length; never loads a model."""

    def __init__(self, dimension: int = 64, name: str = "hashing-test", prompts: Prompts = NO_PROMPTS) -> None:
        self._dimension = dimension
        self._name = name
        self._prompts = prompts  # recorded by the store; the hash reads the prompt as words too

    def load(self) -> None:
        """Nothing to load."""

    def _bucket(self, token: str) -> int:
        digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") % self._dimension

    def _one(self, text: str) -> np.ndarray:
        vector = np.zeros(self._dimension, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            vector[self._bucket(word)] += 1.0
            for i in range(max(len(word) - 2, 0)):
                vector[self._bucket("#" + word[i : i + 3])] += 0.25
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            vector[0] = 1.0
            norm = 1.0
        return vector / norm

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        return np.stack([self._one(self._prompts.document + t) for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(self._prompts.query + text)
