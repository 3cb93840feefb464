"""The default ONNX path gives the same vectors as sentence-transformers on torch (within 1e-3
cosine; in practice 1e-6), for short and long texts, alone and in batches."""

from __future__ import annotations

import numpy as np
import pytest

from indexing.embedder import SentenceTransformerEmbedder, load_embedder
from indexing.onnx_embedder import OnnxEmbedder

TEXTS = [
    "Acme authentication uses Auth0",
    "how does login work?",
    "x",
    "I've been trying to get back into running, any tips for a 10k plan that fits three days a week? " * 12,
    "Ünïcödé, emoji 🚀 and 中文 text in one memory",
]


@pytest.fixture(scope="module")
def torch_embedder():
    embedder = SentenceTransformerEmbedder()
    embedder.load()
    return embedder


def test_default_embedder_is_onnx(real_embedder):
    assert isinstance(real_embedder, OnnxEmbedder)
    assert real_embedder.name == "all-MiniLM-L6-v2" and real_embedder.dimension == 384


def test_onnx_vectors_match_sentence_transformers(real_embedder, torch_embedder):
    onnx = real_embedder.embed_documents(TEXTS)
    reference = torch_embedder.embed_documents(TEXTS)
    assert np.min(np.sum(onnx * reference, axis=1)) > 1 - 1e-3
    for text, ref in zip(TEXTS, reference):
        assert float(real_embedder.embed_query(text) @ ref) > 1 - 1e-3


def test_batch_order_is_preserved(real_embedder):
    one_by_one = np.stack([real_embedder.embed_query(t) for t in TEXTS])
    batched = real_embedder.embed_documents(TEXTS)
    assert np.allclose(one_by_one, batched, atol=1e-4)


def test_torch_backend_can_be_chosen(monkeypatch):
    load_embedder.cache_clear()
    try:
        assert isinstance(load_embedder(None, "torch"), SentenceTransformerEmbedder)
    finally:
        load_embedder.cache_clear()
