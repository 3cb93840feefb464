"""Who calls: ESFIS_AI, else the client's name from the handshake made into an AI name; policies
apply to that name, and every recall leaves a delivery marked mcp with the session's run id."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

pytestmark = pytest.mark.anyio


@contextmanager
def rule(world, effect: str, ai: str, space: str):
    world.cli(f"--{effect}", ai, space)
    try:
        yield
    finally:
        world.cli("policy", "clear", ai, space)


def writer_of(world, memory_id: str, space: str) -> str:
    return world.cli_json("get", memory_id, "--space", space)["ai"]


async def test_ai_name_comes_from_the_client_handshake(world, fleet):
    saved = await fleet["acme"].ok("remember", text="Acme's staging database is reset every Monday")
    assert writer_of(world, saved["id"], "acme") == "claude-code"  # client "Claude Code"
    saved = await fleet["globex"].ok("remember", text="Globex ships on Thursdays")
    assert writer_of(world, saved["id"], "globex") == "cursor"  # client "Cursor"


async def test_esfis_ai_overrides_the_client_name(world, fleet):
    saved = await fleet["reviewer"].ok("remember", text="Acme reviews need two approvals")
    assert writer_of(world, saved["id"], "acme") == "reviewer-bot"  # client "Cursor", ESFIS_AI=reviewer-bot


async def test_deny_policy_on_the_handshake_name_stops_that_ai(world, fleet, seeded):
    acme = fleet["acme"]
    kept = await acme.ok("remember", text="Acme's VPN is WireGuard")
    with rule(world, "deny", "claude-code", "acme"):
        message = await acme.error("remember", text="Acme uses feature flags from LaunchDarkly")
        assert "claude-code may not use space 'acme'" in message and "policy_denied" in message
        texts = await acme.recall_texts("how does login work?", limit=100)
        assert not [t for t in texts if "Auth0" in t]
        assert "no memory" in await acme.error("forget", id=kept["id"])
        # the same space, another AI: untouched by the rule
        assert "Acme authentication uses Auth0" in await fleet["reviewer"].recall_texts("how does login work?")
    assert "Acme authentication uses Auth0" in await acme.recall_texts("how does login work?")
    assert "Acme's VPN is WireGuard" in await acme.recall_texts("which VPN does Acme use?")


async def test_deny_policy_on_esfis_ai_stops_that_ai(world, fleet, seeded):
    with rule(world, "deny", "reviewer-bot", "acme"):
        message = await fleet["reviewer"].error("remember", text="Acme freezes deploys in December")
        assert "reviewer-bot may not use space 'acme'" in message
        assert "Acme authentication uses Auth0" in await fleet["acme"].recall_texts("how does login work?")


async def test_deliveries_record_transport_mcp_and_one_run_id_per_session(world, fleet, seeded):
    queries = {name: f"who handles sign-in? (delivery check from {name})" for name in ("acme", "globex")}
    for name, query in queries.items():
        for _ in range(2):
            await fleet[name].recall(query)
    deliveries = world.cli_json("deliveries", "--last", "1000")["deliveries"]
    runs = {}
    for name, query in queries.items():
        mine = [d for d in deliveries if d["query"] == query]
        assert len(mine) == 2
        assert {d["transport"] for d in mine} == {"mcp"}
        assert {d["ai"] for d in mine} == {"claude-code" if name == "acme" else "cursor"}
        assert {d["space"] for d in mine} == {name}
        run_ids = {d["run_id"] for d in mine}
        assert len(run_ids) == 1 and None not in run_ids
        runs[name] = run_ids.pop()
    assert runs["acme"] != runs["globex"]


async def test_agents_never_see_a_delivery_id(fleet, seeded):
    result = await fleet["acme"].call("recall", query="how does login work?")
    assert "delivery" not in str(result.structured_content) and "delivery" not in str(result.content)
