"""One fact once and recall as of a time over MCP (issue 62): remember answers ``duplicate_of``
and ``similar`` and takes ``dedupe``; recall takes ``as_of``; the tools' descriptions say what to
do with ``similar``."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


async def test_remember_over_mcp_answers_duplicate_of_and_similar(fleet):
    acme = fleet["acme"]
    first = await acme.ok("remember", text="Acme's status page is hosted on Statuspage")
    assert first["duplicate_of"] is None and first["similar"] == []
    again = await acme.ok("remember", text="acme's status page is hosted on statuspage.")
    assert again["id"] == first["id"] == again["duplicate_of"]
    update = await acme.ok("remember", text="Acme's status page is hosted on Instatus")
    assert update["duplicate_of"] is None and update["similar"][0]["id"] == first["id"]
    copy = await acme.ok("remember", text="Acme's status page is hosted on Statuspage", dedupe=False)
    assert copy["id"] != first["id"]
    # recall folds the two copies: the later one answers, once
    recalled = [m["id"] for m in await acme.recall("where is acme's status page hosted?")]
    assert copy["id"] in recalled and first["id"] not in recalled


async def test_recall_as_of_over_mcp_and_its_refusal(fleet):
    acme = fleet["acme"]
    old = await acme.ok("remember", text="Acme's staging database is called orchid")
    await acme.ok("replace", id=old["id"], text="Acme's staging database is called lotus")
    then = await acme.ok("recall", query="acme staging database name", as_of=old["created_at"])
    assert "Acme's staging database is called orchid" in [m["text"] for m in then["memories"]]
    assert "as_of" in await acme.error("recall", query="x", as_of="2999-01-01T00:00:00Z")


async def test_the_tools_tell_the_model_what_to_do_with_similar_and_as_of(fleet):
    tools = {t.name: t for t in (await fleet["acme"].client.list_tools()).tools}
    assert "similar" in tools["remember"].description and "replace" in tools["remember"].description
    assert "dedupe" in tools["remember"].input_schema["properties"]
    assert "as_of" in tools["recall"].input_schema["properties"] and "as_of" in tools["recall"].description
