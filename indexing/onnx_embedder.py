"""The default embedder: the same sentence-transformers model, run by ONNX Runtime.

Same weights, same tokenizer, same pooling, exported once (``indexing.onnx_export``); vectors
match the torch path within 1e-6 cosine (tests/indexing/test_onnx_embedder.py), a query is
several times faster (benchmarks/test_embedding.py), and start-up imports no torch.

Texts are sorted by length before batching, as sentence-transformers does, so a batch pads to
similar lengths.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from indexing.model_files import default_model_path, model_name_for, read_dimension
from indexing.errors import EmbedderUnavailable
from indexing.onnx_export import ensure_export, exportable


class OnnxEmbedder:
    def __init__(self, path: Path | str | None = None, *, cache: Path, batch_size: int = 64) -> None:
        self.path = Path(path) if path is not None else default_model_path()
        self.cache = cache
        if not exportable(self.path):
            raise EmbedderUnavailable(f"{self.path} is not a mean-pooling sentence-transformers model")
        self.batch_size = batch_size
        self._name = model_name_for(self.path)
        self._dimension = read_dimension(self.path)
        config = self.path / "sentence_bert_config.json"
        self.max_tokens = int(json.loads(config.read_text()).get("max_seq_length", 256)) if config.is_file() else 256
        self._lock = threading.Lock()
        self._query_session = None
        self._batch_session = None
        self._tokenizer = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def loaded(self) -> bool:
        return self._query_session is not None

    def load(self) -> None:
        """The tokenizer and the query session. The batch session is built on the first batch:
        a one-shot CLI recall or remember never needs it, and each session costs a few hundred
        milliseconds to build."""
        if self._query_session is not None:
            return
        with self._lock:
            if self._query_session is not None:
                return
            try:
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
                tokenizer.enable_truncation(max_length=self.max_tokens)
                tokenizer.enable_padding()
                # Queries: two threads (a 60-token query: 3.6 ms p50 against 6.0 ms on one thread,
                # on 2 cores); batches: every core, where the matrix work dominates.
                session = self._session(min(_cores(), 2))
                self._tokenizer = tokenizer
                self._query_session = session
            except EmbedderUnavailable:
                raise
            except Exception as exc:
                raise EmbedderUnavailable(f"could not load the ONNX model for {self.path}: {exc}") from exc

    def _batch(self):
        self.load()
        if self._batch_session is None:
            with self._lock:
                if self._batch_session is None:
                    try:
                        self._batch_session = self._session(_cores())
                    except Exception as exc:
                        raise EmbedderUnavailable(f"could not load the ONNX model for {self.path}: {exc}") from exc
        return self._batch_session

    def _session(self, threads: int):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Workers that spin while waiting for work starve everything else on a two-core machine
        # that is busy (a server's other threads, another process): a query took twice as long
        # with spinning on than on one thread; without it, never longer (benchmarks/test_embedding.py).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        model_file = ensure_export(self.path, self.cache)
        return ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])

    def _run(self, session, texts: Sequence[str]) -> np.ndarray:
        assert self._tokenizer is not None
        encodings = self._tokenizer.encode_batch(list(texts))
        feeds = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        return session.run(None, feeds)[0]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.load()
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        if not texts:
            return out
        order = np.argsort([len(t) for t in texts], kind="stable")
        session = self._batch() if len(texts) > 1 else self._query_session
        for start in range(0, len(texts), self.batch_size):
            chosen = order[start : start + self.batch_size]
            out[chosen] = self._run(session, [texts[i] for i in chosen])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        self.load()
        return np.ascontiguousarray(self._run(self._query_session, [text])[0], dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries in one call of the query session (``indexing.batching``): a few
        short texts, padded to the longest."""
        self.load()
        return np.ascontiguousarray(self._run(self._query_session, texts), dtype=np.float32)


def _cores() -> int:
    return max(1, os.cpu_count() or 1)
