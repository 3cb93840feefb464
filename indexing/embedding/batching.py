"""Batching concurrent embeddings: the texts of requests that meet go through one model call, and
each request gets its own vector back.

A model call has a fixed cost (a session run, its thread hand-offs) that a batch of a few short
texts hardly grows, so concurrent requests embedded one by one spend most of a busy server's CPU
on that fixed cost. ``BatchingEmbedder`` wraps any embedder; each of its lanes (queries, and
single texts to store) batches only when there is company:

- a call that finds the lane idle runs at once, alone: a lone request pays one lock;
- a call that arrives while another is in flight queues. The first in the queue gathers: it
  waits until the call in flight ends, the queue holds ``max_batch`` texts, or ``window`` has
  passed since it arrived, whichever comes first, then runs the queue (up to ``max_batch``) as
  one call. So no text waits longer than ``window`` for company, on top of its own call; the
  next in line leads the texts that did not fit.

Calls of several texts at once (an import's batches) go straight to the model. Batching changes
no vector beyond float rounding (padding is masked in the pooling): tests/indexing/test_batching.py
holds each batched vector to its unbatched one within 1e-6 cosine.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from indexing.embedding.embedder import Embedder
from indexing.identity import Prompts

DEFAULT_WINDOW_S = 0.002
DEFAULT_MAX_BATCH = 32


@dataclass(eq=False)
class _Waiter:
    text: str
    arrived: float
    vector: np.ndarray | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class LaneStats:
    """What a lane did: model calls, texts embedded, and calls by batch size."""

    calls: int = 0
    texts: int = 0
    sizes: Counter[int] = field(default_factory=Counter)


class Lane:
    """One stream of single-text calls into ``embed``, batched as the module says."""

    def __init__(self, embed: Callable[[list[str]], np.ndarray], *, window: float, max_batch: int) -> None:
        if window < 0 or max_batch < 1:
            raise ValueError("window must be >= 0 and max_batch >= 1")
        self._embed = embed
        self.window = window
        self.max_batch = max_batch
        self.stats = LaneStats()
        self._cond = threading.Condition()
        self._queue: list[_Waiter] = []
        self._in_flight = 0
        self._gathering = False

    def submit(self, text: str) -> np.ndarray:
        waiter = _Waiter(text, time.monotonic())
        with self._cond:
            if self._in_flight == 0 and not self._queue:
                self._in_flight += 1
                batch = None
            else:
                batch = self._wait_in_queue(waiter)
        if batch is None and not waiter.done:
            return self._run_alone(text)
        if batch is not None:
            self._run_batch(batch)
        if waiter.error is not None:
            raise waiter.error
        assert waiter.vector is not None
        return waiter.vector

    # -- under the condition's lock ---------------------------------------------------------

    def _wait_in_queue(self, waiter: _Waiter) -> list[_Waiter] | None:
        """Queue ``waiter``; return the batch it leads, or None once another call embedded it."""
        self._queue.append(waiter)
        if len(self._queue) >= self.max_batch:
            self._cond.notify_all()  # a gatherer waiting for a full batch has one
        while not waiter.done:
            if self._queue and self._queue[0] is waiter and not self._gathering:
                return self._gather(waiter)
            self._cond.wait()
        return None

    def _gather(self, leader: _Waiter) -> list[_Waiter]:
        self._gathering = True
        deadline = leader.arrived + self.window
        while self._in_flight > 0 and len(self._queue) < self.max_batch:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._cond.wait(left)
        batch = self._queue[: self.max_batch]
        del self._queue[: self.max_batch]
        self._gathering = False
        self._in_flight += 1
        if self._queue:
            self._cond.notify_all()  # the next in line leads what did not fit
        return batch

    # -- outside the lock -----------------------------------------------------------------

    def _run_alone(self, text: str) -> np.ndarray:
        try:
            vector = self._embed([text])[0]
        finally:
            self._done(1)
        return vector

    def _run_batch(self, batch: list[_Waiter]) -> None:
        try:
            vectors = self._embed([w.text for w in batch])
            error = None
        except BaseException as exc:  # each waiter raises it in its own thread
            vectors, error = None, exc
        with self._cond:
            for i, waiter in enumerate(batch):
                waiter.error = error
                waiter.vector = None if vectors is None else vectors[i]
                waiter.done = True
            self._record(len(batch))
            self._in_flight -= 1
            self._cond.notify_all()

    def _done(self, size: int) -> None:
        with self._cond:
            self._record(size)
            self._in_flight -= 1
            self._cond.notify_all()

    def _record(self, size: int) -> None:
        self.stats.calls += 1
        self.stats.texts += size
        self.stats.sizes[size] += 1


class BatchingEmbedder:
    """An embedder whose single-text calls from concurrent threads are batched (see the module).

    ``window`` is the most a text waits for company, in seconds; ``max_batch`` caps a call."""

    def __init__(
        self, inner: Embedder, *, window: float = DEFAULT_WINDOW_S, max_batch: int = DEFAULT_MAX_BATCH
    ) -> None:
        self.inner = inner
        queries = getattr(inner, "embed_queries", None)
        self.queries = Lane(queries if queries is not None else self._one_by_one, window=window, max_batch=max_batch)
        self.documents = Lane(inner.embed_documents, window=window, max_batch=max_batch)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def prompts(self) -> Prompts:
        return self.inner.prompts

    @property
    def loaded(self) -> bool:
        return bool(getattr(self.inner, "loaded", True))

    def load(self) -> None:
        """Load the model, and run a batch once, so the first batched call pays for nothing the
        lone one did not (an ONNX embedder builds its batch session on its first batch)."""
        self.inner.load()
        self.inner.embed_documents(["warm up", "a batch"])
        queries = getattr(self.inner, "embed_queries", None)
        if queries is not None:
            queries(["warm up", "a batch of queries"])

    def summary(self) -> str:
        """What the lanes did, for a server's log at its end."""

        def one(name: str, lane: Lane) -> str:
            mean = lane.stats.texts / lane.stats.calls if lane.stats.calls else 0.0
            return f"{name}: {lane.stats.texts} texts in {lane.stats.calls} calls (mean batch {mean:.2f})"

        return f"{one('queries', self.queries)}; {one('single documents', self.documents)}"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) != 1:
            return self.inner.embed_documents(texts)
        return self.documents.submit(texts[0])[None, :]

    def embed_query(self, text: str) -> np.ndarray:
        return self.queries.submit(text)

    def _one_by_one(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.inner.embed_query(t) for t in texts])
