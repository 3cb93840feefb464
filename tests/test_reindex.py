"""``esfis reindex``: a store built with one model is embedded again with another, every memory
kept with its id and validity, the old vectors and texts gone from disk; a run killed at any
point is run again to completion with each memory once; a store open in another process is
never reindexed under it; the real packaged model reads the reindexed store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from indexing.embedding.testing import HashingEmbedder
from server.bulk.reindex import NEXT, REPLACED
from server.errors import StoreUnavailable
from server.facade import open_service, reindex_store
from server.spaces import partition_key
from tests.catalogs import settings_for
from tests.conftest import cli_env
from tests.helpers import files_containing

OLD = HashingEmbedder(64, "hashing-old")
NEW = HashingEmbedder(32, "hashing-new")


def seeded(home: Path, clock, count: int = 30) -> dict[str, str]:
    svc = open_service(settings_for(home), embedder=OLD, clock=clock)
    try:
        svc._parts.registry.add_named("acme")
        acme = svc.caller("cli", space="acme")
        ids = {f"acme note n{i:03d}": svc.remember(acme, f"acme note n{i:03d}").id for i in range(count)}
        ids["Acme authentication uses Auth0"] = svc.remember(acme, "Acme authentication uses Auth0").id
        ids["a personal preference"] = svc.remember(svc.caller("cli"), "a personal preference", personal=True).id
        old = svc.remember(acme, "Acme deploys on Fridays").id
        ids["Acme deploys on Mondays"] = svc.replace(acme, old, "Acme deploys on Mondays").id
        svc.forget(acme, ids.pop("acme note n002"))
        return ids
    finally:
        svc.close()


def test_reindex_embeds_every_memory_again_and_keeps_ids_and_validity(home, clock):
    ids = seeded(home, clock)
    report = reindex_store(settings_for(home), embedder=NEW, batch=7)
    assert (report.model_before, report.model_after, report.rows) == ("hashing-old", "hashing-new", len(ids) + 1)

    with pytest.raises(StoreUnavailable, match="hashing-new"):
        open_service(settings_for(home), embedder=OLD, clock=clock)
    svc = open_service(settings_for(home), embedder=NEW, clock=clock)
    try:
        acme = svc.caller("cli", space="acme")
        for text, id_ in ids.items():
            caller = svc.caller("cli") if text == "a personal preference" else acme
            assert svc.get(caller, id_).text == text
        assert svc._parts.store.vector(partition_key("acme"), ids["acme note n001"]).shape == (32,)
        deploys = [m.text for m in svc.recall(acme, "Acme deploys on", limit=50).memories]
        assert "Acme deploys on Mondays" in deploys and "Acme deploys on Fridays" not in deploys
    finally:
        svc.close()
    assert files_containing(home, "acme note n002") == []  # forgotten before: not brought back
    assert {p.relative_to(home).parts[0] for p in files_containing(home, "acme note n007")} == {"vectors"}
    assert not (home / NEXT).exists() and not (home / REPLACED).exists()
    assert json.loads((home / "vectors" / "store.json").read_text())["model"] == "hashing-new"
    assert reindex_store(settings_for(home), embedder=NEW).rows == 0  # nothing left to do


def test_a_store_open_in_another_process_is_never_reindexed_under_it(home, clock):
    seeded(home, clock, count=3)
    svc = open_service(settings_for(home), embedder=OLD, clock=clock)
    try:
        with pytest.raises(StoreUnavailable, match="open in another process"):
            reindex_store(settings_for(home), embedder=NEW)
        assert svc.get(
            svc.caller("cli", space="acme"),
            svc.recall(svc.caller("cli", space="acme"), "acme note n001").memories[0].id,
        )
    finally:
        svc.close()
    assert reindex_store(settings_for(home), embedder=NEW).model_after == "hashing-new"


REINDEX_WITH_FAILPOINT = """
from indexing.embedding.testing import HashingEmbedder
from server.facade import reindex_store
from server.settings import Settings
reindex_store(Settings.from_env(), embedder=HashingEmbedder(32, "hashing-new"), batch=4)
"""


@pytest.mark.parametrize("failpoint", ["reindex:after-batch@3", "reindex:mid-swap"])
def test_a_killed_reindex_runs_again_to_completion_with_each_memory_once(home, clock, failpoint):
    ids = seeded(home, clock)
    killed = subprocess.run(
        [sys.executable, "-c", REINDEX_WITH_FAILPOINT],
        env=cli_env(home, ESFIS_FAILPOINT=failpoint),
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -9, killed.stderr
    # A memory forgotten while the reindex lies interrupted must not come back from its copy.
    svc = open_service(settings_for(home), embedder=NEW if failpoint == "reindex:mid-swap" else OLD, clock=clock)
    try:
        svc.forget(svc.caller("cli", space="acme"), ids.pop("acme note n005"))
    finally:
        svc.close()
    if failpoint == "reindex:mid-swap":
        assert not (home / REPLACED).exists(), "opening the store finished the swap"
    reindex_store(settings_for(home), embedder=NEW, batch=4)
    svc = open_service(settings_for(home), embedder=NEW, clock=clock)
    try:
        stored = svc._parts.store.row_ids(partition_key("acme"))
        assert len(stored) == len(set(stored))
        acme = svc.caller("cli", space="acme")
        for text, id_ in ids.items():
            caller = svc.caller("cli") if text == "a personal preference" else acme
            assert svc.get(caller, id_).text == text
    finally:
        svc.close()
    assert files_containing(home, "acme note n005") == []


def test_the_cli_reindexes_into_the_packaged_model_which_then_answers(home, clock, folders, real_embedder):
    svc = open_service(settings_for(home), embedder=OLD, clock=clock)
    try:
        svc.operator.add_space(folders["acme"])
        svc.operator.add_space(folders["globex"])
        svc.remember(svc.caller("cli", space="acme"), "Acme authentication uses Auth0")
        svc.remember(svc.caller("cli", space="globex"), "Globex authentication uses Clerk")
        svc.remember(svc.caller("cli", space="acme"), "Acme invoices are paid monthly")
    finally:
        svc.close()
    esfis = str(Path(sys.executable).with_name("esfis"))
    done = subprocess.run(
        [esfis, "reindex"], env=cli_env(home), cwd=folders["acme"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"reindexed 3 memories in 2 partitions with {real_embedder.name}"), done.stdout
    recalled = subprocess.run(
        [esfis, "recall", "how does login work?", "--json"],
        env=cli_env(home),
        cwd=folders["acme"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert recalled.returncode == 0, recalled.stderr
    texts = [m["text"] for m in json.loads(recalled.stdout)["memories"]]
    assert texts[0] == "Acme authentication uses Auth0"
    assert not any("Clerk" in t for t in texts), "the reindexed partitions stay apart"
    again = subprocess.run([esfis, "reindex"], env=cli_env(home), capture_output=True, text=True, timeout=300)
    assert "nothing to do" in again.stdout
