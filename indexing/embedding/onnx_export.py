"""Export a sentence-transformers model to ONNX, whole, once, into a cache folder.

The graph is the model's whole pipeline as sentence-transformers runs it — the transformer, its
pooling (mean, CLS, last token, max, …), any Dense and Normalize modules — then L2
normalisation: its output is the stored vector. The tokenizer is saved beside it as
sentence-transformers configures it (``indexing.embedding.onnx_graph``).

**Checked, or refused.** Once written, the graph is run the way ``OnnxEmbedder`` runs it on
sample texts (short, long, a padded batch, each under the query and the document prompt) and
compared with sentence-transformers: if any vector is further than ``TOLERANCE`` in cosine, or
the export itself fails, the export is refused, and the reason is recorded beside where it
would have been (``.refused``), so the model runs on torch from then on and says why, without
paying for another attempt at every start. A model whose files already show that it cannot be
exported (``blocker``) is refused without trying.

The export needs torch (a ~10 s import), so it runs once per model and machine — at set-up
(``scripts/setup``, through ``main``) or, failing that, on the first embedding — and never again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from indexing.embedding.model_files import default_model_path, modules, read_dimension, read_prompts
from indexing.embedding.onnx_graph import Graph, GraphSpec
from indexing.identity import Prompts

EXPORT_VERSION = "2"  # 2: the whole pipeline, the tokenizer beside it, checked after export
TOLERANCE = 1e-5  # the largest 1 - cosine allowed between the graph's vector and sentence-transformers'
EXPORTED_MODULES = ("Transformer", "Pooling", "Dense", "Normalize")
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
CHECK_TEXTS = (
    "Acme authentication uses Auth0",
    "x",
    "how does login work?",
    "Ünïcödé, emoji 🚀 and 中文 text in one memory",
)


class ExportRefused(Exception):
    """This model is not exported; ``reason`` says why. Its embedder runs on torch."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def blocker(model_path: Path) -> str | None:
    """Why the model's files show it cannot be exported, or None when an export can be tried."""
    if not (model_path / "config.json").is_file():
        return "it has no config.json"
    for kind, folder in modules(model_path):
        if kind not in EXPORTED_MODULES:
            return f"its {kind} module is not exported (only {', '.join(EXPORTED_MODULES)} are)"
        if kind == "Pooling":
            pooling = json.loads((folder / "config.json").read_text()) if (folder / "config.json").is_file() else {}
            if pooling.get("include_prompt") is False and read_prompts(model_path):
                return "its pooling leaves the prompt's tokens out (include_prompt: false), which the graph does not"
    return None


def export_base(model_path: Path, cache: Path) -> Path:
    """Where this model's export lives (``.onnx``, ``.json``, ``.tokenizer.json``, ``.refused``
    beside this stem): keyed by the folder's path and every file's size and time."""
    fingerprint = [str(model_path.resolve()), EXPORT_VERSION]
    for f in sorted(p for p in model_path.rglob("*") if p.is_file()):
        stat = f.stat()
        fingerprint += [str(f.relative_to(model_path)), str(stat.st_size), str(int(stat.st_mtime))]
    key = hashlib.sha256("\n".join(fingerprint).encode()).hexdigest()[:20]
    return cache / "onnx" / f"{model_path.resolve().name}-{key}"


def refusal(model_path: Path, cache: Path) -> str | None:
    """The reason recorded when this model's export was refused, or the blocker in its files."""
    reason = blocker(model_path)
    if reason is not None:
        return reason
    refused = _beside(export_base(model_path, cache), ".refused")
    return refused.read_text().strip() if refused.is_file() else None


def ensure_export(model_path: Path, cache: Path) -> tuple[GraphSpec, Path]:
    """The checked export (its spec and folder), made now if missing; ``ExportRefused`` if the
    model cannot be exported (recorded, so it is not tried again)."""
    reason = refusal(model_path, cache)
    if reason is not None:
        raise ExportRefused(reason)
    base = export_base(model_path, cache)
    spec_file = _beside(base, ".json")
    if not spec_file.is_file():
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                export(model_path, base)
            except ExportRefused as exc:
                _record_refusal(base, exc.reason)
                raise
            except Exception as exc:  # tracing or the ONNX converter failed: say so, run on torch
                reason = f"the ONNX export failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                _record_refusal(base, reason)
                raise ExportRefused(reason) from exc
    return GraphSpec.load(spec_file), base.parent


def _record_refusal(base: Path, reason: str) -> None:
    base.parent.mkdir(parents=True, exist_ok=True)
    tmp = _beside(base, f".{os.getpid()}.refused.tmp")
    tmp.write_text(reason + "\n")
    os.replace(tmp, _beside(base, ".refused"))


def export(model_path: Path, base: Path) -> GraphSpec:
    """Write the graph, the tokenizer and the spec, check them, and publish the spec last
    (its presence is what says the export is done)."""
    import torch
    from sentence_transformers import SentenceTransformer

    # Eager attention traces into plain matrix products on every architecture.
    st = SentenceTransformer(str(model_path), device="cpu", model_kwargs={"attn_implementation": "eager"}).eval()
    transformer = st[0]
    tokenizer = transformer.tokenizer
    max_tokens = int(st.max_seq_length or tokenizer.model_max_length)
    # Traced once on a batch with padding and a text past a sliding window's width (512 tokens
    # in EmbeddingGemma), so the graph keeps the branches a long text takes.
    long_text = " ".join(["memory"] * min(max_tokens, 640))
    sample = tokenizer(
        ["an example sentence", long_text], padding=True, truncation=True, max_length=max_tokens, return_tensors="pt"
    )
    names = tuple(n for n in INPUTS if n in sample)

    class SentenceVector(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = st

        def forward(self, *tensors):
            features = self.inner(dict(zip(names, tensors)))
            return torch.nn.functional.normalize(features["sentence_embedding"], dim=-1)

    base.parent.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}.tmp"
    model_tmp, tokenizer_tmp = _beside(base, f".{tag}.onnx"), _beside(base, f".{tag}.tokenizer.json")
    axes = {0: "batch", 1: "tokens"}
    try:
        with torch.no_grad(), _index_based_masks():
            torch.onnx.export(
                SentenceVector(),
                tuple(sample[n] for n in names),
                str(model_tmp),
                input_names=list(names),
                output_names=["sentence_embedding"],
                dynamic_axes={**{n: axes for n in names}, "sentence_embedding": {0: "batch"}},
                opset_version=17,
                dynamo=False,
            )
        tokenizer.backend_tokenizer.save(str(tokenizer_tmp))
        spec = GraphSpec(
            model_file=model_tmp.name,
            tokenizer_file=tokenizer_tmp.name,
            inputs=names,
            max_tokens=max_tokens,
            padding_side=str(tokenizer.padding_side),
            pad_id=int(tokenizer.pad_token_id or 0),
            pad_token=str(tokenizer.pad_token or "[PAD]"),
            lower_case=bool(getattr(transformer, "do_lower_case", False)),
            dimension=read_dimension(model_path),
        )
        check(
            st,
            Graph(spec, base.parent, threads=max(1, os.cpu_count() or 1)),
            prompts=read_prompts(model_path),
            long_text=long_text,
        )
        os.replace(model_tmp, _beside(base, ".onnx"))  # each rename atomic: no half file is ever seen
        os.replace(tokenizer_tmp, _beside(base, ".tokenizer.json"))
        spec = dataclasses.replace(
            spec, model_file=_beside(base, ".onnx").name, tokenizer_file=_beside(base, ".tokenizer.json").name
        )
        spec.save(_beside(base, ".json"))
        return spec
    finally:
        model_tmp.unlink(missing_ok=True)
        tokenizer_tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _index_based_masks() -> Iterator[None]:
    """Build attention masks by broadcasting, never by ``vmap``, while tracing.

    transformers builds a mask with an extra rule (EmbeddingGemma's bidirectional attention
    within its sliding window) by ``vmap``, which the tracer cannot follow; the same rules are
    index arithmetic, so broadcasting gives the same mask. The check after the export (a text
    longer than the window among them) is what proves it for each model.
    """
    try:
        from transformers import masking_utils
    except ImportError:  # pragma: no cover - transformers without it has no vmap masks either
        yield
        return
    original = masking_utils.sdpa_mask

    def broadcast(*args, **kwargs):
        kwargs["use_vmap"] = False
        return original(*args, **kwargs)

    masking_utils.sdpa_mask = broadcast  # eager_mask calls it by its module name
    try:
        yield
    finally:
        masking_utils.sdpa_mask = original


def check(st, graph: Graph, *, prompts: Prompts, long_text: str) -> None:
    """Refuse the export unless the graph gives sentence-transformers' vectors (within
    ``TOLERANCE``), one by one and in a padded batch, under both prompts."""
    texts = [*CHECK_TEXTS, long_text]
    worst, where = 1.0, ""
    for side, prompt in (("query", prompts.query), ("document", prompts.document)):
        reference = st.encode(texts, prompt=prompt, normalize_embeddings=True, convert_to_numpy=True, batch_size=8)
        if reference.shape[1] != graph.spec.dimension:
            raise ExportRefused(
                f"its vectors have {reference.shape[1]} dimensions, its files say {graph.spec.dimension}"
            )
        batched = graph.run([prompt + t for t in texts])
        alone = np.stack([graph.run([prompt + t])[0] for t in texts])
        for label, got in (("batched", batched), ("alone", alone)):
            cosine = np.sum(got * reference, axis=1) / np.linalg.norm(got, axis=1) / np.linalg.norm(reference, axis=1)
            if float(cosine.min()) < worst:
                worst, where = float(cosine.min()), f"{side}, {label}"
    if 1.0 - worst > TOLERANCE:
        raise ExportRefused(
            f"the exported graph's vectors differ from sentence-transformers' "
            f"(cosine {worst:.7f} at worst, {where}; at least {1 - TOLERANCE} is needed)"
        )


def main(model: str | None, cache: Path) -> int:
    """Export ``model`` (default: the packaged one) into ``cache`` now (``scripts/setup``)."""
    path = Path(model) if model else default_model_path()
    from indexing.embedding.query_graph import QuantizationRefused, ensure_int8

    try:
        spec, folder = ensure_export(path, cache)
    except ExportRefused as exc:
        print(f"{path}: not exported to ONNX ({exc.reason}); it runs on torch", file=sys.stderr)
        return 0
    print(_beside(export_base(path, cache), ".onnx"), file=sys.stderr)
    try:
        print(folder / ensure_int8(spec, folder, read_prompts(path)).model_file, file=sys.stderr)
    except QuantizationRefused as exc:
        print(f"{path}: queries run on the fp32 graph ({exc.reason})", file=sys.stderr)
    return 0


def _beside(base: Path, suffix: str) -> Path:
    """``base`` with ``suffix`` appended (never ``with_suffix``: a folder name may hold dots)."""
    return base.with_name(base.name + suffix)
