"""The default ONNX path gives the same vectors as sentence-transformers on torch (within 1e-3
cosine; in practice 1e-6), for short and long texts, alone and in batches; its queries of eight
tokens or more run on the checked int8 graph, within 0.99 cosine of fp32's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from indexing.embedding import query_graph
from indexing.embedding.embedder import SentenceTransformerEmbedder, load_embedder
from indexing.embedding.onnx_embedder import OnnxEmbedder
from indexing.embedding.query_graph import MIN_COSINE, SHORT_QUERY_TOKENS, QuantizationRefused, ensure_int8
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


@pytest.fixture(scope="module")
def fp32_embedder():
    embedder = load_embedder(None, query_precision="fp32")
    embedder.load()
    return embedder


def test_onnx_vectors_match_sentence_transformers(real_embedder, fp32_embedder, torch_embedder):
    onnx = real_embedder.embed_documents(TEXTS)
    reference = torch_embedder.embed_documents(TEXTS)
    assert np.min(np.sum(onnx * reference, axis=1)) > 1 - 1e-3
    for text, ref in zip(TEXTS, reference):
        assert float(fp32_embedder.embed_query(text) @ ref) > 1 - 1e-3


def test_batch_order_is_preserved(fp32_embedder):
    one_by_one = np.stack([fp32_embedder.embed_query(t) for t in TEXTS])
    batched = fp32_embedder.embed_documents(TEXTS)
    assert np.allclose(one_by_one, batched, atol=1e-4)


def test_long_queries_run_on_int8_and_short_ones_on_fp32(real_embedder, fp32_embedder):
    assert real_embedder.query_runtime == "onnx int8" and fp32_embedder.query_runtime == "onnx"
    graph = real_embedder._query
    assert graph is not None
    short = [t for t in TEXTS if len(graph.encode([t])[0].ids) < SHORT_QUERY_TOKENS]
    long = [t for t in TEXTS if len(graph.encode([t])[0].ids) >= SHORT_QUERY_TOKENS]
    assert short and long
    mixed = TEXTS  # one call holding both kinds, routed row by row, in order
    got, want = real_embedder.embed_queries(mixed), fp32_embedder.embed_queries(mixed)
    for text, g, w in zip(mixed, got, want):
        if text in short:
            assert np.array_equal(g, w)  # the fp32 graph itself
        else:
            assert not np.array_equal(g, w)  # another graph answered...
            assert float(g @ w) >= MIN_COSINE  # ...and agrees
        assert np.array_equal(g, real_embedder.embed_query(text))


def test_a_refused_int8_graph_is_recorded_and_queries_run_on_fp32(tmp_path, caplog):
    cache = Settings.from_env({}).cache
    assert cache is not None
    fp32 = OnnxEmbedder(cache=cache, query_precision="fp32")
    fp32.load()
    spec = fp32._query.spec  # type: ignore[union-attr]
    folder = tmp_path / "onnx"
    folder.mkdir()
    for name in (spec.model_file, spec.tokenizer_file):
        (folder / name).symlink_to(cache / "onnx" / name)
    stem = spec.model_file.removesuffix(".onnx")
    # A graph whose every vector is off by a rotation: what a bad quantizer would leave.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(query_graph, "_quantize", _scrambled)
        with pytest.raises(QuantizationRefused, match="cosine"):
            ensure_int8(spec, folder, fp32._prompts)
    recorded = folder / f"{stem}.int8-{query_graph.QUANTIZED_VERSION}.refused"
    assert "cosine" in recorded.read_text()
    assert not list(folder.glob("*.int8-*.onnx")) and not list(folder.glob("*.tmp*"))
    # Recorded, so never tried again: the quantizer is not called a second time.
    with pytest.raises(QuantizationRefused, match="cosine"):
        ensure_int8(spec, folder, fp32._prompts)


def _scrambled(source, target) -> None:
    import onnx

    model = onnx.load(str(source))
    for weight in model.graph.initializer:
        if len(weight.dims) == 2 and weight.dims[0] > weight.dims[1]:  # the down-projections
            values = onnx.numpy_helper.to_array(weight)
            weight.CopyFrom(onnx.numpy_helper.from_array(values[::-1].copy(), weight.name))
    onnx.save(model, str(target))


def test_the_int8_refusal_leaves_the_product_on_fp32(tmp_path, monkeypatch):
    cache = Settings.from_env({}).cache
    assert cache is not None
    source = OnnxEmbedder(cache=cache, query_precision="fp32")
    source.load()
    spec = source._query.spec  # type: ignore[union-attr]
    folder = tmp_path / "cache" / "onnx"
    folder.mkdir(parents=True)
    for name in (spec.model_file, spec.tokenizer_file, spec.model_file.removesuffix(".onnx") + ".json"):
        if (cache / "onnx" / name).exists():
            (folder / name).symlink_to(cache / "onnx" / name)
    stem = spec.model_file.removesuffix(".onnx")
    (folder / f"{stem}.int8-{query_graph.QUANTIZED_VERSION}.refused").write_text("refused for this test\n")
    embedder = OnnxEmbedder(cache=tmp_path / "cache")
    assert embedder.query_runtime == "onnx" and embedder.int8_refused == "refused for this test"
    text = TEXTS[0]
    assert np.array_equal(embedder.embed_query(text), source.embed_query(text))


def test_query_precision_is_a_setting_and_a_bad_one_is_named():
    assert Settings.from_env({}).query_precision == "int8"
    assert Settings.from_env({"ESFIS_QUERY_PRECISION": "fp32"}).query_precision == "fp32"
    with pytest.raises(EmbedderUnavailable, match="ESFIS_QUERY_PRECISION"):
        OnnxEmbedder(cache=Path("unused"), query_precision="fp16")


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


def test_the_torch_runtime_calls_its_callers_set_up_once_before_it_loads(tiny_model):
    """indexing/ sets no environment: the server's defaults (``server.settings.torch_defaults``)
    come through ``before_torch``, run once, before the model stack is imported."""
    calls: list[str] = []
    embedder = load_embedder(str(tiny_model), backend="torch", before_torch=lambda: calls.append("set up"))
    assert isinstance(embedder, SentenceTransformerEmbedder) and calls == []
    embedder.load()
    embedder.load()
    assert calls == ["set up"] and embedder.embed_query("a note").shape == (embedder.dimension,)


@pytest.mark.parametrize("device", ["gpu", "cuda0", "CUDA", "cuda:x", "cpu:1"])
def test_a_device_that_is_not_cpu_or_cuda_is_refused_by_name(monkeypatch, device):
    with pytest.raises(EmbedderUnavailable, match="ESFIS_DEVICE must be cpu, cuda or cuda:N"):
        load_embedder(None, backend=None, device=device)
