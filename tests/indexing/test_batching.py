"""Batched embeddings (``indexing.embedding.batching``): concurrent calls meet in one model call,
each gets its own vector, equal to the unbatched one; a lone call goes at once; no text waits past
the window for company; a failure reaches every caller of its batch.

The vectors are the real model's. The timing promises are held by a gated embedder (a real
implementation of the protocol whose calls wait for the test's word), never by a clock.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from indexing.embedding.batching import BatchingEmbedder
from indexing.embedding.embedder import load_embedder
from indexing.embedding.testing import HashingEmbedder

TEXTS = [
    f"how does service {i} handle {topic}?"
    for i, topic in enumerate(
        ["login", "deploys", "billing retries", "the on-call rotation", "backups", "rate limits"] * 4
    )
]


@pytest.fixture(scope="module")
def model():
    embedder = load_embedder(None)
    embedder.load()
    return embedder


def _at_once(call, texts: list[str]) -> list[np.ndarray]:
    """``call`` on every text, each from its own thread, released together."""
    results: list[np.ndarray | None] = [None] * len(texts)
    start = threading.Barrier(len(texts))

    def one(i: int) -> None:
        start.wait()
        results[i] = call(texts[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r is not None for r in results)
    return results  # type: ignore[return-value]


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_concurrent_queries_are_batched_and_each_gets_its_own_unbatched_vector(model):
    batching = BatchingEmbedder(model, window=0.05)
    for _ in range(3):  # threads released together meet in a batch on the first round, nearly always
        got = _at_once(batching.embed_query, TEXTS)
        if max(batching.queries.stats.sizes) > 1:
            break
    assert max(batching.queries.stats.sizes) > 1, batching.queries.stats
    assert batching.queries.stats.calls < batching.queries.stats.texts
    for text, vector in zip(TEXTS, got):
        assert 1 - _cosine(vector, model.embed_query(text)) <= 1e-6
        assert vector.shape == (model.dimension,) and vector.dtype == np.float32


def test_concurrent_single_documents_are_batched_and_each_gets_its_own_vector(model):
    batching = BatchingEmbedder(model, window=0.05)
    for _ in range(3):
        got = _at_once(lambda t: batching.embed_documents([t]), TEXTS)
        if max(batching.documents.stats.sizes) > 1:
            break
    assert max(batching.documents.stats.sizes) > 1, batching.documents.stats
    for text, vectors in zip(TEXTS, got):
        assert vectors.shape == (1, model.dimension)
        assert 1 - _cosine(vectors[0], model.embed_documents([text])[0]) <= 1e-6


def test_a_lone_call_goes_at_once_alone(model):
    batching = BatchingEmbedder(model, window=0.05)
    for text in TEXTS[:5]:
        assert 1 - _cosine(batching.embed_query(text), model.embed_query(text)) <= 1e-6
    assert batching.queries.stats.sizes == {1: 5}


def test_several_texts_in_one_call_go_straight_to_the_model(model):
    batching = BatchingEmbedder(model)
    vectors = batching.embed_documents(TEXTS[:4])
    assert vectors.shape == (4, model.dimension) and batching.documents.stats.calls == 0


class Gated(HashingEmbedder):
    """A hashing embedder whose first call waits until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls: list[int] = []
        self.fail = False

    def embed_documents(self, texts):
        self.calls.append(len(texts))
        if len(self.calls) == 1:
            self.entered.set()
            assert self.gate.wait(120)
        if self.fail:
            raise RuntimeError("the model failed")
        return super().embed_documents(texts)


def _in_thread(call, *args):
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = call(*args)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def _until(condition) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.001)


def test_no_text_waits_for_the_call_in_flight_past_the_window():
    inner = Gated()
    batching = BatchingEmbedder(inner, window=0.02)
    first, _ = _in_thread(batching.embed_documents, ["the first, held at the gate"])
    assert inner.entered.wait(30)
    second, box = _in_thread(batching.embed_documents, ["the second"])
    second.join(10)
    # The first call is still held: the second went past it once its window had passed.
    assert not second.is_alive() and "value" in box and not inner.gate.is_set()
    assert np.allclose(box["value"][0], inner._one("the second"))
    inner.gate.set()
    first.join(30)


def test_texts_that_queue_behind_a_call_go_together_capped_at_max_batch():
    inner = Gated()
    batching = BatchingEmbedder(inner, window=30.0, max_batch=4)
    first, _ = _in_thread(batching.embed_documents, ["held"])
    assert inner.entered.wait(30)
    texts = [f"queued note {i}" for i in range(9)]
    waiting = [_in_thread(batching.embed_documents, [t]) for t in texts]
    # Each full batch goes at once; the ninth text waits for the call in flight (not the window).
    _until(lambda: len(inner.calls) == 3 and len(batching.documents._queue) == 1)
    assert sorted(inner.calls[1:]) == [4, 4]
    inner.gate.set()
    first.join(30)
    for thread, _ in waiting:
        thread.join(30)
    assert sorted(inner.calls[1:]) == [1, 4, 4] and sum(inner.calls) == 10
    for text, (_, box) in zip(texts, waiting):
        assert np.allclose(box["value"][0], inner._one(text))


def test_a_failed_call_fails_every_caller_of_its_batch_and_the_lane_goes_on():
    inner = Gated()
    batching = BatchingEmbedder(inner, window=30.0)
    first, _ = _in_thread(batching.embed_documents, ["held"])
    assert inner.entered.wait(30)
    waiting = [_in_thread(batching.embed_documents, [f"doomed {i}"]) for i in range(3)]
    _until(lambda: len(batching.documents._queue) == 3)
    inner.fail = True
    inner.gate.set()
    first.join(30)
    for thread, box in waiting:
        thread.join(30)
        assert isinstance(box.get("error"), RuntimeError)
    inner.fail = False
    assert batching.embed_documents(["after"]).shape == (1, inner.dimension)
