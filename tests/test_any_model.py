"""A store under any sentence-transformers model: it records the model and its prompts and
refuses others; a 48-d model (``tests/tiny_model.py``, built at test time) works end to end —
import, the persisted image of a large partition, reindex — as MiniLM's 384 do; and stores made
before prompts were recorded open as they always did."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import indexing.partitions.image_cache as image_cache
from indexing.embedding.embedder import load_embedder
from indexing.embedding.testing import HashingEmbedder
from indexing.identity import Prompts
from indexing.partitions.store import table_name
from server.errors import StoreUnavailable
from server.facade import open_service, reindex_store
from server.spaces import partition_key
from tests.catalogs import settings_for
from tests.tiny_model import DIMENSION

THRESHOLD = 600  # the image threshold, lowered so a large partition stays small here


def tiny(model: Path, cache: Path):
    return load_embedder(str(model), backend="onnx", device="cpu", cache=cache)


def with_query_prompt(model: Path, folder: Path, prompt: str) -> Path:
    """A copy of ``model`` whose query prompt is ``prompt`` (weights unchanged)."""
    shutil.copytree(model, folder)
    config_file = folder / "config_sentence_transformers.json"
    config = json.loads(config_file.read_text())
    config["prompts"]["query"] = prompt
    config_file.write_text(json.dumps(config))
    return folder


def test_the_store_records_the_prompts_and_refuses_a_changed_one(home, clock, tiny_model, tiny_cache, tmp_path):
    svc = open_service(settings_for(home), embedder=tiny(tiny_model, tiny_cache), clock=clock)
    svc.close()
    recorded = json.loads((home / "vectors" / "store.json").read_text())
    assert recorded == {
        "model": tiny_model.name,
        "dimension": DIMENSION,
        "prompts": {"query": "query: ", "document": "passage: "},
    }
    changed = with_query_prompt(tiny_model, tmp_path / tiny_model.name, "search_query: ")
    embedder = tiny(changed, tiny_cache)
    assert (embedder.name, embedder.dimension) == (tiny_model.name, DIMENSION)  # only the prompt differs
    with pytest.raises(StoreUnavailable, match="query prompt 'query: '.*query prompt 'search_query: '.*esfis reindex"):
        open_service(settings_for(home), embedder=embedder, clock=clock)


def test_a_store_from_before_prompts_opens_and_keeps_its_manifest(home, clock):
    """The default model has no prompts: its stores record what they always did, both ways."""
    (home / "vectors").mkdir(parents=True)
    (home / "vectors" / "store.json").write_text(json.dumps({"model": "hashing-test", "dimension": 64}))
    open_service(settings_for(home), embedder=HashingEmbedder(), clock=clock).close()
    assert json.loads((home / "vectors" / "store.json").read_text()) == {"model": "hashing-test", "dimension": 64}
    with pytest.raises(StoreUnavailable, match="document prompt 'passage: '"):
        open_service(settings_for(home), embedder=HashingEmbedder(prompts=Prompts("query: ", "passage: ")), clock=clock)


def test_a_prompt_change_alone_is_reindexed(home, clock):
    old, new = HashingEmbedder(32, "m"), HashingEmbedder(32, "m", Prompts("query: ", "passage: "))
    svc = open_service(settings_for(home), embedder=old, clock=clock)
    try:
        svc._parts.registry.add_named("acme")
        svc.remember(svc.caller("cli", space="acme"), "Acme authentication uses Auth0")
    finally:
        svc.close()
    assert reindex_store(settings_for(home), embedder=new).rows == 1
    svc = open_service(settings_for(home), embedder=new, clock=clock)
    svc.close()
    assert reindex_store(settings_for(home), embedder=new).rows == 0


def test_a_48_d_model_works_through_import_images_and_reindex(home, clock, tiny_model, tiny_cache, monkeypatch):
    monkeypatch.setattr(image_cache, "ANN_THRESHOLD", THRESHOLD)
    embedder = tiny(tiny_model, tiny_cache)
    # A store of another model first, so the tiny model's store is made by esfis reindex.
    svc = open_service(settings_for(home), embedder=HashingEmbedder(64, "hashing-old"), clock=clock)
    try:
        svc._parts.registry.add_named("acme")
        svc._parts.registry.add_named("globex")
        svc.remember(svc.caller("cli", space="acme"), "Acme authentication uses Auth0")
        svc.remember(svc.caller("cli", space="globex"), "Globex authentication uses Clerk")
    finally:
        svc.close()
    report = reindex_store(settings_for(home), embedder=embedder)
    assert (report.model_after, report.rows) == (tiny_model.name, 2)

    svc = open_service(settings_for(home), embedder=embedder, clock=clock)
    try:
        acme = svc.caller("cli", space="acme")
        # Import: texts embedded by the model, and rows that bring their own 48-d vectors.
        rng = np.random.default_rng(0)
        own = rng.normal(size=(THRESHOLD + 100, DIMENSION)).astype(np.float32)
        own /= np.linalg.norm(own, axis=1, keepdims=True)
        lines = [{"text": f"acme note n{i:04d}", "space": "acme", "vector": own[i].tolist()} for i in range(len(own))]
        lines += [{"text": "Acme invoices are paid monthly", "space": "acme"}]
        imported = svc.operator.import_jsonl(io.BytesIO("\n".join(json.dumps(line) for line in lines).encode()))
        assert (imported.imported, imported.failed) == (len(lines), 0), imported.summary()
        wrong = svc.operator.import_jsonl(
            io.BytesIO(json.dumps({"text": "t", "space": "acme", "vector": [0.1] * 384}).encode())
        )
        assert wrong.failed == 1
        # The image: past the threshold the partition is served by its persisted IVF image.
        key = partition_key("acme")
        assert (home / "vectors" / f"{table_name(key)}.image").is_dir()
        assert svc._parts.store.vector(key, svc.recall(acme, "acme note n0042", limit=1).memories[0].id).shape == (
            DIMENSION,
        )
        probe = svc._parts.store.search(key, own[42], 1, now=10**18)
        assert probe.hit(0).text == "acme note n0042"
        texts = [m.text for m in svc.recall(acme, "Acme invoices are paid monthly", limit=10).memories]
        assert "Acme invoices are paid monthly" in texts and not any("Clerk" in t for t in texts)
    finally:
        svc.close()
    # Reindex again, into a model of another dimension: every row, image included, remade.
    back = reindex_store(settings_for(home), embedder=HashingEmbedder(64, "hashing-old"))
    assert back.rows == len(lines) + 2
