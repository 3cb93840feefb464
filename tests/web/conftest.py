"""A real ``esfis serve`` and a real headless Chromium, one of each per test module.

The server is the one the HTTP tests start (``tests/http/conftest.py``: its own ESFIS_HOME, a free
port, the model loaded before the first request). The browser is the Debian ``chromium``, driven
by Playwright for Python through ``executable_path``: Playwright's own browser download is never
used. A missing browser is installed (as root) or the tests fail; they never skip.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_HTTP_CONFTEST = Path(__file__).resolve().parents[1] / "http" / "conftest.py"
_spec = importlib.util.spec_from_file_location("esfis_http_servers", _HTTP_CONFTEST)
assert _spec is not None and _spec.loader is not None
_servers = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _servers  # dataclasses look their module up there
_spec.loader.exec_module(_servers)
Server = _servers.Server
start_server = _servers.start_server
stop_server = _servers.stop_server

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    """The Debian chromium; installed by package name when missing and we may (root)."""
    found = shutil.which("chromium")
    if found is None and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "update", "-q"], check=False, capture_output=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], check=False, capture_output=True, timeout=1200)
        found = shutil.which("chromium")
    if found is None:
        pytest.fail("the web tests drive the Debian chromium: apt-get install chromium (as root)")
    return found


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A fresh esfis serve; two client folders on disk (not registered: the page adds them), an
    operator token and an AI token for claude-code, made by the CLI."""
    root = tmp_path_factory.mktemp("web")
    work = root / "work"
    for name in ("acme", "globex"):
        (work / name).mkdir(parents=True)
    server = start_server(root / "esfis-home", work)
    try:
        server.tokens["operator"] = server.token("--operator")
        server.tokens["claude-code"] = server.token("--ai", "claude-code")
        yield server
    finally:
        stop_server(server)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the run saves its screenshots (under the tests' tmp dir). With ESFIS_WEB_SCREENSHOTS
    set to a folder (docs/screenshots), the desktop ones are copied there too."""
    return tmp_path_factory.mktemp("screenshots")
