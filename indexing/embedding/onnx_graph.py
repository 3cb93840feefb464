"""An exported model as the ONNX runtime runs it: the graph, its tokenizer, and how to feed it.

``onnx_export`` writes three files per model into the cache: the graph (``.onnx``), the
tokenizer as sentence-transformers configures it (``.tokenizer.json``: special tokens and
post-processing included), and a spec (``.json``) with what the tokenizer file does not say
(the graph's input names, the token limit, the padding side and token, lower-casing). The
export's own check and ``OnnxEmbedder`` run a text the one way written here, so what was checked
is what is served. Nothing here imports torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class GraphSpec:
    model_file: str  # the .onnx file's name, beside the spec
    tokenizer_file: str  # the tokenizer.json's name, beside the spec
    inputs: tuple[str, ...]  # the graph's inputs, among input_ids, attention_mask, token_type_ids
    max_tokens: int  # sentence-transformers' max_seq_length: longer texts are truncated
    padding_side: str  # "right" or "left", as the model's tokenizer pads
    pad_id: int
    pad_token: str
    lower_case: bool  # sentence-transformers' do_lower_case
    dimension: int

    def save(self, path: Path) -> None:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> GraphSpec:
        raw = json.loads(path.read_text())
        return cls(**{**raw, "inputs": tuple(raw["inputs"])})

    def with_model_file(self, name: str) -> GraphSpec:
        """The same spec over another graph file (a quantized copy, for the benchmarks)."""
        return replace(self, model_file=name)


class Graph:
    """A loaded export: tokenizer and one inference session."""

    def __init__(self, spec: GraphSpec, folder: Path, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.spec = spec
        tokenizer = Tokenizer.from_file(str(folder / spec.tokenizer_file))
        tokenizer.no_padding()  # batches are padded here, to their own longest (``run_encoded``)
        tokenizer.enable_truncation(max_length=spec.max_tokens)
        self.tokenizer = tokenizer
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Workers that spin while waiting for work starve everything else on a two-core machine
        # that is busy (a server's other threads, another process): a query took twice as long
        # with spinning on than on one thread; without it, never longer (benchmarks/test_embedding.py).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(folder / spec.model_file), options, providers=["CPUExecutionProvider"])

    def encode(self, texts: Sequence[str]) -> list:
        """Token encodings of ``texts`` (prompts already in them), truncated, not padded."""
        if self.spec.lower_case:
            texts = [t.lower() for t in texts]
        return self.tokenizer.encode_batch(list(texts))

    def run(self, texts: Sequence[str]) -> np.ndarray:
        """Sentence vectors of ``texts``, one padded batch."""
        return self.run_encoded(self.encode(texts))

    def run_encoded(self, encodings: Sequence) -> np.ndarray:
        """Sentence vectors of encodings, padded to the longest on the model's padding side."""
        longest = max(len(e.ids) for e in encodings)
        rows = len(encodings)
        feeds = {
            name: np.full((rows, longest), self.spec.pad_id if name == "input_ids" else 0, dtype=np.int64)
            for name in self.spec.inputs
        }
        for i, e in enumerate(encodings):
            n = len(e.ids)
            at = slice(0, n) if self.spec.padding_side == "right" else slice(longest - n, longest)
            columns = {"input_ids": e.ids, "attention_mask": [1] * n, "token_type_ids": e.type_ids}
            for name in self.spec.inputs:
                feeds[name][i, at] = columns[name]
        return np.ascontiguousarray(self.session.run(None, feeds)[0], dtype=np.float32)


def batches(lengths: Sequence[int], most: int, budget: int) -> list[np.ndarray]:
    """Indexes grouped into batches by token length, shortest first: at most ``most`` texts, and
    rows × longest² (what attention holds per head and layer) at most ``budget``, so one long
    text never pads a whole batch to its length (64 texts of 2,048 tokens: 15 GB in ONNX Runtime)."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    out: list[np.ndarray] = []
    current: list[int] = []
    for i in order:
        longest = max(int(lengths[i]), 1)
        if current and (len(current) + 1 > most or (len(current) + 1) * longest * longest > budget):
            out.append(np.array(current))
            current = []
        current.append(int(i))
    if current:
        out.append(np.array(current))
    return out
