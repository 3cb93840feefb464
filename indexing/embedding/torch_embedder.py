"""The torch runtime: a local sentence-transformers model on the CPU or a GPU.

``sentence_transformers`` costs ~10 s to import, so it is imported only when a vector is first
needed (``load``), never at start-up. Queries and documents get the model's own prompts
(``indexing.identity``), passed as text so that the prompts the store recorded are the ones used.

The model is a local folder, loaded with ``local_files_only``: never the hub, whatever the
environment says. What the libraries read from the environment at import (offline, progress
bars, tokenizer threads) is the caller's to set, in ``before_torch``: the server's is
``server.settings.torch_defaults``; this module reads and writes no environment.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from indexing.embedding.model_files import (
    check_device,
    default_model_path,
    model_name_for,
    read_dimension,
    read_prompts,
)
from indexing.errors import EmbedderUnavailable
from indexing.identity import Identified

GPU_BATCH = 1024  # texts a forward pass on a GPU: MiniLM's rate flattens from ~1k (REPORT.md)


class SentenceTransformerEmbedder(Identified):
    """A local sentence-transformers model, loaded lazily and thread-safely, on the CPU or a GPU.

    ``dimension`` is read from the model's config without importing torch, so a store can be
    opened and checked before the model stack is paid for. On a GPU (``device="cuda"``) the
    weights run in fp16 (vectors within 1e-5 cosine of fp32: 0.999996 measured on an H200) in
    batches of ``GPU_BATCH``: a bulk import is where a GPU pays.
    """

    def __init__(
        self,
        path: Path | str | None = None,
        *,
        batch_size: int | None = None,
        device: str = "cpu",
        before_torch: Callable[[], None] | None = None,
    ) -> None:
        """``before_torch``: called once, just before the model stack is imported (the caller's
        process-level set-up: the environment the libraries read at import)."""
        self.path = Path(path) if path is not None else default_model_path()
        if not (self.path / "config.json").is_file():
            raise EmbedderUnavailable(
                f"ESFIS_MODEL must name a local sentence-transformers model folder; {self.path} has no config.json"
            )
        self.device = check_device(device)
        self.batch_size = batch_size or (64 if self.device == "cpu" else GPU_BATCH)
        self._name = model_name_for(self.path)
        self._dimension = read_dimension(self.path)
        self._prompts = read_prompts(self.path)
        self._model: Any = None  # a SentenceTransformer once loaded
        self._lock = threading.Lock()
        self._before_torch = before_torch

    runtime = "torch"

    def load(self) -> None:
        """Import the model stack and load the weights (idempotent)."""
        if self._model is not None:
            return
        with self._lock:
            if self._model is not None:
                return
            if self._before_torch is not None:
                self._before_torch()
            try:
                import torch
                from sentence_transformers import SentenceTransformer

                if self.device != "cpu" and not torch.cuda.is_available():
                    raise EmbedderUnavailable(
                        f"ESFIS_DEVICE={self.device}, but torch sees no CUDA device here "
                        f"(torch {torch.__version__}); unset ESFIS_DEVICE to embed on the CPU"
                    )
                model = SentenceTransformer(str(self.path), device=self.device, local_files_only=True)
                width = getattr(model, "get_embedding_dimension", model.get_sentence_embedding_dimension)()
                if width is not None and width != self._dimension:
                    raise EmbedderUnavailable(
                        f"the model in {self.path} makes {width}-d vectors; its files say {self._dimension}"
                    )
                self._model = model if self.device == "cpu" else model.half()
            except EmbedderUnavailable:
                raise
            except Exception as exc:
                raise EmbedderUnavailable(f"could not load model from {self.path}: {exc}") from exc

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _encode(self, texts: Sequence[str], prompt: str) -> np.ndarray:
        self.load()
        assert self._model is not None
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # The prompt is passed as text, never by name: the one recorded in the store is the one
        # used ("" means none, and keeps sentence-transformers from adding a default of its own).
        vectors = self._model.encode(
            list(texts),
            prompt=prompt,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self._prompts.document)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text], self._prompts.query)[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries at once (``indexing.embedding.batching``), with the query prompt."""
        return self._encode(texts, self._prompts.query)
