"""Metadata on memories over MCP (issue 61): remember and replace take ``data``, every answer
carries it, recall takes ``filter`` (and, with one, an empty query), a malformed filter is a tool
error naming what is wrong, and the tools tell the model what both are for."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


async def test_remember_with_data_and_recall_by_filter_over_mcp(fleet):
    acme = fleet["acme"]
    first = await acme.ok("remember", text="Acme's on-call rota changes on mondays", data={"topic": "oncall-61"})
    assert first["data"] == {"topic": "oncall-61"}
    found = await acme.ok("recall", query="", filter={"topic": "oncall-61"})
    assert [m["id"] for m in found["memories"]] == [first["id"]] and found["memories"][0]["data"] == first["data"]
    newer = await acme.ok("replace", id=first["id"], text="Acme's on-call rota changes on tuesdays", data={"v": 2})
    assert newer["data"] == {"v": 2}
    assert (await acme.ok("recall", filter={"topic": "oncall-61"}))["memories"] == []  # the old one is superseded
    assert "unknown operator '$near'" in await acme.error("recall", query="rota", filter={"v": {"$near": 2}})
    assert "may not start with $" in await acme.error("remember", text="x", data={"$set": 1})


async def test_the_tools_tell_the_model_what_data_and_filter_are_for(fleet):
    tools = {t.name: t for t in (await fleet["acme"].client.list_tools()).tools}
    assert "data" in tools["remember"].input_schema["properties"] and "`data`" in tools["remember"].description
    assert "filter" in tools["recall"].input_schema["properties"] and "`filter`" in tools["recall"].description
    assert "query" not in tools["recall"].input_schema.get("required", [])
    assert "data" in tools["replace"].input_schema["properties"]
