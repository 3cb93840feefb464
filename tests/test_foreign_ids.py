"""An id outside the caller's reach is refused on its catalog row: get, forget and replace of
another space's id (or of a denied one) open no partition, and answer exactly like a random id.

The store counts every partition it opens and loads (``IndexStats``): a fresh service, as a
new ``esfis`` process has, must show neither for the foreign partition, nor for any other.
"""

from __future__ import annotations

import pytest

from indexing.embedding.testing import HashingEmbedder
from server.errors import MemoryNotFound
from server.facade import open_service
from server.memories.input import new_id
from server.spaces import partition_key
from tests.catalogs import settings_for

VERBS = {
    "get": lambda svc, caller, id_: svc.get(caller, id_),
    "forget": lambda svc, caller, id_: svc.forget(caller, id_),
    "replace": lambda svc, caller, id_: svc.replace(caller, id_, "acme uses okta"),
}


@pytest.fixture
def globex_id(fake_service, home):
    fake_service.operator.create_space("acme")
    fake_service.operator.create_space("globex")
    globex = fake_service.caller("cli", space="globex")
    for i in range(20):
        fake_service.remember(globex, f"globex standing fact {i}")
    memory = fake_service.remember(globex, "Globex authentication uses Clerk")
    fake_service.operator.deny("cursor", "globex")
    fake_service.close()
    return memory.id


def _refusal(verb: str, svc, caller, id_: str) -> tuple[type, str, str]:
    with pytest.raises(MemoryNotFound) as raised:
        VERBS[verb](svc, caller, id_)
    return type(raised.value), raised.value.code, str(raised.value).replace(id_, "<ID>")


@pytest.mark.parametrize("verb", sorted(VERBS))
@pytest.mark.parametrize("ai, space", [("cli", "acme"), ("cursor", "globex")], ids=["other-space", "denied-space"])
def test_foreign_id_opens_no_partition_and_answers_like_a_random_id(home, globex_id, verb, ai, space):
    svc = open_service(settings_for(home), embedder=HashingEmbedder())
    try:
        caller = svc.caller(ai, space=space)
        svc._parts.store.stats.reset()
        foreign = _refusal(verb, svc, caller, globex_id)
        touched = (dict(svc._parts.store.stats.opened), dict(svc._parts.store.stats.loaded))
        missing = _refusal(verb, svc, caller, new_id())
        assert foreign == missing
        assert touched == ({}, {}), f"{verb} of a foreign id opened {touched}"
        assert partition_key("globex") not in svc._parts.store.stats.opened
    finally:
        svc.close()
    # And the memory is untouched where it lives.
    owner = open_service(settings_for(home), embedder=HashingEmbedder())
    try:
        memory = owner.get(owner.caller("cli", space="globex"), globex_id)
        assert memory.text == "Globex authentication uses Clerk" and memory.superseded_by is None
    finally:
        owner.close()
