"""replace and forget over MCP: a replacement inherits the old memory's space, and an id the
agent cannot see answers exactly like an id that never existed."""

from __future__ import annotations

import base64
import secrets

import pytest

pytestmark = pytest.mark.anyio


def random_id() -> str:
    return "mem_" + base64.b32encode(secrets.token_bytes(16)).decode().rstrip("=").lower()


async def test_replace_without_a_space_inherits_the_old_space(fleet):
    platform = fleet["platform"]
    old = await platform.ok("remember", text="The platform team's on-call rotation is weekly")
    new = await platform.ok("replace", id=old["id"], text="The platform team's on-call rotation is fortnightly")
    assert (new["space"], new["replaced"]) == ("acme/platform", old["id"]) and new["id"] != old["id"]
    texts = await platform.recall_texts("how long is the platform on-call rotation?", limit=100)
    assert "The platform team's on-call rotation is fortnightly" in texts
    assert "The platform team's on-call rotation is weekly" not in texts


async def test_replacing_a_superseded_memory_is_a_conflict(fleet):
    acme = fleet["acme"]
    old = await acme.ok("remember", text="Acme's CI runs on Jenkins")
    await acme.ok("replace", id=old["id"], text="Acme's CI runs on GitHub Actions")
    message = await acme.error("replace", id=old["id"], text="Acme's CI runs on Buildkite")
    assert "already superseded" in message and "(superseded)" in message


async def test_forget_of_a_foreign_id_reads_exactly_like_a_missing_id(fleet, seeded):
    foreign = seeded["clerk"]  # a Globex memory: real, but out of Acme's sight
    missing = random_id()
    for tool, extra in (("forget", {}), ("replace", {"text": "Acme uses Okta"})):
        seen_foreign = await fleet["acme"].error(tool, id=foreign, **extra)
        seen_missing = await fleet["acme"].error(tool, id=missing, **extra)
        assert seen_foreign.replace(foreign, "ID") == seen_missing.replace(missing, "ID")
        assert "not_found" in seen_foreign
    # and the Globex memory is still there for Globex
    assert "Globex authentication uses Clerk" in await fleet["globex"].recall_texts("how does login work?")


async def test_forget_removes_the_memory_and_a_second_forget_reads_as_missing(fleet):
    globex = fleet["globex"]
    saved = await globex.ok("remember", text="Globex's office wifi password rotates monthly")
    assert await globex.ok("forget", id=saved["id"]) == {
        "id": saved["id"],
        "forgotten": True,
        "approval": None,
        "message": None,
    }
    assert "Globex's office wifi password rotates monthly" not in await globex.recall_texts("wifi password", limit=100)
    again = await globex.error("forget", id=saved["id"])
    never = random_id()
    assert again.replace(saved["id"], "ID") == (await globex.error("forget", id=never)).replace(never, "ID")


async def test_a_malformed_id_is_a_clear_tool_error(fleet):
    message = await fleet["acme"].error("forget", id="42")
    assert "malformed memory id" in message and "invalid_id" in message
