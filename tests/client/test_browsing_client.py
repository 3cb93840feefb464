"""The Python client's listings, blocking and async, against a real ``esfis serve``: every space
and every memory an agent token reads, followed page by page (``spaces``, ``memories``) or one
page at a time (``list_spaces``, ``list_memories``); never a Globex space or memory from Acme;
what a page lists in the delivery log and carried by the run (the data barrier)."""

from __future__ import annotations

import asyncio

import pytest
from esfis_client import AsyncEsfis, DataBarrier, InvalidInput, MemoryPage, OutOfReach, SpacePage

from tests.client.client_support import ACME_AUTH, GLOBEX_AUTH, agent

TEAMS = [f"acme/team-{i:03d}" for i in range(30)]


@pytest.fixture(scope="module")
def seeded(server, operator):
    with server.client(server.tokens["operator"]) as op:
        for name in ["acme/finance", *TEAMS]:
            assert op.post("/v1/spaces", json={"name": name}).status_code == 201
    with agent(server, ai="seeder", space="globex") as globex:
        globex.remember(GLOBEX_AUTH, data={"kind": "decision"})
    with agent(server, ai="seeder", space="acme") as acme:
        ids = [acme.remember(f"acme fact {i}", data={"n": i}, space="acme").id for i in range(5)]
        ids.append(acme.remember(ACME_AUTH, data={"kind": "decision"}, space="acme/platform").id)
    return ids[::-1]


def test_every_space_and_memory_an_agent_reads_page_by_page(server, seeded):
    with agent(server, space="acme") as acme:
        first = acme.list_spaces(limit=10)
        assert isinstance(first, SpacePage) and len(first.spaces) == 10 and first.next_cursor == first.spaces[-1]
        assert list(acme.spaces(page=7)) == ["acme", "acme/finance", "acme/platform", *TEAMS]
        page = acme.list_memories(limit=4)
        assert isinstance(page, MemoryPage) and len(page.memories) == 4 and page.next_cursor is not None
        assert [m.id for m in acme.memories(page=4)] == seeded
        assert [m.data["n"] for m in acme.memories(filter={"n": {"$lt": 2}}, page=1)] == [1, 0]
        assert [m.text for m in acme.memories(within="acme/platform")] == [ACME_AUTH]


def test_the_async_client_lists_the_same(server, seeded):
    async def listed() -> tuple[list[str], list[str]]:
        async with AsyncEsfis(server.url, server.agent_token(space="acme")) as acme:
            names = [name async for name in acme.spaces(page=9)]
            ids = [m.id async for m in acme.memories(page=2)]
            assert (await acme.list_spaces(within="acme/platform")).spaces == ["acme/platform"]
            return names, ids

    names, ids = asyncio.run(listed())
    assert names == ["acme", "acme/finance", "acme/platform", *TEAMS] and ids == seeded


def test_acme_never_lists_a_globex_space_or_memory(server, seeded):
    with agent(server, space="acme") as acme:
        assert not any(name.startswith("globex") for name in acme.spaces())
        assert not any(m.space == "globex" or m.text == GLOBEX_AUTH for m in acme.memories(filter={"kind": "decision"}))
        for within in ("globex", "globex-corp"):
            with pytest.raises(OutOfReach):
                acme.list_memories(within=within)
            with pytest.raises(OutOfReach):
                acme.list_spaces(within=within)
        with pytest.raises(InvalidInput, match="cursor"):
            acme.list_memories(cursor="not a cursor")


def test_what_a_page_lists_is_in_the_delivery_log_and_carried_by_the_run(server, operator, seeded):
    with agent(server, space="acme") as acme:
        listed = acme.list_memories(within="acme/platform").memories
        assert [m.text for m in listed] == [ACME_AUTH]
        with server.client(server.tokens["operator"]) as op:
            delivery = op.get("/v1/deliveries", params={"ai": "claude-code", "last": 1}).json()["deliveries"][0]
        assert [i["memory_id"] for i in delivery["items"]] == [listed[0].id]
        with pytest.raises(DataBarrier, match="space:acme/platform"):
            acme.remember("acme signs in with Auth0", space="acme/finance")
