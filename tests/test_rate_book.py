"""The rate counters in the catalog (``server.spaces.rates``), on the backend under test: hits
from two connections at once (two workers, two servers) are each counted once, so no two of
them see the same count and room for the last call goes to one; a window past its end starts
again; and a hit is no write of the access tables, so the request's access reads keep the
generation they read."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from server.catalog import open_catalog
from server.catalog.access import AccessCache, one_request
from server.spaces.rates import RateBook
from tests.catalogs import settings_for
from tests.conftest import MovableClock

HITS = 60  # per connection


@pytest.fixture
def catalogs(home):
    first = open_catalog(settings_for(home))
    second = first.reopen()
    yield first, second
    second.close()
    first.close()


def test_hits_from_two_connections_at_once_each_get_a_count_of_their_own(catalogs):
    seen: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def hit(book: RateBook) -> None:
        start.wait()
        for _ in range(HITS):
            count = book.incr("token:shared", 60)
            with lock:
                seen.append(count)

    threads = [threading.Thread(target=hit, args=(RateBook(c),)) for c in catalogs for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == list(range(1, 4 * HITS + 1))
    assert RateBook(catalogs[0]).get("token:shared") == 4 * HITS


def test_several_counters_in_one_statement_count_as_one_by_one_would(catalogs):
    clock = MovableClock()
    book = RateBook(catalogs[0], clock=clock)
    assert book.incr("address:9", 60) == 1  # counted alone before: the shared count goes on
    assert book.incr_many([("address:9", 60), ("token:9", 30)]) == [2, 1]
    assert book.incr_many([("token:9", 30), ("address:9", 60)]) == [2, 3]  # each count to its key
    clock.advance(seconds=31)  # the token's window is over, the address's is not
    assert book.incr_many([("address:9", 60), ("token:9", 30)]) == [4, 1]
    assert (book.get("address:9"), book.get("token:9")) == (4, 1)
    second = RateBook(catalogs[1], clock=clock)  # another worker counts with them
    assert second.incr_many([("address:9", 60)]) == [5]


def test_a_window_past_its_end_starts_again(catalogs):
    clock = MovableClock()
    book = RateBook(catalogs[0], clock=clock)
    assert [book.incr("address:1", 60) for _ in range(3)] == [1, 2, 3]
    clock.advance(seconds=61)
    assert book.get("address:1") == 0
    assert book.incr("address:1", 60, amount=2) == 2
    assert book.expiry("address:1") == pytest.approx((clock() + timedelta(seconds=60)).timestamp())


def test_a_hit_leaves_the_requests_access_generation_alone(catalogs):
    catalog = catalogs[0]
    cache = AccessCache(catalog)
    with one_request():
        cache.generation()
        read = cache.reads
        RateBook(catalog).incr("token:t", 60)
        cache.generation()
        assert cache.reads == read  # a write transaction would have made it look again
