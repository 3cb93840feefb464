"""Fast checks of the MCP layer's own logic, in-process (``mcp.Client(server)``) on the hashing
embedder: AI names from client names, start-up problems reported by every tool, and the
handshake-free (2026) protocol carrying the client's name too."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.types import Implementation

from server.errors import StoreUnavailable
from server.mcp.server import Opening, build_server
from server.mcp.standing import ai_from_client, stand
from server.records import run_id_for
from tests.catalogs import settings_for

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("client_name", "ai"),
    [
        ("Claude Code", "claude-code"),
        ("Cursor", "cursor"),
        ("  GitHub   Copilot\tChat ", "github-copilot-chat"),
        ("Zed (preview) v0.1", "zed-preview-v0.1"),
        ("_-.hidden", "hidden"),
        ("Ünïcødé Agent", "ncd-agent"),
        ("x" * 100, "x" * 64),
        ("!!!", None),
        ("", None),
        (None, None),
    ],
    ids=[
        "two-words",
        "one-word",
        "whitespace",
        "punctuation",
        "leading-punct",
        "non-ascii",
        "long",
        "nothing-left",
        "empty",
        "absent",
    ],
)
def test_client_name_becomes_an_ai_name(client_name, ai):
    assert ai_from_client(client_name) == ai


def server_for(fake_service, home, cwd, **env: str):
    standing = stand(settings_for(home), env, str(cwd))
    return build_server(fake_service, standing), standing


@pytest.fixture
def acme(fake_service, folders):
    fake_service.operator.add_space(folders["acme"])
    return folders["acme"]


async def test_a_client_without_a_name_acts_as_unknown(fake_service, home, acme):
    server, _ = server_for(fake_service, home, acme)
    async with Client(server, mode="legacy", client_info=Implementation(name="", version="0")) as client:
        saved = (await client.call_tool("remember", {"text": "Acme uses Sentry"})).structured_content
    assert fake_service.get(fake_service.caller("cli", space="acme"), saved["id"]).ai == "unknown"


async def test_the_handshake_free_protocol_carries_the_client_name_too(fake_service, home, acme):
    server, standing = server_for(fake_service, home, acme)
    async with Client(server, client_info=Implementation(name="Claude Code", version="2")) as client:  # mode auto
        await client.call_tool("recall", {"query": "anything"})
    [delivery] = fake_service.operator.deliveries()
    assert (delivery.ai, delivery.transport, delivery.run_id) == (
        "claude-code",
        "mcp",
        run_id_for("mcp", standing.run_id),
    )


async def test_an_unknown_esfis_space_is_reported_by_every_tool(fake_service, home, acme):
    server, _ = server_for(fake_service, home, acme, ESFIS_SPACE="initech")
    async with Client(server, mode="legacy") as client:
        assert "no space named 'initech'" in (client.instructions or "")
        result = await client.call_tool("recall", {"query": "anything"})
    assert result.is_error and "no space named 'initech'" in result.content[0].text


async def test_a_malformed_esfis_ai_is_reported_by_every_tool(fake_service, home, acme):
    server, _ = server_for(fake_service, home, acme, ESFIS_AI="Claude Code")
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("remember", {"text": "Acme uses Sentry"})
    assert result.is_error and "invalid AI name 'Claude Code'" in result.content[0].text


async def test_a_store_that_cannot_open_is_reported_by_every_tool(home, acme):
    def broken():
        raise StoreUnavailable("this store was built with model 'other' (768-d)")

    opening = Opening(broken)
    standing = stand(settings_for(home), {}, str(acme))
    async with Client(build_server(opening.get, standing, warm=opening.start), mode="legacy") as client:
        result = await client.call_tool("recall", {"query": "anything"})
    assert result.is_error and "built with model 'other'" in result.content[0].text


async def test_a_limit_out_of_range_is_a_clear_tool_error(fake_service, home, acme):
    server, _ = server_for(fake_service, home, acme)
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("recall", {"query": "anything", "limit": 500})
    assert result.is_error and "limit must be an integer from 1 to 100, got 500" in result.content[0].text


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"source": "slack"}, "remember no longer takes 'source' (nothing was done): use labels: [\"source:NAME\"]"),
        ({"labels": ["source:slack"], "source": "email"}, "remember no longer takes 'source'"),
        ({"colour": "red"}, "remember takes no argument 'colour' (nothing was done): it takes text, personal, labels"),
    ],
    ids=["source", "source-beside-labels", "unknown"],
)
async def test_remember_refuses_an_argument_it_does_not_take_and_writes_nothing(
    fake_service, home, acme, arguments, said
):
    """The SDK drops an argument a tool does not declare. ``source`` (the old name of one origin
    mark) marked content from outside: dropped, the memory would be written unmarked, so
    ``remember`` refuses it, and any argument it does not declare, before anything is done."""
    server, _ = server_for(fake_service, home, acme)
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool(
            "remember", {"text": "the #releases channel says freeze on friday", **arguments}
        )
    assert result.is_error and said in result.content[0].text, result.content[0].text
    assert result.content[0].text.endswith("(invalid_input)")
    assert fake_service.recall(fake_service.caller("cli", space="acme"), "releases freeze friday").memories == []


@pytest.mark.parametrize(
    ("tool", "arguments", "said"),
    [
        ("recall", {"query": "freeze", "space": "globex"}, "recall takes no argument 'space' (nothing was done)"),
        ("forget", {"extra": 1}, "forget takes no argument 'extra' (nothing was done): it takes id"),
        ("replace", {"text": "new", "colour": "red"}, "replace takes no argument 'colour'"),
    ],
    ids=["recall-space", "forget-extra", "replace-extra"],
)
async def test_every_tool_refuses_an_argument_it_does_not_take(fake_service, home, acme, tool, arguments, said):
    """Not only ``remember``: a ``recall`` sent a ``space`` would search where the caller stands
    and answer as if it had searched there; a ``forget`` with an argument it drops would run
    anyway. Each refuses, and nothing is done."""
    server, _ = server_for(fake_service, home, acme)
    kept = fake_service.remember(fake_service.caller("cli", space="acme"), "the freeze starts on friday")
    if tool in ("forget", "replace"):
        arguments = {"id": kept.id, **arguments}
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error and said in result.content[0].text, result.content[0].text
    current = fake_service.get(fake_service.caller("cli", space="acme"), kept.id)
    assert current.text == "the freeze starts on friday" and current.superseded_by is None
