"""The space comes from where the server was started, never from the agent: Acme's server
answers with Auth0 and never Clerk, Globex's the other way round, a nested folder stands in
its longest registered space, ESFIS_SPACE names one outright, and a folder outside every space
works with personal memories only."""

from __future__ import annotations

import hashlib

import pytest

pytestmark = pytest.mark.anyio

QUESTION = "how does login work?"


async def test_acme_server_recalls_auth0_and_never_clerk(fleet, seeded):
    texts = await fleet["acme"].recall_texts(QUESTION, limit=100)
    assert texts[0] == "Acme authentication uses Auth0"
    assert not [t for t in texts if "Clerk" in t]


async def test_globex_server_recalls_clerk_and_never_auth0(fleet, seeded):
    texts = await fleet["globex"].recall_texts(QUESTION, limit=100)
    assert texts[0] == "Globex authentication uses Clerk"
    assert not [t for t in texts if "Auth0" in t]


async def test_recall_answers_the_one_recall_shape_and_nothing_else(fleet, seeded):
    answer = await fleet["acme"].ok("recall", query=QUESTION)
    assert set(answer) == {"memories"}
    top = answer["memories"][0]
    # The same shape as POST /v1/recall and esfis recall --json (server.shapes.RecalledOut).
    assert set(top) == {"id", "text", "space", "score", "created_at", "valid_until", "labels", "data"}
    assert (top["id"], top["space"]) == (seeded["auth0"], "acme")
    assert 0 < top["score"] <= 1
    labels = top["labels"]
    assert set(labels) == {"space", "origin", "digest", "run", "from"}
    assert (labels["space"], labels["origin"]) == ("acme", [])
    # The acme session may have read acme/platform before it wrote this: that is all it may carry.
    assert all(f.startswith("acme/") for f in labels["from"])
    assert labels["digest"] == "sha256:" + hashlib.sha256(top["text"].encode()).hexdigest()


async def test_recall_takes_no_space_argument(fleet):
    tools = {t.name: t for t in (await fleet["acme"].client.list_tools()).tools}
    assert sorted(tools) == ["check_approval", "forget", "open_context", "recall", "remember", "replace", "share"]
    assert set(tools["recall"].input_schema["properties"]) == {"query", "limit", "as_of", "filter"}
    assert set(tools["remember"].input_schema["properties"]) == {"text", "personal", "labels", "dedupe", "data"}
    assert "acme" in tools["recall"].description and "globex" not in tools["recall"].description


async def test_an_unknown_argument_cannot_move_recall_to_another_space(fleet, seeded):
    result = await fleet["acme"].call("recall", query=QUESTION, space="globex")
    texts = [m["text"] for m in (result.structured_content or {}).get("memories", [])]
    assert not [t for t in texts if "Clerk" in t]


async def test_server_in_a_nested_folder_stands_in_the_longest_registered_space(fleet, seeded):
    platform = fleet["platform"]
    assert "'acme/platform'" in (platform.client.instructions or "")
    saved = await platform.ok("remember", text="The platform API deploys with Argo CD")
    assert saved["space"] == "acme/platform"
    # acme/platform reaches neither its parent acme nor a sibling ...
    texts = await platform.recall_texts("how do we deploy and log in?", limit=100)
    assert "The platform API deploys with Argo CD" in texts
    assert not [t for t in texts if "Auth0" in t or "Clerk" in t]
    # ... while acme reaches the space below it.
    assert "The platform API deploys with Argo CD" in await fleet["acme"].recall_texts("how do we deploy?", limit=100)


async def test_esfis_space_sets_the_space_whatever_the_folder(fleet, seeded):
    reviewer = fleet["reviewer"]  # started outside every space, with ESFIS_SPACE=acme
    assert "'acme'" in (reviewer.client.instructions or "") and "ESFIS_SPACE" in reviewer.client.instructions
    texts = await reviewer.recall_texts(QUESTION, limit=100)
    assert texts[0] == "Acme authentication uses Auth0"
    assert not [t for t in texts if "Clerk" in t]


async def test_server_outside_every_space_sees_personal_memories_only(fleet, seeded):
    outside = fleet["outside"]
    assert "belongs to no esfis space" in (outside.client.instructions or "")
    saved = await outside.ok("remember", text="The user prefers answers in British English", personal=True)
    assert saved["space"] is None
    memories = await outside.recall("what spelling does the user like? how does login work?", limit=100)
    assert memories and all(m["space"] is None for m in memories)
    assert "The user prefers answers in British English" in [m["text"] for m in memories]
    # a personal memory reaches every space
    assert "The user prefers answers in British English" in await fleet["globex"].recall_texts(
        "what spelling does the user like?", limit=100
    )


async def test_remember_outside_every_space_without_personal_is_a_clear_tool_error(fleet):
    message = await fleet["outside"].error("remember", text="Acme uses Postgres 16")
    assert "stands in no space" in message and "personal" in message
