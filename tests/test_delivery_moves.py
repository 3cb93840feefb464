"""A recall's delivery items land unindexed by memory and move into ``delivery_items`` in batches
(server.memories.delivery_moves): every read sees a delivery whole from its commit on, moved or
not, and a move never loses or doubles a row, however recalls and moves meet."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from contextlib import contextmanager

import pytest

from indexing.embedding.testing import HashingEmbedder
from server.catalog import SCHEMA_VERSION, open_catalog
from server.errors import CatalogUnavailable, Unavailable
from server.facade import open_service
from server.memories.delivery_moves import DeliveryMoves
from server.memories.listing import deliveries_of
from tests.conftest import settings_for

TEXTS = [f"acme service {i} runs on host {i} behind the gateway" for i in range(12)]


def _seed(svc):
    svc.operator.create_space("acme")
    writer = svc.caller("w", space="acme")
    return [svc.remember(writer, text, dedupe=False).id for text in TEXTS]


def _count(catalog, table: str) -> int:
    return int(catalog.one(f"SELECT count(*) AS n FROM {table}")["n"])


def _items(catalog) -> list[tuple]:
    return [
        tuple(r)
        for r in catalog.all(
            "SELECT delivery_id, memory_id, rank, score, outcome FROM all_delivery_items ORDER BY delivery_id, rank"
        )
    ]


def test_a_recall_writes_no_row_the_memory_index_keeps_and_reads_see_it_whole(fake_service):
    svc = fake_service
    ids = _seed(svc)
    catalog = svc._parts.catalog
    reader = svc.caller("reader", space="acme", run="r1")
    for _ in range(3):
        svc.recall(reader, "which host runs the acme service?", limit=5)
    assert _count(catalog, "delivery_items") == 0  # no page of the index by memory dirtied
    recent = _count(catalog, "recent_delivery_items")
    assert recent > 0
    before = _items(catalog)
    log = svc._parts.deliveries
    delivered = [log.get(d.id) for d in log.list()]
    shown = {m: [tuple(r) for r in deliveries_of(catalog, m)] for m in ids}
    assert sum(map(len, shown.values())) == recent

    assert log.moves.move_all() == recent
    assert (_count(catalog, "delivery_items"), _count(catalog, "recent_delivery_items")) == (recent, 0)
    assert _items(catalog) == before  # the same rows, none lost, none twice
    assert [log.get(d.id) for d in log.list()] == delivered
    assert {m: [tuple(r) for r in deliveries_of(catalog, m)] for m in ids} == shown
    assert log.moves.move_all() == 0


def test_a_move_takes_a_batch_at_a_time_oldest_first(fake_service):
    svc = fake_service
    _seed(svc)
    catalog = svc._parts.catalog
    reader = svc.caller("reader", space="acme", run="r1")
    for _ in range(5):
        svc.recall(reader, "gateway host", limit=3)
    first = [int(r["delivery_id"]) for r in catalog.all("SELECT DISTINCT delivery_id FROM recent_delivery_items")]
    moves = DeliveryMoves(catalog, most=2)
    moved = moves.move()
    left = {int(r["delivery_id"]) for r in catalog.all("SELECT DISTINCT delivery_id FROM recent_delivery_items")}
    assert moved > 0 and left == set(sorted(first)[2:])
    assert moves.move_all() > 0 and _count(catalog, "recent_delivery_items") == 0


def test_a_process_moves_in_the_background_after_every_few_recalls(fake_service):
    svc = fake_service
    _seed(svc)
    catalog = svc._parts.catalog
    svc._parts.deliveries.moves.every = 3
    reader = svc.caller("reader", space="acme", run="r1")
    for _ in range(3):
        svc.recall(reader, "gateway host", limit=3)
    deadline = time.monotonic() + 10
    while _count(catalog, "recent_delivery_items") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _count(catalog, "recent_delivery_items") == 0 and _count(catalog, "delivery_items") > 0


class _Refusing:
    """A catalog whose every transaction fails as the real one's does on that fault."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    @contextmanager
    def transaction(self, durable: bool = True):
        raise self.error
        yield


@pytest.mark.parametrize(
    "error, said",
    [
        (
            CatalogUnavailable("the PostgreSQL catalog cannot be reached now: terminating connection"),
            "cannot be reached",
        ),
        (sqlite3.OperationalError("database or disk is full"), "disk under the catalog is full"),
        (Unavailable("the partitions' sync is not answering"), "not answering"),
    ],
    ids=["catalog-restarted", "sqlite-disk-full", "unavailable"],
)
def test_a_move_that_meets_a_fault_says_so_on_one_line_and_tries_again_later(caplog, error, said):
    moves = DeliveryMoves(_Refusing(error), every=1)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="esfis.deliveries"):
        moves.noted()
        deadline = time.monotonic() + 10
        while moves._moving and time.monotonic() < deadline:
            time.sleep(0.01)
    (record,) = caplog.records
    assert said in record.getMessage()
    assert record.exc_info is None  # an expected refusal, not a traceback in the server's log
    assert not moves._moving  # the next recall starts a move again


def test_recalls_and_moves_at_once_lose_and_double_nothing(fake_service):
    svc = fake_service
    _seed(svc)
    catalog = svc._parts.catalog
    log = svc._parts.deliveries
    log.moves.every = 5  # background moves started by the recalls themselves, beside the loop's
    stop = threading.Event()
    errors: list[BaseException] = []

    def recalls(n: int) -> None:
        try:
            caller = svc.caller(f"reader{n}", space="acme", run=f"run{n}")
            for i in range(40):
                svc.recall(caller, f"host {i % 7} gateway", limit=4)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def mover() -> None:
        while not stop.is_set():
            DeliveryMoves(catalog, most=3).move()

    threads = [threading.Thread(target=recalls, args=(n,)) for n in range(3)]
    moving = threading.Thread(target=mover)
    moving.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    moving.join()
    log.moves.move_all()
    assert not errors
    deliveries = log.list(last=1000)
    assert len(deliveries) == 120
    expected = sum(len(d.items) for d in deliveries)
    assert _count(catalog, "delivery_items") == expected and _count(catalog, "recent_delivery_items") == 0
    doubled = catalog.all("SELECT delivery_id, rank FROM delivery_items GROUP BY delivery_id, rank HAVING count(*) > 1")
    assert not doubled


def test_a_catalog_of_schema_14_gains_the_recent_items_and_keeps_its_log(home, clock):
    settings = settings_for(home)
    svc = open_service(settings, embedder=HashingEmbedder(), clock=clock)
    try:
        _seed(svc)
        svc.recall(svc.caller("reader", space="acme"), "gateway host", limit=3)
        svc._parts.deliveries.moves.move_all()
        before = _items(svc._parts.catalog)
    finally:
        svc.close()
    catalog = open_catalog(settings)
    try:  # as release 14 left it: no recent table, no view
        with catalog.transaction() as tx:
            tx.execute("DROP VIEW all_delivery_items")
            tx.execute("DROP TABLE recent_delivery_items")
            tx.execute("UPDATE meta SET value = '14' WHERE key = 'schema'")
    finally:
        catalog.close()
    svc = open_service(settings, embedder=HashingEmbedder(), clock=clock)
    try:
        catalog = svc._parts.catalog
        assert catalog.one("SELECT value FROM meta WHERE key = 'schema'")["value"] == str(SCHEMA_VERSION)
        assert _items(catalog) == before
        svc.recall(svc.caller("reader", space="acme"), "gateway host", limit=3)
        assert _count(catalog, "recent_delivery_items") > 0
    finally:
        svc.close()
