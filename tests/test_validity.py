"""Validity: superseded and expired memories never come back; replace inherits the space; a
second replace of the same memory is a conflict. Real model; the clock is moved by the test."""

from __future__ import annotations

import pytest

from server.errors import AlreadySuperseded


@pytest.fixture
def acme(service, folders):
    service.operator.add_space(folders["acme"])
    service.operator.add_space(folders["acme/platform"])
    return service.caller("claude-code", cwd=folders["acme"])


def texts(service, caller, query, limit=10):
    return [m.text for m in service.recall(caller, query, limit=limit).memories]


def test_superseded_memory_never_comes_back(service, acme, partition_form):
    old = service.remember(acme, "the database is MySQL 5.7")
    service.replace(acme, old.id, "the database is PostgreSQL 16")
    got = texts(service, acme, "which database do we use?", limit=100)
    assert got == ["the database is PostgreSQL 16"]


def test_expired_memory_never_comes_back(service, acme, clock, partition_form):
    service.remember(acme, "the office wifi password is tulip", valid_until="2h")
    service.remember(acme, "the guest wifi is open")
    assert "the office wifi password is tulip" in texts(service, acme, "wifi password")
    clock.advance(hours=2)  # half-open interval: at valid_until it is over
    assert texts(service, acme, "wifi password") == ["the guest wifi is open"]


def test_replace_without_space_inherits_the_old_space(service, acme, folders):
    platform = service.caller("claude-code", cwd=folders["acme/platform"])
    old = service.remember(platform, "platform CI runs on Jenkins")
    new = service.replace(acme, old.id, "platform CI runs on GitHub Actions")
    assert new.space == "acme/platform"
    assert service.get(acme, old.id).superseded_by == new.id


def test_replace_of_personal_stays_personal(service, acme):
    old = service.remember(acme, "I like tabs", personal=True)
    assert service.replace(acme, old.id, "I like spaces").space is None


def test_second_replace_is_a_conflict_naming_the_successor(service, acme):
    old = service.remember(acme, "deploys happen on friday")
    new = service.replace(acme, old.id, "deploys happen on thursday")
    with pytest.raises(AlreadySuperseded) as conflict:
        service.replace(acme, old.id, "deploys happen on monday")
    assert new.id in conflict.value.message
    assert texts(service, acme, "when do deploys happen?") == ["deploys happen on thursday"]


def test_superseded_memories_do_not_starve_the_limit(service, acme):
    """Validity is applied before ranking: a superseded row never takes a place in the top k."""
    current = service.remember(acme, "our cloud is AWS")
    for i in range(5):
        stale = service.remember(acme, f"our cloud provider was candidate number {i}")
        service.replace(acme, stale.id, f"cloud provider candidate {i} was rejected")
    got = texts(service, acme, "which cloud provider do we use?", limit=3)
    assert len(got) == 3 and all("was candidate number" not in t for t in got)
    assert current.text in texts(service, acme, "which cloud provider do we use?", limit=10)


def test_replacing_a_memory_whose_successor_was_forgotten_says_what_to_do(service, acme):
    """A → B, then B forgotten: A stays history (its validity ended at the replace), and a
    second replace of A says so, naming no successor and pointing to a new remember."""
    old = service.remember(acme, "the deploy window is tuesday")
    new = service.replace(acme, old.id, "the deploy window is thursday")
    service.forget(acme, new.id)
    with pytest.raises(AlreadySuperseded, match="cannot see .*remember the new text instead") as refused:
        service.replace(acme, old.id, "the deploy window is friday")
    assert new.id not in refused.value.message
