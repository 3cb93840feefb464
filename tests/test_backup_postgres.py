"""Backups of the several-machines layout: the catalog on PostgreSQL, the partitions under an
S3 prefix (the test PostgreSQL of ``tests/catalogs.py`` and moto's S3 server). ``esfis backup``
dumps the catalog with ``pg_dump --snapshot`` and reads which memories it names in that same
snapshot, then copies exactly those rows from the bucket; ``esfis restore`` loads the partitions
into an empty prefix and the dump into an empty database. Run by the PostgreSQL pass."""

from __future__ import annotations

import json
import shutil

import pytest

from indexing.embedding.testing import HashingEmbedder
from indexing.partitions.store import table_name
from indexing.rows import Row
from server.clock import to_micros
from server.errors import BackupDamaged
from server.facade import backup_home, open_service, restore_home
from server.settings import Settings
from tests import catalogs
from tests.catalogs import settings_for
from tests.helpers import files_containing
from tests.test_backup import QUERIES, assert_same_answers, recalls

pytestmark = pytest.mark.postgresql
ORPHAN = "a half-written acme secret nobody committed"
FORGOTTEN = "the vault unseal key is tangerine-otter-4471"


def _database(name: str, schema: str) -> str:
    """A new, empty database of the test cluster; its URL looks in ``schema`` (the dump's)."""
    assert catalogs.CLUSTER is not None
    catalogs.CLUSTER._admin.execute(f"CREATE DATABASE {name}")
    return f"{catalogs.CLUSTER.url(name)}?options=-csearch_path%3D{schema}"


def test_backup_of_postgresql_and_s3_restores_into_an_empty_database_and_prefix(home, tmp_path, clock, s3, s3_env):
    bucket = s3.bucket()
    settings = settings_for(home, vectors=f"s3://{bucket}/live")
    svc = open_service(settings, embedder=HashingEmbedder(), clock=clock)
    try:
        for name in ("acme", "acme/platform", "globex"):
            svc.operator.create_space(name)
        for space, texts in {
            "acme": ["Acme authentication uses Auth0", FORGOTTEN, "Acme deploys on Fridays"],
            "acme/platform": ["the platform gateway is Kong"],
            "globex": ["Globex authentication uses Clerk"],
        }.items():
            for text in texts:
                svc.remember(svc.caller("claude-code", space=space), text)
        svc.remember(svc.caller("claude-code"), "I prefer small pull requests for reviews", personal=True)
        svc.operator.set_policy("cursor", "acme", "deny")
        svc.operator.create_token(operator=True)
        before = recalls(svc, QUERIES)
        # A write killed between its vectors and its catalog rows (asked before it: until a
        # sweep, such a row counts in its partition's BM25 statistics and feedback).
        micros = to_micros(clock())
        svc._parts.store.add(
            "space:acme",
            [Row("mem_" + "a" * 26, ORPHAN, HashingEmbedder().embed_documents([ORPHAN])[0], micros, micros)],
        )
        spaces_then = svc._parts.catalog.all("SELECT * FROM spaces ORDER BY name")

        report = backup_home(tmp_path / "backup", settings)
        assert report.memories == 6
        manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
        assert manifest["catalog"]["kind"] == "pg_dump"
        assert files_containing(tmp_path / "backup", ORPHAN) == []  # no text outside what the catalog names
        forgotten = next(
            r["id"]
            for r in svc._parts.catalog.all("SELECT id FROM memories WHERE digest IS NOT NULL")
            if svc._parts.memories.load(r["id"]).text == FORGOTTEN
        )
        svc.forget(svc.caller("claude-code", space="acme"), forgotten)
    finally:
        svc.close()

    schema = manifest["catalog"]["pg_schema"]
    plain = Settings(
        home=tmp_path / "plain", model=None, catalog=_database("plain_restore", schema), vectors=f"s3://{bucket}/plain"
    )
    key = home / "backup.key"  # the home that took the backup keeps its key
    restore_home(tmp_path / "backup", plain, key_file=key)
    restored = open_service(plain, embedder=HashingEmbedder(), clock=clock)
    try:
        assert_same_answers(recalls(restored, QUERIES), before)
        assert [tuple(r) for r in restored._parts.catalog.all("SELECT * FROM spaces ORDER BY name")] == [
            tuple(r) for r in spaces_then
        ]
        assert restored.operator.policies()[0].describe().startswith("deny cursor")
    finally:
        restored.close()
    assert not any(ORPHAN.encode() in body for body in s3.objects(bucket, "plain/").values())

    again = Settings(
        home=tmp_path / "again", model=None, catalog=_database("again_restore", schema), vectors=f"s3://{bucket}/again"
    )
    done = restore_home(tmp_path / "backup", again, forgets_from=settings.catalog, key_file=key)
    assert done.forgets_applied == 1
    restored = open_service(again, embedder=HashingEmbedder(), clock=clock)
    try:
        assert restored._parts.memories.load(forgotten).forgotten
        assert restored._parts.catalog.one("SELECT digest FROM memories WHERE id = ?", (forgotten,))["digest"] is None
    finally:
        restored.close()
    assert not any(FORGOTTEN.encode() in body for body in s3.objects(bucket, "again/").values())
    with pytest.raises(Exception, match="not empty"):
        restore_home(tmp_path / "backup", again, key_file=key)


def test_a_damaged_backup_leaves_no_catalog_and_no_text_in_the_target(home, tmp_path, clock, s3, s3_env):
    """The partitions go in before the dump: one found damaged drops those written before it,
    so no text is left under the prefix, the database holds no catalog, and a whole copy of the
    backup then restores into the same target."""
    bucket = s3.bucket()
    settings = settings_for(home, vectors=f"s3://{bucket}/live")
    svc = open_service(settings, embedder=HashingEmbedder(), clock=clock)
    try:
        for space in ("acme", "globex"):
            svc.operator.create_space(space)
            svc.remember(svc.caller("claude-code", space=space), f"{space} deploys on Fridays")
    finally:
        svc.close()
    backup_home(tmp_path / "backup", settings)
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert [p["key"] for p in manifest["partitions"]] == ["space:acme", "space:globex"]
    shutil.copytree(tmp_path / "backup", tmp_path / "damaged")
    for data in (tmp_path / "damaged" / "vectors" / f"{table_name('space:globex')}.lance" / "data").iterdir():
        data.unlink()

    target = Settings(
        home=tmp_path / "restored",
        model=None,
        catalog=_database("damaged_restore", manifest["catalog"]["pg_schema"]),
        vectors=f"s3://{bucket}/restored",
    )
    with pytest.raises(BackupDamaged, match="partition space:globex .* cannot be read"):
        restore_home(tmp_path / "damaged", target, key_file=home / "backup.key")
    assert not any(b"deploys on Fridays" in body for body in s3.objects(bucket, "restored/").values())
    assert restore_home(tmp_path / "backup", target, key_file=home / "backup.key").memories == 2
