"""Forget purges: once ``forget`` returns, no file under ESFIS_HOME holds the text — data files,
old Lance versions, transaction files and the catalog included."""

from __future__ import annotations

from indexing.testing import HashingEmbedder
from server.service import open_service
from server.settings import Settings
from tests.helpers import files_containing

SECRET = "the staging root password is hunter2-zebra-97"


def test_forgotten_text_is_in_no_file(service, folders, home):
    service.add_space(folders["acme"])
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


def test_forget_after_replace_purges_every_copy(service, folders, home):
    """A replace rewrites the old row to close its validity: both copies must go."""
    service.add_space(folders["acme"])
    acme = service.caller("cli", cwd=folders["acme"])
    old = service.remember(acme, SECRET)
    service.replace(acme, old.id, "the staging password was rotated")
    service.forget(acme, old.id)
    assert files_containing(home, SECRET) == []


def test_forgotten_id_is_kept_without_text(service, folders):
    service.add_space(folders["acme"])
    acme = service.caller("cli", cwd=folders["acme"])
    memory = service.remember(acme, SECRET)
    service.forget(acme, memory.id)
    row = service.catalog.one("SELECT forgotten_at, digest FROM memories WHERE id = ?", (memory.id,))
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
    fake_service.create_space("acme")
    acme = fake_service.caller("cli", space="acme")
    memories = [fake_service.remember(acme, f"acme fact number {i} about the build", labels=["source:slack"])
                for i in range(60)]
    fake_service.catalog.checkpoint()  # the digests in the database file too, not only in the WAL
    forgotten = memories[3::6]
    hexed = [m.digest.removeprefix("sha256:") for m in forgotten]
    assert all(len(h) == 64 for h in hexed) and files_containing(home, hexed[0])
    for memory in forgotten:
        fake_service.forget(acme, memory.id)
        row = fake_service.catalog.one("SELECT * FROM memories WHERE id = ?", (memory.id,))
        assert (row["digest"], row["labels"], row["from_spaces"], row["key"]) == (None, "[]", "[]", None)
    left = {h: files_containing(home, h) + files_containing(home, h[:16]) for h in hexed}
    assert {h: [p.name for p in files] for h, files in left.items() if files} == {}
    kept = memories[0].digest.removeprefix("sha256:")
    assert files_containing(home, kept)  # the test sees a digest that is still there
