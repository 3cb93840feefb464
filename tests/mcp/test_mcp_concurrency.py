"""Several agents share one ESFIS_HOME: two MCP processes write into the same space at the same
time while the CLI writes policies and a memory of its own, and nothing is lost, nothing is
corrupted, and nobody sees a locked database."""

from __future__ import annotations

import asyncio

import pytest

from server.spaces import partition_key
from tests.catalogs import catalog_rows
from tests.helpers import stored_ids

pytestmark = pytest.mark.anyio

WRITES = 20


async def cli_policy_churn(world, worker: int, rounds: int = 4) -> list[str]:
    """Catalog writes from short CLI processes, as a person at a terminal would make them."""
    failures = []
    for n in range(rounds):
        for argv in (["--allow", f"churn-{worker}-{n}", "acme"], ["policy", "clear", f"churn-{worker}-{n}", "acme"]):
            code, err = await world.cli_async(*argv)
            if code != 0:
                failures.append(f"esfis {' '.join(argv)}: {err}")
    return failures


async def test_two_mcp_servers_writing_at_once_lose_nothing(world, fleet):
    a, b = fleet["acme"], fleet["reviewer"]  # two processes, both standing in acme
    await asyncio.gather(a.recall("warm up"), b.recall("warm up"))  # both models loaded

    texts = {
        (s.name, i): f"Concurrency check {s.name} {i}: build {i * 7} of service {s.name} is green"
        for s in (a, b)
        for i in range(WRITES)
    }
    by_cli = "Concurrency check cli: build 0 of service cli is green"
    writes = [fleet[name].call("remember", text=text) for (name, _), text in texts.items()]
    results, churn, cli_write = await asyncio.gather(
        asyncio.gather(*writes),
        asyncio.gather(cli_policy_churn(world, 1), cli_policy_churn(world, 2)),
        world.cli_async("remember", by_cli, "--space", "acme", stdout=True),
    )

    errors = [c.text for r in results if r.is_error for c in r.content]
    assert not errors, errors
    assert not [f for failures in churn for f in failures]
    assert cli_write[0] == 0, cli_write
    ids = {r.structured_content["id"] for r in results} | {cli_write[1].strip()}
    texts[("cli", 0)] = by_cli
    assert len(ids) == 2 * WRITES + 1

    # Every write is there, seen from either process ...
    for server in (a, b):
        found = {m["id"]: m["text"] for m in await server.recall("Concurrency check build is green", limit=100)}
        assert ids <= set(found), f"{server.name} misses {len(ids - set(found))} of {len(ids)}"
        assert {found[i] for i in ids} == set(texts.values())

    # ... and the catalog and the table agree, row for row.
    key = partition_key("acme")
    [(live,)] = catalog_rows(
        world.home, "SELECT count(*) FROM memories WHERE partition = ? AND forgotten_at IS NULL", (key,)
    )
    [(counted,)] = catalog_rows(world.home, "SELECT live FROM partitions WHERE key = ?", (key,))
    stored = {r[0] for r in catalog_rows(world.home, "SELECT id FROM memories WHERE partition = ?", (key,))}
    rows = stored_ids(world.home / "vectors", key)
    assert ids <= stored
    assert live == counted == len(rows) == len(set(rows))
    assert "churn" not in world.cli("policy", "list").stdout
