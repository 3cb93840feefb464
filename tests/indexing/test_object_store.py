"""Partitions on S3-compatible object storage (``indexing/partitions/location.py``), against a real
server (moto's, ``tests/objectstore.py``): the store works there as on a disk, forget leaves no
object under the prefix holding the text, and a second machine (another local folder over the same
prefix, sharing the partition versions) sees every write and forget at its next search, its own
image included.

The partition versions are shared here through one token folder, as the catalog shares them
across machines (``server.catalog.partition_sync``, proven with two real servers in
``tests/http/test_several_servers.py``)."""

from __future__ import annotations

import socket
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from botocore.exceptions import ClientError

import indexing.partitions.image_cache as image_cache
from indexing.errors import StoreMismatch
from indexing.identity import Prompts
from indexing.partitions import image_build
from indexing.partitions.coordination import LocalCoordination
from indexing.partitions.store import VectorStore, table_name
from indexing.rows import Row
from tests.helpers import files_containing

DIM = 16
KEY = "space:acme"
NOW = 10**15


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def rows(n: int, start: int = 0, seed: int = 0, text=lambda i: f"memory number {i}") -> list[Row]:
    vectors = unit(np.random.default_rng(seed).normal(size=(n, DIM)))
    return [Row(f"r{start + i}", text(start + i), v, 0, 0, None) for i, v in enumerate(vectors)]


@pytest.fixture
def bucket(s3, s3_env) -> str:
    return s3.bucket()


def machine(bucket: str, local: Path, shared: Path) -> VectorStore:
    """One machine's store over the bucket: its own folder, the versions shared."""
    return VectorStore(
        f"s3://{bucket}/esfis",
        local=local,
        model="m",
        dimension=DIM,
        coordination=LocalCoordination(shared, table_name),
    )


def texts_in(s3, bucket: str, needle: str) -> list[str]:
    return [key for key, body in s3.objects(bucket).items() if needle.encode() in body]


def test_the_server_honours_the_conditional_put_lance_commits_with(s3, bucket):
    s3.client.put_object(Bucket=bucket, Key="once", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        s3.client.put_object(Bucket=bucket, Key="once", Body=b"second", IfNoneMatch="*")
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.objects(bucket)["once"] == b"first"


def test_a_partition_on_s3_is_written_searched_closed_and_forgotten(s3, bucket, tmp_path):
    store = machine(bucket, tmp_path / "a", tmp_path / "versions")
    written = rows(40, text=lambda i: f"secret plan {i}" if i == 7 else f"memory number {i}")
    store.add(KEY, written)
    assert not list((tmp_path / "a").glob("*.lance")), "the table lies in the bucket, not on the disk"
    query = written[7].vector
    assert store.search(KEY, query, 3, now=NOW).hits[0].id == "r7"
    store.end_validity(KEY, "r3", 5)
    assert "r3" not in {h.id for h in store.search(KEY, written[3].vector, 40, now=NOW).hits}
    assert texts_in(s3, bucket, "secret plan 7"), "the text is in the bucket before the forget"

    store.purge(KEY, ["r7"])

    assert texts_in(s3, bucket, "secret plan 7") == []
    assert files_containing(tmp_path, "secret plan 7") == []
    assert "r7" not in {h.id for h in store.search(KEY, query, 40, now=NOW).hits}
    assert texts_in(s3, bucket, "memory number 8"), "the other memories stay"


def test_a_second_machine_sees_every_write_and_forget_at_its_next_search(s3, bucket, tmp_path):
    a = machine(bucket, tmp_path / "a", tmp_path / "versions")
    b = machine(bucket, tmp_path / "b", tmp_path / "versions")
    first = rows(5)
    a.add(KEY, first)
    assert {h.id for h in b.search(KEY, first[0].vector, 10, now=NOW).hits} == {f"r{i}" for i in range(5)}
    more = rows(5, start=5, seed=1)
    a.add(KEY, more)
    assert "r9" in {h.id for h in b.search(KEY, more[4].vector, 10, now=NOW).hits}
    b.purge(KEY, ["r9"])
    assert "r9" not in {h.id for h in a.search(KEY, more[4].vector, 10, now=NOW).hits}
    assert {h.id for h in b.search(KEY, first[0].vector, 10, now=NOW).hits} == {f"r{i}" for i in range(9)}


def test_a_forget_on_one_machine_rebuilds_the_image_another_machine_keeps(s3, bucket, tmp_path, monkeypatch):
    monkeypatch.setattr(image_cache, "ANN_THRESHOLD", 1000)
    a = machine(bucket, tmp_path / "a", tmp_path / "versions")
    b = machine(bucket, tmp_path / "b", tmp_path / "versions")
    written = rows(1200, text=lambda i: f"the vault code is {i}" if i == 42 else f"memory number {i}")
    for start in range(0, 1200, 400):
        a.add(KEY, written[start : start + 400], compact=False)
    a.settle(KEY)
    query = written[42].vector
    assert b.search(KEY, query, 5, now=NOW).hits[0].id == "r42"  # b builds and maps an image of its own
    assert files_containing(tmp_path / "b", "the vault code is 42"), "b's image holds the text"

    a.purge(KEY, ["r42"])

    assert texts_in(s3, bucket, "the vault code is 42") == []
    assert "r42" not in {h.id for h in b.search(KEY, query, 5, now=NOW).hits}
    assert files_containing(tmp_path / "b", "the vault code is 42") == []
    assert files_containing(tmp_path / "a", "the vault code is 42") == []


def test_a_store_on_s3_refuses_another_model(bucket, tmp_path):
    VectorStore(f"s3://{bucket}/esfis", local=tmp_path / "a", model="m", dimension=DIM)
    with pytest.raises(StoreMismatch, match="built with model 'm'"):
        VectorStore(f"s3://{bucket}/esfis", local=tmp_path / "b", model="other", dimension=DIM)
    VectorStore(f"s3://{bucket}/esfis", local=tmp_path / "c", model="m", dimension=DIM)


def test_a_store_on_s3_records_the_prompts_and_refuses_others(bucket, tmp_path):
    prompts = Prompts("task: search result | query: ", "title: none | text: ")
    VectorStore(f"s3://{bucket}/esfis", local=tmp_path / "a", model="m", dimension=DIM, prompts=prompts)
    with pytest.raises(StoreMismatch, match="query prompt 'task: search result.*the model in use is 'm' \\(16-d\\)"):
        VectorStore(f"s3://{bucket}/esfis", local=tmp_path / "b", model="m", dimension=DIM)
    with pytest.raises(StoreMismatch, match="document prompt 'passage: '"):
        VectorStore(
            f"s3://{bucket}/esfis",
            local=tmp_path / "c",
            model="m",
            dimension=DIM,
            prompts=Prompts(prompts.query, "passage: "),
        )
    VectorStore(f"s3://{bucket}/esfis", local=tmp_path / "d", model="m", dimension=DIM, prompts=prompts)


def test_dropping_a_partition_removes_every_object_of_its_table(s3, bucket, tmp_path):
    store = machine(bucket, tmp_path / "a", tmp_path / "versions")
    store.add(KEY, rows(5, text=lambda i: f"doomed {i}"))
    store.add("space:globex", rows(3, seed=2, text=lambda i: f"kept {i}"))
    assert texts_in(s3, bucket, "doomed 1")

    store.drop(KEY)

    assert texts_in(s3, bucket, "doomed") == []
    assert not [key for key in s3.objects(bucket) if f"{table_name(KEY)}.lance" in key]
    assert texts_in(s3, bucket, "kept 1")
    assert store.search(KEY, rows(1)[0].vector, 5, now=NOW).hits == []


class RecordingTurns(LocalCoordination):
    """The shared versions, and a record of when the turn among machines is held."""

    def __init__(self, folder: Path, events: list[str]) -> None:
        super().__init__(folder, table_name)
        self.events = events

    @contextmanager
    def writer_turn(self, key: str):
        self.events.append("turn taken")
        yield
        self.events.append("turn given back")


def test_an_image_build_waits_until_the_turn_among_machines_is_given_back(s3, bucket, tmp_path, monkeypatch):
    monkeypatch.setattr(image_cache, "ANN_THRESHOLD", 1000)
    events: list[str] = []
    build = image_build.build_in_child
    monkeypatch.setattr(
        image_build, "build_in_child", lambda *a, **k: (events.append("image built"), build(*a, **k))[1]
    )
    store = VectorStore(
        f"s3://{bucket}/esfis",
        local=tmp_path / "a",
        model="m",
        dimension=DIM,
        coordination=RecordingTurns(tmp_path / "versions", events),
    )
    written = rows(1200, text=lambda i: f"the vault code is {i}" if i == 42 else f"memory number {i}")
    store.add(KEY, written, compact=False)
    events.clear()
    store.settle(KEY)
    assert events == ["turn taken", "turn given back", "image built"]
    events.clear()
    store.purge(KEY, ["r42"])
    assert events == ["turn taken", "turn given back", "image built"]
    assert files_containing(tmp_path / "a", "the vault code is 42") == []
    assert "r42" not in {h.id for h in store.search(KEY, written[42].vector, 5, now=NOW).hits}


def test_a_table_dropped_and_made_again_elsewhere_is_never_served_from_an_old_image(s3, bucket, tmp_path, monkeypatch):
    monkeypatch.setattr(image_cache, "ANN_THRESHOLD", 1000)
    a = machine(bucket, tmp_path / "a", tmp_path / "versions")
    b = machine(bucket, tmp_path / "b", tmp_path / "versions")
    old = rows(1200, text=lambda i: f"old memory {i}")
    a.add(KEY, old, compact=False)
    a.settle(KEY)
    assert b.search(KEY, old[12].vector, 3, now=NOW).hits[0].id == "r12"  # b maps an image of its own
    a.drop(KEY)
    assert b.search(KEY, old[12].vector, 3, now=NOW).hits == []  # gone, not an error, not the old rows
    new = [Row(f"n{r.id}", f"new memory {r.id}", r.vector, 0, 0, None) for r in rows(1200, seed=5)]
    a.add(KEY, new, compact=False)
    a.settle(KEY)
    found = b.search(KEY, new[10].vector, 3, now=NOW).hits
    assert found[0].id == "nr10" and all(h.id.startswith("n") for h in found)
    assert files_containing(tmp_path / "b", "old memory 12") == []


def test_removing_a_table_from_a_store_that_fails_says_so(s3_env, tmp_path, monkeypatch):
    from indexing.partitions.location import Location

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{dead}")
    with pytest.raises(Exception) as failed:
        Location.of("s3://esfis-test-gone/esfis", tmp_path).remove_table("p.space_3aacme")
    assert "not found" not in str(failed.value).lower()
