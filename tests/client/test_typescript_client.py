"""The TypeScript client (``client-ts/``, the npm package ``esfis-client``) and its LangGraph.js
store, against a real ``esfis serve``. In a copy of client-ts: ``npm ci`` from its lock (the
registry, or npm's cache), ``tsc --strict`` builds the package (ESM and type declarations) and the
tests, and ``node --test`` runs them with the server's address and tokens in the environment:
the three-line start, isolation, typed answers, each error code its class (the list held to
server/errors.py's, computed here), the barrier, a held call awaited while the operator approves
it, signals, the operator's import and export, the retry rule against a scripted local server,
and a real LangGraph.js graph on ``EsfisStore`` that never reads Globex. The package has no
runtime dependency: the built modules import nothing but each other (and the store, LangGraph's
checkpoint package). A machine without Node.js fails here, saying so."""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import server.errors as server_errors
from tests.http.conftest import Server, start_server, stop_server

# A client's interop: no catalog changes it (tests/conftest.py).
pytestmark = pytest.mark.one_catalog

CLIENT_TS = Path(__file__).resolve().parents[2] / "client-ts"
BUILT = ("node_modules", "dist", "build")  # never copied: made in the copy
SPACES = ("acme", "acme/platform", "globex")
AGENT_TOKENS = {"acme": 8, "globex": 2}  # one per store the LangGraph.js tests make (test/langgraph.test.ts)


def server_codes() -> dict[str, int]:
    """Every code server/errors.py sends, with its status (as tests/client/test_client_package.py)."""
    codes: dict[str, int] = {}
    for _, cls in inspect.getmembers(server_errors, inspect.isclass):
        if issubclass(cls, server_errors.EsfisError) and cls is not server_errors.EsfisError:
            codes.setdefault(cls.code, cls.status)
    return codes


def node_and_npm() -> tuple[str, str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(
            "the TypeScript client's tests need Node.js 20+ and npm (apt-get install nodejs npm; .ci/run does), "
            "and found " + ("neither" if node is None and npm is None else "no npm" if node else "no node")
        )
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    major = int(re.match(r"v(\d+)", version).group(1))  # type: ignore[union-attr]
    if major < 20:  # the client itself runs on 18; LangGraph.js (@langchain/core) and npm 11 need 20
        pytest.fail(
            f"the TypeScript client's tests need Node.js 20 or newer (LangGraph.js does); this machine has {version}"
        )
    return node, npm


def run(argv: list[str], cwd: Path, *, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    started = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{output[-20000:]}"
    print(f"{' '.join(Path(a).name if '/' in a else a for a in argv)}: {time.monotonic() - started:.1f} s")
    return output


@contextmanager
def token_book(server: Server) -> Iterator[Any]:
    """The server's token book, opened in this process: what ``esfis token create`` does, without
    its start-up."""
    from server.catalog import open_catalog
    from server.settings import Settings
    from server.spaces.tokens import TokenBook

    catalog = open_catalog(Settings(home=server.home, model=None, catalog=server.env.get("ESFIS_CATALOG")))
    try:
        yield TokenBook(catalog)
    finally:
        catalog.close()


def serve_spaces(tmp_path: Path) -> tuple[Server, dict[str, Any]]:
    """A real ``esfis serve`` with the spaces acme, acme/platform and globex (made by the
    operator's route), and its tokens: the operator's, a harness's runs-only token (the AI
    ts-agent), and agent tokens scoped to acme and globex (the AI langgraph-agent)."""
    work = tmp_path / "work"
    for name in SPACES:
        (work / name).mkdir(parents=True)
    server = start_server(tmp_path / "home", work)
    try:
        with token_book(server) as book:
            tokens: dict[str, Any] = {
                "operator": book.create(operator=True)[1],
                "harness": book.create(ai="ts-agent", runs_only=True)[1],
            }
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tokens['operator']}"}) as op:
            for name in SPACES:
                made = op.post("/v1/spaces", json={"name": name, "folders": [str(work / name)]})
                assert made.status_code == 201, made.text
        with token_book(server) as book:
            tokens["agents"] = {
                space: [book.create(ai="langgraph-agent", space=space)[1] for _ in range(count)]
                for space, count in AGENT_TOKENS.items()
            }
    except BaseException:
        stop_server(server)
        raise
    return server, tokens


def imports_of(module: Path) -> set[str]:
    """The modules a built module imports (its comments, which show examples, left out)."""
    source = re.sub(r"/\*.*?\*/", "", module.read_text(), flags=re.S)
    source = re.sub(r"^\s*//.*$", "", source, flags=re.M)
    return set(re.findall(r"""(?:^|\s)(?:import|export)\s[^'"]*?from\s+["']([^"']+)["']""", source, re.M)) | set(
        re.findall(r"""(?:^|\s)import\s*\(?\s*["']([^"']+)["']""", source, re.M)
    )


@dataclass
class Built:
    folder: Path  # the copy of client-ts, its dev packages installed and dist/ built
    server: Server
    tokens: dict[str, Any]
    node: str


def npm_ci(npm: str, folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [npm, "ci", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finished(install: subprocess.Popen[str], what: str) -> None:
    try:
        output, _ = install.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        install.kill()
        output, _ = install.communicate()
    assert install.returncode == 0, f"npm ci ({what}) exited {install.returncode}:\n{output}"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    """A copy of client-ts built as the package is (``tsc --strict``: dist/, ESM and .d.ts, and the
    tests), Deno and Bun installed beside it from npm (``runtimes/``), and a real server."""
    node, npm = node_and_npm()
    tmp_path = tmp_path_factory.mktemp("client-ts")
    folder = tmp_path / "client-ts"
    shutil.copytree(CLIENT_TS, folder, ignore=shutil.ignore_patterns(*BUILT))
    started = time.monotonic()
    # npm installs while the server starts: the two take about as long as each other.
    installs = {"client-ts": npm_ci(npm, folder), "runtimes": npm_ci(npm, folder / "runtimes")}
    server: Server | None = None
    try:
        server, tokens = serve_spaces(tmp_path)
        print(f"server ready: {time.monotonic() - started:.1f} s")
        for what, install in installs.items():
            finished(install, what)
        print(f"npm ci: {time.monotonic() - started:.1f} s")
        tsc = [node, str(folder / "node_modules" / "typescript" / "bin" / "tsc")]
        run([*tsc, "-p", "tsconfig.json", "--strict"], folder)  # the package: dist/, ESM and .d.ts
        run([*tsc, "-p", "tsconfig.test.json", "--strict"], folder)  # the tests, typechecked too
        yield Built(folder, server, tokens, node)
    finally:
        for install in installs.values():
            if install.poll() is None:
                install.kill()
                install.communicate()
        if server is not None:
            stop_server(server)


def test_the_typescript_client_against_a_real_server(built: Built) -> None:
    package = json.loads((CLIENT_TS / "package.json").read_text())
    assert package.get("dependencies", {}) == {}, "esfis-client has no runtime dependency beyond fetch"
    assert (CLIENT_TS / "package-lock.json").is_file(), "installs come from the committed lock"
    folder, server, tokens = built.folder, built.server, built.tokens
    dist = folder / "dist"
    assert {p.name for p in dist.glob("*.d.ts")} >= {"index.d.ts", "langgraph.d.ts"}
    for module in dist.glob("*.js"):
        outside = {m for m in imports_of(module) if not m.startswith("./")}
        allowed = {"@langchain/langgraph-checkpoint"} if module.name == "langgraph.js" else set()
        assert outside <= allowed, f"dist/{module.name} imports {sorted(outside - allowed)}"

    env = {
        **os.environ,
        "ESFIS_URL": server.url,
        "ESFIS_OPERATOR_TOKEN": str(tokens["operator"]),
        "ESFIS_HARNESS_TOKEN": str(tokens["harness"]),
        "ESFIS_AGENT_TOKENS": json.dumps(tokens["agents"]),
        "ESFIS_SERVER_CODES": json.dumps(server_codes()),
        "NODE_NO_WARNINGS": "1",
    }
    tests = sorted(str(p.relative_to(folder)) for p in (folder / "build" / "test").glob("*.test.js"))
    assert len(tests) == 3, tests
    print(run([built.node, "--test", *tests], folder, env=env, timeout=300)[-400:])


def test_the_built_client_runs_on_node_deno_and_bun(built: Built, tmp_path: Path) -> None:
    """The README says Node.js 18+, Deno and Bun: the built package, as published, on each (Deno
    and Bun from npm, pinned in runtimes/package-lock.json), against the same server: Acme's fact
    recalled and Globex's never, a filter over data, times as Dates, a refusal as its own class."""
    with token_book(built.server) as book:
        tokens = {space: book.create(ai="runtime-agent", space=space)[1] for space in ("acme", "globex")}
    env = {
        **os.environ,
        "ESFIS_URL": built.server.url,
        "ESFIS_RUNTIME_TOKENS": json.dumps(tokens),
        "NODE_NO_WARNINGS": "1",
        "DENO_DIR": str(tmp_path / "deno"),  # Deno's cache, not the user's
        "DENO_NO_UPDATE_CHECK": "1",
        "BUN_INSTALL_CACHE_DIR": str(tmp_path / "bun"),
    }
    bin_ = built.folder / "runtimes" / "node_modules" / ".bin"
    commands = {
        "node": [built.node, "runtimes/smoke.mjs"],
        "deno": [str(bin_ / "deno"), "run", "--allow-net", "--allow-env", "runtimes/smoke.mjs"],
        "bun": [str(bin_ / "bun"), "runtimes/smoke.mjs"],
    }
    for runtime, argv in commands.items():
        said = json.loads(run(argv, built.folder, env=env, timeout=120).strip().splitlines()[-1])
        assert said["runtime"] == runtime and said["recalled"] >= 1 and said["refused"], said
