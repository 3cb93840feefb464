"""Export a mean-pooling sentence-transformers model to ONNX, once, into a cache folder.

The export needs torch (a ~10 s import), so it runs once per model and machine — at set-up
(``python -m indexing.onnx_export``) or, failing that, on the first embedding — and never again.
The graph includes mean pooling and L2 normalisation, so its output is the sentence vector.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from indexing.model_files import default_model_path

EXPORT_VERSION = "1"




def exportable(model_path: Path) -> bool:
    """Only models whose sentence vector is the mean of token vectors are exported."""
    pooling = model_path / "1_Pooling" / "config.json"
    if not pooling.is_file() or not (model_path / "tokenizer.json").is_file():
        return False
    config = json.loads(pooling.read_text())
    others = ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens")
    return bool(config.get("pooling_mode_mean_tokens")) and not any(config.get(k) for k in others)


def onnx_path_for(model_path: Path, cache: Path) -> Path:
    """Where the export of this model lives: keyed by the weights' path, size and time."""
    weights = sorted(model_path.glob("*.safetensors")) or sorted(model_path.glob("*.bin"))
    fingerprint = [str(model_path.resolve()), EXPORT_VERSION]
    for w in weights:
        stat = w.stat()
        fingerprint += [w.name, str(stat.st_size), str(int(stat.st_mtime))]
    key = hashlib.sha256("\n".join(fingerprint).encode()).hexdigest()[:20]
    return cache / "onnx" / f"{model_path.name}-{key}.onnx"


def export(model_path: Path, target: Path) -> Path:
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(model_path)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))

    class SentenceVector(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            tokens = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    sample = tokenizer(["an example sentence", "another, somewhat longer example sentence"],
                       padding=True, return_tensors="pt")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad():
        torch.onnx.export(
            SentenceVector(model),
            (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"]),
            str(tmp),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["sentence_embedding"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                          "sentence_embedding": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    os.replace(tmp, target)  # atomic: a concurrent exporter never sees half a file
    return target


def ensure_export(model_path: Path, cache: Path) -> Path:
    target = onnx_path_for(model_path, cache)
    if not target.is_file():
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export(model_path, target)
    return target


def main(model: str | None, cache: Path) -> int:
    """Export ``model`` (default: the packaged one) into ``cache`` now (``scripts/setup``)."""
    path = Path(model) if model else default_model_path()
    if not exportable(path):
        print(f"{path}: not a mean-pooling sentence-transformers model; the torch path will be used",
              file=sys.stderr)
        return 0
    print(ensure_export(path, cache), file=sys.stderr)
    return 0
