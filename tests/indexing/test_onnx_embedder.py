"""The default ONNX path gives the same vectors as sentence-transformers on torch (within 1e-3
cosine; in practice 1e-6), for short and long texts, alone and in batches."""

from __future__ import annotations

import numpy as np
import pytest

from indexing.embedding.embedder import SentenceTransformerEmbedder, load_embedder
from indexing.embedding.onnx_embedder import OnnxEmbedder
from indexing.errors import EmbedderUnavailable
from server.settings import Settings

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


def from_settings(**env: str):
    """The embedder the product would load under these environment variables."""
    settings = Settings.from_env(env)
    return load_embedder(settings.model, backend=settings.embedder, device=settings.device, cache=settings.cache)


def test_torch_backend_can_be_chosen(monkeypatch):
    assert isinstance(load_embedder(None, backend="torch"), SentenceTransformerEmbedder)
    assert isinstance(from_settings(ESFIS_EMBEDDER="torch"), SentenceTransformerEmbedder)


def test_a_gpu_device_runs_the_model_on_torch_and_says_so_when_there_is_none(monkeypatch):
    embedder = from_settings(ESFIS_DEVICE="cuda")
    assert isinstance(embedder, SentenceTransformerEmbedder) and embedder.device == "cuda"
    assert embedder.batch_size >= 1024  # a GPU pays with big batches
    import torch

    if not torch.cuda.is_available():  # this machine: the message names the setting and the way out
        with pytest.raises(EmbedderUnavailable, match="ESFIS_DEVICE=cuda.*no CUDA device.*unset ESFIS_DEVICE"):
            embedder.embed_documents(["a note"])
    else:
        cpu = load_embedder(None, backend="torch", device="cpu").embed_documents(TEXTS)
        assert np.min(np.sum(embedder.embed_documents(TEXTS) * cpu, axis=1)) > 1 - 1e-3


@pytest.mark.parametrize("device", ["gpu", "cuda0", "CUDA", "cuda:x", "cpu:1"])
def test_a_device_that_is_not_cpu_or_cuda_is_refused_by_name(monkeypatch, device):
    with pytest.raises(EmbedderUnavailable, match="ESFIS_DEVICE must be cpu, cuda or cuda:N"):
        load_embedder(None, backend=None, device=device)
