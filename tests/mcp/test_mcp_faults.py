"""A full disk said in words over MCP (issue 68): the real ``esfis mcp``, its disk full at the
first write (a failpoint: the journal's line refused with ENOSPC), answers a tool error that says
so, with its code; the next remember is stored, with no restart."""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest

from tests.mcp.conftest import Spec, start

pytestmark = pytest.mark.anyio


async def test_a_full_disk_is_a_tool_error_in_words_and_the_next_remember_is_stored(world):
    spec = Spec("acme", "Claude Code", {"ESFIS_FAILPOINT": "journal:write=enospc"})
    async with AsyncExitStack() as stack:
        server = await start(stack, world, "full-disk", spec)
        said = await server.error("remember", text="acme fact the full disk refuses at first")
        assert "disk under ESFIS_HOME is full" in said and "(disk_full)" in said, said
        assert "Traceback" not in server.stderr()
        stored = await server.ok("remember", text="acme fact stored once there is room again")
        assert stored["id"].startswith("mem_")
