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
from server.spaces.rates import RateBook, RateCount, RateKey
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


def _rows(catalog) -> tuple[int, int]:
    """The rows in the table, and the row count the triggers keep."""
    return catalog.one("SELECT count(*) AS n FROM rate_counters")["n"], catalog.one("SELECT n FROM rate_rows")["n"]


def test_a_full_table_counts_a_newcomers_capped_key_in_its_overflow_key(catalogs):
    """Strangers add rows (an address each): once the table holds ``max_rows``, a capped key with
    no row is counted in its limit's overflow key, limited as one; a key with its row, and a
    key never capped (a token's), go on counting in their own; pruned, the room comes back."""
    clock = MovableClock()
    book = RateBook(catalogs[0], clock=clock, max_rows=3)

    def hit(key: str, overflow: str | None = "address:overflow", expiry_s: int = 60) -> RateCount:
        return book.hit_many([RateKey(key, expiry_s, overflow)])[0]

    assert [hit(f"address:{i}").key for i in range(3)] == ["address:0", "address:1", "address:2"]
    newcomers = [hit(f"address:{i}") for i in range(3, 8)]  # full: five strangers, one count
    assert [(h.key, h.count) for h in newcomers] == [("address:overflow", i) for i in range(1, 6)]
    assert newcomers[0].ends == pytest.approx((clock() + timedelta(seconds=60)).timestamp())
    assert hit("address:1").count == 2  # a key with its row keeps its own count
    token = book.hit_many([RateKey("token:tok_1", 60), RateKey("address:9", 60, "address:overflow")])
    assert [(h.key, h.count) for h in token] == [("token:tok_1", 1), ("address:overflow", 6)]  # a token is never capped
    assert _rows(catalogs[0]) == (5, 5)  # three addresses, the overflow key, the token: never one a stranger
    clock.advance(seconds=61)
    book.prune()
    assert _rows(catalogs[0]) == (0, 0)
    assert hit("address:5").key == "address:5"  # room again: a newcomer has its own count
    second = RateBook(catalogs[1], clock=clock, max_rows=1)  # another worker sees the same rows
    assert second.hit_many([RateKey("address:6", 60, "address:overflow")])[0].key == "address:overflow"
    assert _rows(catalogs[1]) == (2, 2)
