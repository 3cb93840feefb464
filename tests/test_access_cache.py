"""The access rows a service keeps between requests (``server.catalog.access``), on the backend
under test: every write to an access table moves the generation, whoever writes it, by hand
included, and nothing else does; a change made through another connection (another server) applies
at this one's next request, a deny, a revocation, a removed space alike; one request reads the
generation once, and renews it once it has grown old; an unknown secret is never kept.
The same promises over HTTP, across two real servers, are tests/http/test_several_servers.py's."""

from __future__ import annotations

import threading

import pytest

from indexing.embedding.testing import HashingEmbedder
from server.catalog import access as access_module
from server.catalog import open_catalog
from server.catalog.access import AccessCache, current_generation, one_request
from server.errors import PolicyDenied, Unauthorized
from server.facade import open_service
from server.spaces.registry import Registry
from server.spaces.tokens import TokenBook
from tests.catalogs import settings_for


@pytest.fixture
def catalog(home):
    opened = open_catalog(settings_for(home))
    yield opened
    opened.close()


@pytest.fixture
def other(catalog):
    """A second connection to the same catalog: another process, or another machine."""
    second = catalog.reopen()
    yield second
    second.close()


def elsewhere(write) -> None:
    """``write`` made outside this request (a thread starts with a context of its own)."""
    thread = threading.Thread(target=write)
    thread.start()
    thread.join()


def test_every_write_to_an_access_table_moves_the_generation(catalog, clock, tmp_path):
    registry, tokens = Registry(catalog, clock), TokenBook(catalog, clock)
    (tmp_path / "acme").mkdir()
    steps = [
        lambda: registry.add_named("acme"),
        lambda: registry.add_folder(tmp_path / "acme", "acme"),
        lambda: registry.set_rule("cursor", "acme", "deny"),
        lambda: registry.clear_rule("cursor", "acme"),
        lambda: tokens.create(ai="claude-code", space="acme"),
        lambda: tokens.revoke(tokens.list()[0].id),
        lambda: registry.add_many(["globex", "initech"]),
        lambda: registry.delete("globex"),
    ]
    seen = {current_generation(catalog)}
    for step in steps:
        step()
        generation = current_generation(catalog)
        assert generation not in seen, step
        seen.add(generation)


def test_hand_written_sql_moves_it_and_other_tables_do_not(catalog, other):
    before = current_generation(catalog)
    with other.transaction() as tx:
        tx.execute("INSERT INTO spaces (name, created_at) VALUES (?, ?)", ("acme", 1))
    moved = current_generation(catalog)
    assert moved != before
    with other.transaction() as tx:
        tx.execute("UPDATE spaces SET created_at = 2 WHERE name = ?", ("acme",))
    assert current_generation(catalog) != moved
    moved = current_generation(catalog)
    with other.transaction() as tx:  # what every request writes: none of it decides access
        tx.execute("INSERT INTO rate_counters (key, count, expires_at) VALUES (?, ?, ?)", ("address:x", 1, 9))
        tx.execute("INSERT INTO ended_sessions (nonce, expires) VALUES (?, ?)", ("n", 9))
    assert current_generation(catalog) == moved


def test_a_change_through_another_connection_applies_at_the_next_request(catalog, other, clock):
    access = AccessCache(catalog)
    registry, tokens = Registry(catalog, clock, access), TokenBook(catalog, clock, access)
    Registry(other, clock).add_named("acme")
    token, secret = TokenBook(other, clock).create(ai="claude-code")
    header = f"Bearer {secret}"
    with one_request():
        assert registry.exists("acme") and registry.policies().decide("cursor", "acme").allowed
        assert tokens.authenticate(header).id == token.id
    with one_request():  # kept: the same answers, no new read of the rows
        hits = access.hits
        assert registry.exists("acme") and tokens.authenticate(header).id == token.id
        assert access.hits == hits + 2
    TokenBook(other, clock).revoke(token.id)
    with one_request(), pytest.raises(Unauthorized):
        tokens.authenticate(header)
    Registry(other, clock).set_rule("cursor", "acme", "deny")
    with one_request():
        assert not registry.policies().decide("cursor", "acme").allowed
    Registry(other, clock).delete("acme")
    with one_request():
        assert not registry.exists("acme") and registry.subtree("acme") == []


def test_one_request_reads_the_generation_once(catalog, clock):
    access = AccessCache(catalog)
    registry = Registry(catalog, clock, access)
    registry.add_named("acme")
    with one_request():
        registry.exists("acme"), registry.policies(), registry.folders(), registry.subtree("acme")
    assert access.reads == 1
    with one_request():
        registry.exists("acme")
    assert access.reads == 2
    registry.exists("acme"), registry.policies()  # outside a request: each read looks
    assert access.reads == 4


def test_a_request_reads_its_own_writes(catalog, clock):
    access = AccessCache(catalog)
    registry = Registry(catalog, clock, access)
    with one_request():
        assert not registry.exists("acme")
        registry.add_named("acme")
        assert registry.exists("acme")


def test_a_long_request_looks_again_once_its_look_is_old(catalog, other, clock, monkeypatch):
    access = AccessCache(catalog)
    registry = Registry(catalog, clock, access)
    now = [1000.0]
    monkeypatch.setattr(access_module.time, "monotonic", lambda: now[0])
    with one_request():
        assert not registry.exists("acme")
        elsewhere(lambda: Registry(other, clock).add_named("acme"))
        assert not registry.exists("acme")  # within the look: this request's reading stands
        now[0] += access_module.LOOK_S + 0.01
        assert registry.exists("acme")


def test_unknown_secrets_are_never_kept(catalog, clock):
    access = AccessCache(catalog)
    tokens = TokenBook(catalog, clock, access)
    for i in range(50):
        with pytest.raises(Unauthorized), one_request():
            tokens.authenticate("Bearer esfis_" + f"{i:043d}")
    assert access._entries == {}


def test_a_service_obeys_a_deny_made_by_another_at_its_next_request(home, folders):
    first = open_service(settings_for(home), embedder=HashingEmbedder())
    second = open_service(settings_for(home), embedder=HashingEmbedder())
    try:
        first.operator.create_space("acme")
        cursor = first.caller("cursor", space="acme")
        with one_request():
            first.remember(cursor, "acme deploys on fridays")
        with one_request():
            assert [m.text for m in first.recall(cursor, "deploys").memories] == ["acme deploys on fridays"]
        second.operator.deny("cursor", "acme")
        with one_request():  # a denied space is not searched: nothing comes back
            assert first.recall(cursor, "deploys").memories == []
        with one_request(), pytest.raises(PolicyDenied):
            first.remember(cursor, "acme deploys on mondays")
    finally:
        first.close()
        second.close()
