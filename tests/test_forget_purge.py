"""Forget purges: once ``forget`` returns, no file under ESFIS_HOME holds the text — data files,
old Lance versions, transaction files and the catalog included."""

from __future__ import annotations

import io
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from indexing.embedding.testing import HashingEmbedder
from server.facade import open_service
from server.settings import Settings
from tests.helpers import file_bytes, files_containing

SECRET = "the staging root password is hunter2-zebra-97"


def test_forgotten_text_is_in_no_file(service, folders, home, partition_form):
    service.operator.add_space(folders["acme"])
    acme = service.caller("cli", cwd=folders["acme"])
    # Neighbours in the same fragment, so a plain delete would leave the row in its data file.
    for i in range(30):
        service.remember(acme, f"acme fact number {i} about the build")
    secret = service.remember(acme, SECRET)
    for i in range(30, 40):
        service.remember(acme, f"acme fact number {i} about the build")
    assert files_containing(home, SECRET)  # the test can see the text while it is stored
    service.forget(acme, secret.id)
    assert files_containing(home, SECRET) == []
    assert all(SECRET not in m.text for m in service.recall(acme, "staging root password", limit=100).memories)
    assert len(service.recall(acme, "acme fact about the build", limit=100).memories) == 40


def test_forget_after_replace_purges_every_copy(service, folders, home, partition_form):
    """A replace rewrites the old row to close its validity: both copies must go."""
    service.operator.add_space(folders["acme"])
    acme = service.caller("cli", cwd=folders["acme"])
    old = service.remember(acme, SECRET)
    service.replace(acme, old.id, "the staging password was rotated")
    service.forget(acme, old.id)
    assert files_containing(home, SECRET) == []


def test_forgotten_id_is_kept_without_text(service, folders):
    service.operator.add_space(folders["acme"])
    acme = service.caller("cli", cwd=folders["acme"])
    memory = service.remember(acme, SECRET)
    service.forget(acme, memory.id)
    row = service._parts.catalog.one("SELECT forgotten_at, digest FROM memories WHERE id = ?", (memory.id,))
    assert row["forgotten_at"] is not None and row["digest"] is None


def test_forget_leaves_no_digest_or_labels_in_the_catalog_its_wal_or_free_pages(home, clock):
    """The text's sha256 would let anyone holding the files confirm a guess of a short text: after
    forget, no file under ESFIS_HOME holds it (the database, its WAL, free space in its pages),
    nor the first 16 hex digits the digest index keeps; the row keeps no labels. Ten memories
    spread over the table's pages are forgotten: where a freed cell lies decides whether SQLite
    would leave its bytes behind (without secure_delete, some of the ten always were).
    SQLite's promise, so on SQLite whatever the backend under test: PostgreSQL keeps dead row
    versions in its own files until they are reused (README, "The catalog on PostgreSQL")."""
    fake_service = open_service(Settings(home=home, model=None), embedder=HashingEmbedder(), clock=clock)
    try:
        _forget_ten(fake_service, home)
    finally:
        fake_service.close()


def _forget_ten(fake_service, home) -> None:
    fake_service.operator.create_space("acme")
    acme = fake_service.caller("cli", space="acme")
    memories = [
        fake_service.remember(acme, f"acme fact number {i} about the build", labels=["source:slack"]) for i in range(60)
    ]
    fake_service._parts.catalog.checkpoint()  # the digests in the database file too, not only in the WAL
    forgotten = memories[3::6]
    hexed = [m.digest.removeprefix("sha256:") for m in forgotten]
    assert all(len(h) == 64 for h in hexed) and files_containing(home, hexed[0])
    for memory in forgotten:
        fake_service.forget(acme, memory.id)
        row = fake_service._parts.catalog.one("SELECT * FROM memories WHERE id = ?", (memory.id,))
        assert (row["digest"], row["labels"], row["from_spaces"], row["key"]) == (None, "[]", "[]", None)
    left = {h: files_containing(home, h) + files_containing(home, h[:16]) for h in hexed}
    assert {h: [p.name for p in files] for h, files in left.items() if files} == {}
    kept = memories[0].digest.removeprefix("sha256:")
    assert files_containing(home, kept)  # the test sees a digest that is still there


@pytest.mark.postgresql
def test_forget_on_postgresql_leaves_no_row_version_holding_the_digest(fake_service):
    """PostgreSQL's counterpart, as far as it goes: once forget returns, no version of a row, live
    or dead, in the memories table or its digest index, holds the digest, its 16-digit prefix or
    the labels (pageinspect reads every item of every page). What it cannot promise: the bytes
    of a pruned row may stay in a page's free space, and in the WAL, until reused (README)."""
    catalog = fake_service._parts.catalog
    with catalog.transaction() as tx:
        tx.execute("CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
    fake_service.operator.create_space("acme")
    acme = fake_service.caller("cli", space="acme")
    memories = [
        fake_service.remember(acme, f"acme fact number {i} about the build", labels=[f"source:slack-{i}"])
        for i in range(60)
    ]
    forgotten = memories[3::6]
    for memory in forgotten:
        fake_service.forget(acme, memory.id)
    hexed = [m.digest.removeprefix("sha256:") for m in forgotten]
    needles = [h.encode() for h in hexed] + [h[:16].encode() for h in hexed]
    needles += [f'"source:slack-{i}"'.encode() for i in range(3, 60, 6)]  # as the labels column holds them
    items = _items(catalog, "memories", "heap_page_items", "t_data") + _items(
        catalog, "memories_by_digest16", "bt_page_items", "data"
    )
    assert any(memories[0].digest.removeprefix("sha256:")[:16].encode() in i for i in items)  # the test sees a kept one
    assert [n for n in needles if any(n in i for i in items)] == []


def _items(catalog, relation: str, reader: str, column: str) -> list[bytes]:
    """Every item of every page of ``relation``, as bytes (a btree's index tuples as hex text)."""
    pages = catalog.one(f"SELECT pg_relation_size('{relation}') / current_setting('block_size')::int AS n")["n"]
    found = []
    for page in range(1 if reader == "bt_page_items" else 0, pages):  # a btree's page 0 is its meta page
        rows = catalog.all(f"SELECT {column} AS item FROM public.{reader}(public.get_raw_page('{relation}', {page}))")
        for row in rows:
            item = row["item"]
            if item is None:
                continue
            # heap items are bytea; a btree item's data is its bytes in hex, spaced
            found.append(bytes(item) if not isinstance(item, str) else bytes.fromhex(item.replace(" ", "")))
    return found


@pytest.mark.parametrize("at_once", [False, True], ids=["one-by-one", "at-once"])
def test_forget_leaves_no_copy_that_a_rebalanced_page_kept(home, clock, at_once):
    """SQLite's secure_delete zeroes a deleted cell, but a page that a rebalance rebuilt keeps
    old cells in its unallocated gap: copies of cells that moved to a sibling. Among thousands
    of memories imported in random digest order, some digest index cells have such a copy
    before anything is forgotten; forgetting those memories leaves none of it in any file
    (the catalog is rebuilt when a gap holds a fragment of what the forget cleared), also when
    the forgets run at once and share their scrubs (``scrub_rounds``)."""
    fake_service = open_service(Settings(home=home, model=None), embedder=HashingEmbedder(), clock=clock)
    try:
        fake_service.operator.create_space("acme")
        lines = "".join(
            json.dumps({"space": "acme", "text": f"acme fact {i}: build step {i * 7919 % 10007}", "key": f"row-{i}"})
            + "\n"
            for i in range(8000)
        )
        fake_service.operator.import_jsonl(io.BytesIO(lines.encode()), batch_size=100)
        catalog = fake_service._parts.catalog
        assert catalog.checkpoint()
        data = file_bytes(home / "esfis.db")
        rows = catalog.all("SELECT id, digest FROM memories WHERE forgotten_at IS NULL")
        # The row holds the whole digest and the index its first 16 digits: a third is a copy.
        copied = [(r["id"], r["digest"]) for r in rows if data.count(r["digest"][:16].encode()) > 2]
        assert copied, "no stale copy to forget: the import no longer rebalances the digest index"
        acme = fake_service.caller("cli", space="acme")
        forgets = [memory_id for memory_id, _ in copied[:5]]
        if at_once:  # with others beside them, so that the scrubs overlap
            others = [r["id"] for r in rows if r["id"] not in dict(copied)][-6:]
            forgets += others
            with ThreadPoolExecutor(len(forgets)) as pool:
                list(pool.map(lambda memory_id: fake_service.forget(acme, memory_id), forgets))
        else:
            for memory_id in forgets:
                fake_service.forget(acme, memory_id)
        assert catalog._scrubs.rounds <= len(forgets)
        left = {d[:16]: [p.name for p in files_containing(home, d[:16])] for _, d in copied[:5]}
        assert {prefix: files for prefix, files in left.items() if files} == {}
        kept = next(r["digest"] for r in rows if r["id"] not in forgets)
        assert files_containing(home, kept)  # the test sees a digest that is still there
    finally:
        fake_service.close()
