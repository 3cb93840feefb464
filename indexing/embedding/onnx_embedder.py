"""The default embedder: a sentence-transformers model, run by ONNX Runtime.

Same weights, same tokenizer, same pipeline (pooling, Dense, Normalize), exported once and checked
against sentence-transformers within 1e-5 cosine (``indexing.embedding.onnx_export``); a query is
several times faster (benchmarks/test_embedding.py), and start-up imports no torch. Queries and
documents get the model's own prompts, exactly as the torch path puts them.

When the export is refused on first use (``ExportRefused``: the model's pipeline has a module
the graph does not carry, or the graph's vectors would differ), this embedder says why, once,
and runs the model on torch from then on: the same vectors, so the store cannot tell.

Queries run on an int8 copy of the graph (``indexing.embedding.query_graph``), checked against
the fp32 one, about four times less CPU a query; queries of fewer than ``SHORT_QUERY_TOKENS``
tokens, where quantization errs most, and every text to store run on the fp32 graph.
``query_precision="fp32"`` (``ESFIS_QUERY_PRECISION``) keeps every query on fp32.

Texts are sorted by token length before batching, as sentence-transformers does, so a batch
pads to similar lengths, and a batch of long texts holds fewer of them (``TOKEN_BUDGET``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from indexing.embedding.model_files import default_model_path, model_name_for, read_dimension, read_prompts
from indexing.embedding.onnx_export import ExportRefused, ensure_export
from indexing.embedding.onnx_graph import Graph, GraphSpec, batches
from indexing.embedding.query_graph import SHORT_QUERY_TOKENS, QuantizationRefused, ensure_int8
from indexing.embedding.torch_embedder import SentenceTransformerEmbedder
from indexing.errors import EmbedderUnavailable
from indexing.identity import Identified

_log = logging.getLogger(__name__)
TOKEN_BUDGET = 64 * 256 * 256  # rows × longest² of a batch: MiniLM's full batch (64 texts of 256 tokens)
QUERY_PRECISIONS = ("int8", "fp32")


class OnnxEmbedder(Identified):
    def __init__(
        self,
        path: Path | str | None = None,
        *,
        cache: Path,
        batch_size: int = 64,
        graph: tuple[GraphSpec, Path] | None = None,
        query_precision: str = "int8",
        before_torch: Callable[[], None] | None = None,
    ) -> None:
        """``graph``: an export to run instead of this model's own (a quantized copy, for the
        benchmarks); its vectors are not checked, and queries run on it too.
        ``query_precision``: "int8" (queries of ``SHORT_QUERY_TOKENS`` or more on the checked
        int8 graph) or "fp32". ``before_torch``: handed to the torch fallback, should the export
        be refused (``SentenceTransformerEmbedder``)."""
        if query_precision not in QUERY_PRECISIONS:
            raise EmbedderUnavailable(f"ESFIS_QUERY_PRECISION must be int8 or fp32, not {query_precision!r}")
        self.path = Path(path) if path is not None else default_model_path()
        self.cache = cache
        self.batch_size = batch_size
        self._name = model_name_for(self.path)
        self._dimension = read_dimension(self.path)
        self._prompts = read_prompts(self.path)
        self._graph = graph
        self.query_precision = query_precision
        self._before_torch = before_torch
        self._lock = threading.Lock()
        self._query: Graph | None = None  # fp32, one text at a time (short queries, one text to store)
        self._int8: Graph | None = None  # the checked int8 graph, for queries
        self._batch_graph: Graph | None = None
        self._fallback: SentenceTransformerEmbedder | None = None  # once the export was refused
        self.refused: str | None = None  # why the export was refused, when it was
        self.int8_refused: str | None = None  # why the int8 query graph was refused, when it was

    @property
    def runtime(self) -> str:
        return "torch" if self._fallback is not None else "onnx"

    @property
    def query_runtime(self) -> str:
        """What a query of ``SHORT_QUERY_TOKENS`` or more runs on: "onnx int8", "onnx" or "torch"."""
        self.load()
        return "onnx int8" if self._int8 is not None else self.runtime

    @property
    def loaded(self) -> bool:
        return self._query is not None or self._fallback is not None

    def load(self) -> None:
        """The tokenizer and the query session. The batch session is built on the first batch:
        a one-shot CLI recall or remember never needs it, and each session costs a few hundred
        milliseconds to build."""
        if self.loaded:
            return
        with self._lock:
            if self.loaded:
                return
            try:
                spec, folder = self._graph or ensure_export(self.path, self.cache)
                # Queries: two threads (a 60-token query: 3.6 ms p50 against 6.0 ms on one thread,
                # on 2 cores); batches: every core, where the matrix work dominates.
                self._query = Graph(spec, folder, min(_cores(), 2))
                if self.query_precision == "int8" and self._graph is None:
                    try:
                        # One thread: a query is a few small matrix products, cheaper unsplit.
                        self._int8 = Graph(ensure_int8(spec, folder, self._prompts), folder, 1)
                    except QuantizationRefused as exc:
                        _log.warning("esfis: queries of %s run on fp32: %s", self._name, exc.reason)
                        self.int8_refused = exc.reason
            except ExportRefused as exc:
                _log.warning("esfis: the model %s runs on torch, not ONNX: %s", self._name, exc.reason)
                self.refused = exc.reason
                fallback = SentenceTransformerEmbedder(self.path, before_torch=self._before_torch)
                fallback.load()
                self._fallback = fallback
            except EmbedderUnavailable:
                raise
            except Exception as exc:
                raise EmbedderUnavailable(f"could not load the ONNX model for {self.path}: {exc}") from exc

    def _batch(self) -> Graph:
        assert self._query is not None
        if self._batch_graph is None:
            with self._lock:
                if self._batch_graph is None:
                    try:
                        self._batch_graph = Graph(self._query.spec, self._folder(), _cores())
                    except Exception as exc:
                        raise EmbedderUnavailable(f"could not load the ONNX model for {self.path}: {exc}") from exc
        return self._batch_graph

    def _folder(self) -> Path:
        return self._graph[1] if self._graph else ensure_export(self.path, self.cache)[1]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.load()
        if self._fallback is not None:
            return self._fallback.embed_documents(texts)
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        if not texts:
            return out
        graph = self._batch() if len(texts) > 1 else self._query
        assert graph is not None
        encodings = graph.encode([self._prompts.document + t for t in texts])
        for chosen in batches([len(e.ids) for e in encodings], self.batch_size, TOKEN_BUDGET):
            out[chosen] = graph.run_encoded([encodings[i] for i in chosen])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries in one call of the query session (``indexing.embedding.batching``): a
        few short texts, padded to the longest."""
        self.load()
        if self._fallback is not None:
            return self._fallback.embed_queries(texts)
        assert self._query is not None
        encodings = self._query.encode([self._prompts.query + t for t in texts])
        if self._int8 is None:
            return self._query.run_encoded(encodings)
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        short = [i for i, e in enumerate(encodings) if len(e.ids) < SHORT_QUERY_TOKENS]
        if short:
            out[short] = self._query.run_encoded([encodings[i] for i in short])
        for i, encoding in enumerate(encodings):
            if len(encoding.ids) >= SHORT_QUERY_TOKENS:
                # One at a time: dynamic quantization scales a call's activations together, so in a
                # batch a query's vector would depend on its neighbours; alone, it is its own.
                out[i] = self._int8.run_encoded([encoding])[0]
        return out


def _cores() -> int:
    return max(1, os.cpu_count() or 1)
