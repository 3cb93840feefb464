"""The documentation keeps up with the code: every CLI command, every HTTP route and every MCP
tool is named in ``docs/``, and the README stays short and points there."""

from __future__ import annotations

import argparse
import asyncio
import re
from pathlib import Path

import pytest

from server.cli import build_parser
from server.http.app import create_app
from server.mcp.server import build_server

ROOT = Path(__file__).resolve().parent.parent
DOCS = "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))


def cli_commands() -> list[str]:
    """``esfis X`` and ``esfis X Y`` for every command and subcommand, and the top-level flags."""
    found = ["--allow", "--deny", "--why"]

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append(f"{prefix}{name}")
                    walk(sub, f"{prefix}{name} ")

    walk(build_parser(), "")
    return found


def http_routes() -> list[str]:
    """``METHOD /path`` of every route of the API, as its OpenAPI document lists them."""
    paths = create_app(lambda: None).openapi()["paths"]  # type: ignore[arg-type, return-value]
    routes = [f"{method.upper()} {path}" for path, item in paths.items() for method in item if path.startswith("/v1")]
    assert len(routes) > 20, routes  # the document was read: never an empty, skipped, parameter set
    return sorted(routes)


def mcp_tools() -> list[str]:
    server = build_server(lambda: None, None, caller_of=lambda ctx, service: None)  # type: ignore[arg-type, return-value]
    tools = sorted(tool.name for tool in asyncio.run(server.list_tools()))
    assert len(tools) >= 6, tools
    return tools


@pytest.mark.parametrize("command", cli_commands())
def test_every_cli_command_is_in_the_docs(command):
    assert re.search(rf"esfis {re.escape(command)}\b", DOCS), f"`esfis {command}` is in no page of docs/"


@pytest.mark.parametrize("route", http_routes())
def test_every_http_route_is_in_the_docs(route):
    method, path = route.split(" ", 1)
    # A route is documented when its path appears with its method (a table cell may list several
    # methods: GET/POST /v1/grants), a {parameter} in any spelling.
    pattern = re.escape(path).replace(r"\{", "{").replace(r"\}", "}")
    pattern = re.sub(r"\{[^}]+\}", r"\\{[^}]+\\}", pattern)
    methods = rf"(?:[A-Z]+/)*{method}(?:/[A-Z]+)*"
    assert re.search(rf"{methods} `?{pattern}(?![A-Za-z0-9_/-])", DOCS) or re.search(rf"`{methods} {pattern}", DOCS), (
        f"{route} is in no page of docs/"
    )


@pytest.mark.parametrize("tool", mcp_tools())
def test_every_mcp_tool_is_in_the_docs(tool):
    assert f"`{tool}`" in (ROOT / "docs" / "mcp.md").read_text(), f"the MCP tool {tool} is not in docs/mcp.md"


def test_the_readme_is_short_and_links_every_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in readme, f"the README does not link docs/{page.name}"
