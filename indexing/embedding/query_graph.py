"""The query graph: the checked fp32 export with its weights quantized to int8, checked again.

A recall's CPU is mostly its query's embedding. ONNX Runtime's dynamic quantization (int8
weights, one scale per output channel; activations quantized per call; the early layers'
down-projections left in fp32, ``kept_fp32``) runs a query several times faster on CPU than
the fp32 graph (benchmarks/test_query_precision.py measures by how much). Its vectors are not the
fp32 ones, so this graph is for queries only: every stored vector still comes from the fp32 graph, and the store cannot
tell which graph asked.

Queries of fewer than ``SHORT_QUERY_TOKENS`` tokens stay on fp32: there quantization errs most.

**Checked, or refused.** Once written, the int8 graph embeds ``CHECK_QUERIES`` (those it would
be given: ``SHORT_QUERY_TOKENS`` or more) under the query prompt and each vector is compared with the fp32 graph's: if any is below ``MIN_COSINE``, the
graph is refused, the reason recorded beside it (``.int8-N.refused``) so it is not tried again,
and queries run on the fp32 graph. benchmarks/test_query_precision.py holds every LongMemEval
question to the same bound and measures what the swap does to evidence recall.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from indexing.embedding.onnx_graph import Graph, GraphSpec
from indexing.identity import Prompts

# 1: dynamic, int8 weights per channel, every MatMul and Gemm (some LongMemEval questions fell below MIN_COSINE);
# 2: as 1, but the first half of the down-projections stays fp32 (none below it, for a little more CPU).
QUANTIZED_VERSION = "2"
MIN_COSINE = 0.99  # the least cosine allowed between a query's int8 vector and its fp32 one
# Below this many tokens (the special ones included) a query runs on fp32: MiniLM's int8 vectors of
# 1–7-token texts fell below MIN_COSINE (benchmarks/test_query_precision.py), and fp32 costs least there.
SHORT_QUERY_TOKENS = 8
CHECK_QUERIES = (
    "x",
    "how does login work?",
    "what did we decide about the staging cluster last week",
    "Acme authentication uses Auth0",
    "Which database does the billing service write to, and who owns its backups?",
    "Ünïcödé, emoji 🚀 and 中文 text in one query",
    "rate limits",
    "why did the deploy on friday fail and what was the fix that we shipped afterwards, "
    "including the rollback steps and the people who were on call at the time",
    "feature flags for the mobile app",
    "When is the next on-call rotation handover?",
)


class QuantizationRefused(Exception):
    """No int8 query graph for this export; ``reason`` says why. Queries run on fp32."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def ensure_int8(spec: GraphSpec, folder: Path, prompts: Prompts) -> GraphSpec:
    """The checked int8 query graph beside the fp32 export (its spec), made now if missing;
    ``QuantizationRefused`` when it was refused, now or before."""
    stem = spec.model_file.removesuffix(".onnx")
    target = folder / f"{stem}.int8-{QUANTIZED_VERSION}.onnx"
    refused = folder / f"{stem}.int8-{QUANTIZED_VERSION}.refused"
    if refused.is_file():
        raise QuantizationRefused(refused.read_text().strip())
    quantized = spec.with_model_file(target.name)
    if target.is_file():
        return quantized
    tmp = folder / f"{stem}.int8-{QUANTIZED_VERSION}.{os.getpid()}.tmp.onnx"
    try:
        try:
            _quantize(folder / spec.model_file, tmp)
            check(Graph(spec, folder, threads=1), Graph(spec.with_model_file(tmp.name), folder, threads=1), prompts)
        except QuantizationRefused as exc:
            _record(refused, exc.reason)
            raise
        except Exception as exc:  # the quantizer failed on this graph: say so, run fp32
            reason = f"quantization failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
            _record(refused, reason)
            raise QuantizationRefused(reason) from exc
        os.replace(tmp, target)  # published only once checked
    finally:
        tmp.unlink(missing_ok=True)
    return quantized


def _quantize(source: Path, target: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with warnings.catch_warnings(), _quiet_quantizer():
        warnings.simplefilter("ignore")
        quantize_dynamic(
            str(source),
            str(target),
            weight_type=QuantType.QInt8,
            # One scale per output channel: with one per tensor, MiniLM's query vectors fell far below MIN_COSINE.
            per_channel=True,
            nodes_to_exclude=kept_fp32(onnx.load(str(source))),
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )


def kept_fp32(model: Any) -> list[str]:
    """The MatMuls left in fp32: the first half, in graph order, of the down-projections (a weight
    with more rows than columns: a feed-forward block's way back to the hidden width).

    Their inputs are the widest activations of a layer, and the early layers' errors are carried
    through every later one: on MiniLM, keeping layers 0–2's down-projections in fp32 lifted every
    LongMemEval question above ``MIN_COSINE`` for a little more CPU a query; the last three's, or
    every attention output, helped less (the figures: docs/decisions.md).
    By shape rather than by name, so that any exported encoder gets the same treatment."""
    weights = {t.name: tuple(t.dims) for t in model.graph.initializer}
    down = [
        node.name
        for node in model.graph.node
        if node.op_type in ("MatMul", "Gemm")
        and len(shape := weights.get(node.input[1], ())) == 2
        and shape[0] > shape[1]
    ]
    return down[: len(down) // 2]


@contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """The quantizer advises pre-processing on the root logger; the check below is the advice
    that matters here, so its notice is held back while it runs."""
    root = logging.getLogger()
    notice = logging.Filter()
    notice.filter = lambda record: "pre-processing" not in record.getMessage()  # type: ignore[method-assign]
    root.addFilter(notice)
    try:
        yield
    finally:
        root.removeFilter(notice)


def check(fp32: Graph, int8: Graph, prompts: Prompts) -> float:
    """The least cosine between the two graphs' query vectors over ``CHECK_QUERIES``;
    ``QuantizationRefused`` if below ``MIN_COSINE``."""
    texts = [t for t in (prompts.query + q for q in CHECK_QUERIES) if tokens(fp32, t) >= SHORT_QUERY_TOKENS]
    reference = np.stack([fp32.run([t])[0] for t in texts])
    got = np.stack([int8.run([t])[0] for t in texts])
    cosine = cosines(reference, got)
    worst = int(np.argmin(cosine))
    if float(cosine[worst]) < MIN_COSINE:
        raise QuantizationRefused(
            f"the int8 graph's query vectors differ from the fp32 ones (cosine {float(cosine[worst]):.4f} "
            f"on {texts[worst]!r}; at least {MIN_COSINE} is needed)"
        )
    return float(cosine[worst])


def tokens(graph: Graph, text: str) -> int:
    return len(graph.encode([text])[0].ids)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row by row, the cosine of ``a``'s vectors to ``b``'s."""
    return np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _record(path: Path, reason: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(reason + "\n")
    os.replace(tmp, path)
