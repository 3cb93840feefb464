"""``esfis sweep``: rows in a partition that no catalog entry names (a write killed between its
vectors and its catalog rows, on a machine that never came back to sweep its journal) are found
by reading every table and purged, on a disk and on S3; a row younger than the grace period (a
write in flight) and every memory the catalog names are left alone."""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from indexing.embedding.testing import HashingEmbedder
from indexing.rows import Row
from server.clock import to_micros
from server.facade import open_service
from server.spaces import partition_key
from tests.catalogs import settings_for
from tests.helpers import files_containing, run_cli


def orphan(svc, space: str | None, id_: str, text: str, written) -> None:
    """A row put down as a killed write leaves it: in the partition, not in the catalog."""
    vector = svc._parts.embedder.embed_documents([text])[0]
    at = to_micros(written)
    svc._parts.store.add(partition_key(space), [Row(id_, text, np.asarray(vector, dtype=np.float32), at, at, None)])


def seeded(svc, clock) -> list[str]:
    svc._parts.registry.add_named("acme")
    caller = svc.caller("cli", space="acme")
    kept = [svc.remember(caller, f"acme keeps memory {i}").id for i in range(3)]
    orphan(svc, "acme", "orphan_old", "a half-written acme secret", clock() - timedelta(hours=1))
    orphan(svc, None, "orphan_personal", "a half-written personal secret", clock() - timedelta(hours=2))
    orphan(svc, "acme", "orphan_young", "a write still in flight", clock())
    return kept


def test_sweep_purges_old_orphans_only_and_keeps_every_memory(fake_service, clock, home):
    kept = seeded(fake_service, clock)
    assert files_containing(home, "a half-written acme secret")

    purged, partitions = fake_service.operator.sweep_orphans(timedelta(minutes=10))

    assert (purged, partitions) == (2, 2)
    assert files_containing(home, "a half-written acme secret") == []
    assert files_containing(home, "a half-written personal secret") == []
    assert "orphan_young" in fake_service._parts.store.row_ids(partition_key("acme"))
    caller = fake_service.caller("cli", space="acme")
    assert [fake_service.get(caller, id_).id for id_ in kept] == kept
    assert fake_service.operator.sweep_orphans(timedelta(minutes=10)) == (0, 2)


def test_sweep_on_s3_leaves_no_object_holding_an_orphan(home, clock, s3, s3_env):
    bucket = s3.bucket()
    svc = open_service(settings_for(home, vectors=f"s3://{bucket}/esfis"), embedder=HashingEmbedder(), clock=clock)
    try:
        kept = seeded(svc, clock)
        assert any(b"a half-written acme secret" in body for body in s3.objects(bucket).values())
        assert svc.operator.sweep_orphans(timedelta(minutes=10)) == (2, 2)
        bodies = s3.objects(bucket).values()
        assert not any(b"half-written" in body for body in bodies)
        assert any(b"acme keeps memory 1" in body for body in bodies)
        caller = svc.caller("cli", space="acme")
        assert [svc.get(caller, id_).id for id_ in kept] == kept
    finally:
        svc.close()


def test_the_cli_says_what_it_purged_and_refuses_a_negative_age(capsys, home, folders):
    code, out, err = run_cli(capsys, folders["acme"], "sweep")
    assert code == 0, err
    assert out.strip() == "purged 0 orphan rows from 0 partitions"
    for bad in ("-5", "0", "4", "nan", "1e30"):
        code, out, err = run_cli(capsys, folders["acme"], "sweep", "--older-than", bad)
        assert code == 2 and "--older-than" in err, (bad, err)
