"""Real ``esfis mcp`` processes, launched by the MCP SDK's stdio client, shared by the session.

One ESFIS_HOME holds three registered folders (acme, acme/platform, globex) and two that are
not (a folder deep inside acme/platform, and one outside every space). Each server starts in
its own folder with its own environment, as a coding agent would start it; the real model
loads in each (~12 s), so the servers start together once and every test shares them. They
live for the session (a folder without ``__init__.py`` is no fixture boundary, and an
``__init__.py`` here would make this folder shadow the ``mcp`` SDK), idle once these tests end.

    name        started in                  env                                  client
    acme        acme                        -                                    Claude Code
    globex      globex                      -                                    Cursor
    platform    acme/platform/src/deep      -                                    Claude Code
    outside     outside                     -                                    Claude Code
    reviewer    outside                     ESFIS_SPACE=acme ESFIS_AI=reviewer-bot  Cursor
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, ElicitResult, Implementation

from tests.catalogs import catalog_for
from tests.conftest import cli_env


def esfis_bin() -> str:
    """The ``esfis`` of this interpreter's environment (else the one on PATH)."""
    beside = Path(sys.executable).with_name("esfis")
    found = str(beside) if beside.exists() else shutil.which("esfis")
    assert found, "the esfis command is not installed"
    return found


ESFIS = esfis_bin()
FOLDERS = ["acme", "acme/platform", "acme/platform/src/deep", "globex", "outside"]
REGISTERED = ["acme", "acme/platform", "globex"]


@dataclass(frozen=True)
class Spec:
    folder: str
    client: str
    env: dict[str, str] = field(default_factory=dict)


SERVERS = {
    "acme": Spec("acme", "Claude Code"),
    "globex": Spec("globex", "Cursor"),
    "platform": Spec("acme/platform/src/deep", "Claude Code"),
    "outside": Spec("outside", "Claude Code"),
    "reviewer": Spec("outside", "Cursor", {"ESFIS_SPACE": "acme", "ESFIS_AI": "reviewer-bot"}),
}


@dataclass
class World:
    """The shared ESFIS_HOME and client folders, with the CLI to administer them."""

    home: Path
    root: Path
    logs: Path

    def folder(self, name: str) -> Path:
        return self.root / name

    def command(self, *argv: str) -> list[str]:
        return [ESFIS, *argv]

    def env(self, **extra: str) -> dict[str, str]:
        return cli_env(self.home, **extra)

    def cli(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [ESFIS, *argv], env=self.env(), cwd=self.root, capture_output=True, text=True, timeout=180
        )
        if check and done.returncode != 0:
            raise AssertionError(f"esfis {' '.join(argv)} exited {done.returncode}: {done.stderr}")
        return done

    def cli_json(self, *argv: str) -> Any:
        return json.loads(self.cli(*argv, "--json").stdout)

    async def cli_async(self, *argv: str, stdout: bool = False) -> tuple[int, str]:
        """Run the CLI without blocking the event loop; (exit code, stderr, or stdout if it worked
        and ``stdout``)."""
        proc = await asyncio.create_subprocess_exec(
            ESFIS, *argv, env=self.env(), cwd=self.root, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await proc.communicate()
        code = proc.returncode or 0
        return code, (out if stdout and code == 0 else err).decode()


@dataclass
class Server:
    """One running ``esfis mcp`` and the SDK client talking to it."""

    name: str
    client: Client
    log: Path

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    async def call(self, tool: str, **arguments: Any) -> CallToolResult:
        return await self.client.call_tool(tool, arguments)

    async def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.call(tool, **arguments)
        assert not result.is_error, f"{self.name} {tool}: {error_text(result)}\n--- stderr:\n{self.stderr()}"
        assert result.structured_content is not None
        return result.structured_content

    async def error(self, tool: str, **arguments: Any) -> str:
        result = await self.call(tool, **arguments)
        assert result.is_error, f"{self.name} {tool} should have failed: {result.structured_content}"
        return error_text(result)

    async def recall(self, query: str, limit: int = 10) -> list[dict[str, Any]]:
        return (await self.ok("recall", query=query, limit=limit))["memories"]

    async def recall_texts(self, query: str, limit: int = 10) -> list[str]:
        return [m["text"] for m in await self.recall(query, limit)]


def error_text(result: CallToolResult) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def server_params(world: World, spec: Spec) -> StdioServerParameters:
    # The stdio client passes only HOME, PATH, … and this env: like an agent's config.
    # Besides: the catalog under test, and PYTHONPATH when the tests run from a checkout that
    # another checkout's environment runs (else `esfis mcp` would import that one's code).
    url = catalog_for(world.home)
    given = {"ESFIS_CATALOG": url, "PYTHONPATH": os.environ.get("PYTHONPATH")}
    return StdioServerParameters(
        command=ESFIS,
        args=["mcp"],
        env={"ESFIS_HOME": str(world.home), **{k: v for k, v in given.items() if v}, **spec.env},
        cwd=world.folder(spec.folder),
    )


async def start(stack: AsyncExitStack, world: World, name: str, spec: Spec) -> Server:
    log = world.logs / f"{name}.stderr"
    errlog = stack.enter_context(open(log, "w"))
    client = Client(
        stdio_client(server_params(world, spec), errlog=errlog),
        mode="legacy",  # the initialize handshake, as today's agents speak it
        client_info=Implementation(name=spec.client, version="1.0"),
    )
    await stack.enter_async_context(client)
    return Server(name, client, log)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    base = tmp_path_factory.mktemp("mcp-world")
    world = World(home=base / "esfis-home", root=base / "work", logs=base / "logs")
    world.logs.mkdir()
    for name in FOLDERS:
        world.folder(name).mkdir(parents=True, exist_ok=True)
    for name in REGISTERED:
        world.cli("space", "add", str(world.folder(name)))
    assert [s["name"] for s in world.cli_json("space", "list")["spaces"]] == ["acme", "acme/platform", "globex"]
    return world


@pytest.fixture(scope="session")
async def fleet(world: World, anyio_backend: str) -> AsyncIterator[dict[str, Server]]:
    """Every server of ``SERVERS``, started together so their models load side by side."""
    async with AsyncExitStack() as stack:
        yield {name: await start(stack, world, name, spec) for name, spec in SERVERS.items()}


@pytest.fixture(scope="session")
async def seeded(fleet: dict[str, Server]) -> dict[str, str]:
    """The seed facts, each written by a server standing in its client's folder."""
    auth0 = await fleet["acme"].ok("remember", text="Acme authentication uses Auth0")
    clerk = await fleet["globex"].ok("remember", text="Globex authentication uses Clerk")
    assert (auth0["space"], clerk["space"]) == ("acme", "globex")
    return {"auth0": auth0["id"], "clerk": clerk["id"]}


class Person:
    """The person behind an elicitation-capable client: answers as told, remembers what it saw."""

    def __init__(self, answer: str = "decline") -> None:
        self.answer = answer
        self.seen: list[str] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.seen.append(params.message)
        if self.answer == "accept":
            return ElicitResult(action="accept", content={"approve": True})
        return ElicitResult(action=self.answer)
