"""The arrows point one way (interfaces → façade → core → indexing; inside indexing, partitions →
relevance, embedding on its own), commands that do not embed never import the model stack, every
CLI command has help, and a store refuses another model."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from indexing.embedding.testing import HashingEmbedder
from indexing.errors import StoreMismatch
from indexing.partitions.store import VectorStore
from server.errors import StoreUnavailable
from server.facade import open_service
from tests.catalogs import settings_for

ROOT = Path(__file__).resolve().parents[1]

# The layers, by package. An interface is everything under these; the rest of server/ is the
# core (façade included); indexing/ knows vectors only.
INTERFACES = ("server.cli", "server.http", "server.mcp", "server.web")
# The core, one package per concept (docs/layout.md), and the façade over it.
CORE = ("server.catalog", "server.spaces", "server.barrier", "server.memories", "server.bulk")
FACADE = ("server.facade",)
# The vocabulary every layer shares: errors, domain objects, time, settings read at the edge,
# the inputs' limits and descriptions, the answers' shapes and their text forms, and process set-up.
VOCABULARY = (
    "server.errors",
    "server.models",
    "server.inputs",
    "server.clock",
    "server.settings",
    "server.shapes",
    "server.render",
    "server.home",
    "server.arenas",
    "server.metrics",
    "server.faults",
    "server.loading",
    "server.labels",
    "server.visible",
    "server.records",
)
# What an interface may import from server/: the façade, the light door (where a caller stands,
# from the catalog alone), and the shared vocabulary.
DOORS = {*FACADE, "server.spaces.locate", *VOCABULARY}
# indexing/, by concept (docs/layout.md): each room and the rooms it may import. Partitions rank
# their rows with relevance; relevance knows arrays and texts only; embedding knows texts and
# models, never a partition; no store loads a model.
INDEXING_ROOMS = {
    "indexing.embedding": (),
    "indexing.relevance": (),
    "indexing.partitions": ("indexing.relevance",),
}
# The vocabulary the rooms share, at the top of indexing/: it imports no room.
INDEXING_VOCABULARY = (
    "indexing.errors",
    "indexing.failpoints",
    "indexing.durable",
    "indexing.identity",
    "indexing.rows",
)


def modules() -> dict[str, Path]:
    found = {}
    for package in ("server", "indexing"):
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def imports_of(name: str) -> set[str]:
    """Every module of ours that ``name`` imports, anywhere in its body: relative imports
    resolved, and ``from package import module`` counted as importing the module."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def layer(name: str) -> str:
    if name.startswith("indexing"):
        return "indexing"
    if any(name == i or name.startswith(i + ".") for i in INTERFACES):
        return "interface"
    return "core"


def own_package(name: str, target: str) -> bool:
    top = next(i for i in INTERFACES if name == i or name.startswith(i + "."))
    return target == top or target.startswith(top + ".")


def test_indexing_never_imports_server():
    bad = {n: sorted(t for t in imports_of(n) if t.startswith("server")) for n in MODULES if layer(n) == "indexing"}
    assert not {n: t for n, t in bad.items() if t}


def indexing_room(name: str) -> str | None:
    """The room of indexing/ that ``name`` lives in; None for the package and its vocabulary."""
    return next((r for r in INDEXING_ROOMS if name == r or name.startswith(r + ".")), None)


def test_every_module_of_indexing_lives_in_a_room_or_is_shared_vocabulary():
    """A module of indexing/ is embedding's, relevance's or the partitions', or one of the few
    everything shares; never a loose module beside them."""
    loose = [
        n for n in MODULES if n.startswith("indexing.") and indexing_room(n) is None and n not in INDEXING_VOCABULARY
    ]
    assert not loose


def test_the_rooms_of_indexing_point_one_way():
    """Partitions may import relevance; relevance and embedding import no other room; the shared
    vocabulary imports none. Every import counts, lazy ones included."""
    bad = {}
    for name in MODULES:
        if layer(name) != "indexing":
            continue
        room = indexing_room(name)
        allowed = () if room is None else (room, *INDEXING_ROOMS[room])
        wrong = sorted(t for t in imports_of(name) if indexing_room(t) not in (None, *allowed))
        if wrong:
            bad[name] = wrong
    assert not bad


def test_every_module_of_server_lives_in_a_room_of_the_house():
    """The folder shows the architecture: a module is an interface's, a core package's, the
    façade's, or shared vocabulary; never a loose module beside them."""

    def inside(name: str, rooms: tuple[str, ...]) -> bool:
        return any(name == r or name.startswith(r + ".") for r in rooms)

    loose = [n for n in MODULES if n.startswith("server.") and not inside(n, INTERFACES + CORE + FACADE + VOCABULARY)]
    assert not loose


def room(name: str) -> str:
    """The room a module lives in: its package under server/ or indexing/ (``server.barrier``,
    ``indexing.partitions``), or itself for a module at the top (``server.models``)."""
    return ".".join(name.split(".")[:2])


def room_graph() -> dict[str, dict[str, list[str]]]:
    """Room → the rooms it imports → the imports that make the arrow (``a -> b``)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for name in MODULES:
        for target in imports_of(name):
            if room(target) != room(name) and target not in ("server", "indexing"):
                graph.setdefault(room(name), {}).setdefault(room(target), []).append(f"{name} -> {target}")
    return graph


def room_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str]:
    """One circle of rooms (its first room repeated at its end), or [] when there is none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str]:
        if node in path:
            return path[path.index(node) :] + [node]
        if node in done:
            return []
        done.add(node)
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if found := visit(nxt):
                return found
        path.pop()
        return []

    for node in sorted(graph):
        if found := visit(node):
            return found
    return []


def test_no_circle_between_rooms():
    """Rooms point one way as modules do: a room that needs another which needs it back (however
    far round) is one concept split in two, or a dependency pointing the wrong way."""
    graph = room_graph()
    cycle = room_cycle(graph)
    arrows = [graph[a][b][0] for a, b in zip(cycle, cycle[1:], strict=False)]
    assert not cycle, "rooms in a circle: " + " → ".join(cycle) + "; e.g. " + "; ".join(arrows)


def test_the_shared_vocabulary_imports_nothing_of_the_core():
    """Errors, domain objects, inputs, shapes and their text forms are what every layer speaks:
    they import one another and nothing else of server/, so no room of the core can come round
    to itself through them."""
    bad = {
        name: wrong
        for name in MODULES
        if room(name) in VOCABULARY
        and (wrong := sorted(t for t in imports_of(name) if t.startswith("server.") and room(t) not in VOCABULARY))
    }
    assert not bad


def test_the_room_checks_see_a_circle_and_name_its_rooms():
    graph = {"server.a": {"server.b": ["x"]}, "server.b": {"server.c": ["y"]}, "server.c": {"server.a": ["z"]}}
    assert room_cycle(graph) == ["server.a", "server.b", "server.c", "server.a"]
    assert room_cycle({"server.a": {"server.b": ["x"]}}) == []


# The house's limit (docs/layout.md: one concept per module, 100–400 lines).
MAX_LINES = 400


def test_no_module_is_over_400_lines():
    """Past the limit a module holds more than one concept: move one into a module of its own."""
    lines = {
        path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
        for package in ("server", "indexing", "client")
        for path in (ROOT / package).rglob("*.py")
    }
    over = {p: n for p, n in sorted(lines.items()) if n > MAX_LINES}
    assert not over, f"over {MAX_LINES} lines: {over}"


def test_every_module_is_named_in_the_layout():
    """docs/layout.md is the house's map: a module of server/ or indexing/ it does not name (by
    file name, in its room's lines) lives nowhere a reader looks."""
    layout = (ROOT / "docs" / "layout.md").read_text()
    unnamed = sorted(
        path.relative_to(ROOT).as_posix()
        for name, path in MODULES.items()
        if path.name != "__init__.py" and path.name not in layout
    )
    assert not unnamed


def test_core_never_imports_an_interface():
    bad = {n: sorted(t for t in imports_of(n) if layer(t) == "interface") for n in MODULES if layer(n) == "core"}
    assert not {n: t for n, t in bad.items() if t}


def test_interfaces_go_through_the_door_only():
    """An interface imports the façade (and the light door and shared vocabulary), its own
    package, and another interface it starts (the CLI starts serve and mcp and prints what the
    web pages announce; the HTTP app mounts the web pages and the MCP server); never the
    catalog, the registry, a book, or indexing."""
    bad = {}
    for name in MODULES:
        if layer(name) != "interface":
            continue
        wrong = sorted(
            t
            for t in imports_of(name)
            if not (
                t in DOORS
                or own_package(name, t)
                or ((name == "server.cli" or name.startswith("server.cli.")) and layer(t) == "interface")
                or (name in ("server.http.app", "server.http.workers") and t == "server.web")
                or (name == "server.http.mcp" and t == "server.mcp.server")
                or t in ("server", "indexing")
            )
        )
        if wrong:
            bad[name] = wrong
    assert not bad


def test_indexing_reads_no_environment():
    """Settings are read at the edge (``server.settings``, the CLI) and handed in: nothing under
    indexing/ reads or writes the process's environment, so a library caller's settings are the
    ones used (the torch runtime's defaults come through ``before_torch``)."""
    touching = sorted(
        name
        for name, path in MODULES.items()
        if layer(name) == "indexing"
        and any(
            (isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv", "putenv", "unsetenv"))
            or (isinstance(n, ast.ImportFrom) and n.module == "os" and any(a.name == "environ" for a in n.names))
            for n in ast.walk(ast.parse(path.read_text()))
        )
    )
    assert not touching


def test_interfaces_never_reach_the_facades_parts():
    """The façade holds its books privately: an interface calls its verbs, never ``_parts``."""
    reaching = sorted(
        name
        for name, path in MODULES.items()
        if layer(name) == "interface"
        and any(isinstance(n, ast.Attribute) and n.attr == "_parts" for n in ast.walk(ast.parse(path.read_text())))
    )
    assert not reaching


def test_no_import_cycles():
    """Counting every import, lazy ones included: no module needs itself, however far round."""
    graph = {name: imports_of(name) for name in MODULES}
    done, path, cycles = set(), [], []

    def visit(node):
        if node in path:
            cycles.append(path[path.index(node) :] + [node])
        elif node not in done:
            done.add(node)
            path.append(node)
            for nxt in sorted(graph.get(node, ())):
                visit(nxt)
            path.pop()

    for node in sorted(graph):
        visit(node)
    assert not cycles


def test_the_layering_test_sees_every_form_of_import(tmp_path):
    """The checks above would catch an interface reaching the catalog however it is written."""
    for source in (
        "from server import catalog",
        "import server.catalog",
        "from server.catalog import Catalog",
        "from .. import catalog",
        "def f():\n    from server.spaces.registry import Registry",
    ):
        fake = ROOT / "server" / "http" / "_probe_layering.py"
        fake.write_text(source + "\n")
        try:
            MODULES["server.http._probe_layering"] = fake
            wrong = [
                t
                for t in imports_of("server.http._probe_layering")
                if t not in DOORS and not own_package("server.http._probe_layering", t)
            ]
            assert wrong, source
        finally:
            MODULES.pop("server.http._probe_layering", None)
            fake.unlink()


def fresh_process(code: str, tmp_path: Path, *argv: str) -> str:
    """What ``python -c code argv…`` writes to stderr, run in a process of its own (nothing this
    test process imported), its home under ``tmp_path``."""
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env={"ESFIS_HOME": str(tmp_path / "h"), "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
        timeout=60,
    ).stderr


@pytest.mark.parametrize("argv", [["space", "list"], ["policy", "list"], ["deliveries"], ["--deny", "x"]])
def test_commands_that_do_not_search_never_import_the_model_stack_nor_lance_nor_pandas(argv, tmp_path):
    """Each costs a short command tenths of a second: the model stack seconds, ``lance`` and
    ``pandas`` (which any Arrow array built from Python objects imports) 0.2-0.4 s."""
    code = (
        "import sys; from server.cli import main; main(sys.argv[1:]); "
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers', 'lance', 'pandas') "
        "if m in sys.modules]; "
        "print('HEAVY', heavy, file=sys.stderr)"
    )
    stderr = fresh_process(code, tmp_path, *argv)
    assert "HEAVY []" in stderr, stderr


def test_a_server_starts_without_the_mcp_sdk(tmp_path):
    """The MCP SDK's import is about half a second of every server's start, and most servers never
    see MCP: ``/mcp`` and the OAuth endpoints build on it at their first request."""
    code = (
        "import sys; from server.http.workers import create_app; create_app(lambda: None); "
        "print('SDK', sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.'))[:3], file=sys.stderr)"
    )
    stderr = fresh_process(code, tmp_path)
    assert "SDK []" in stderr, stderr


def test_every_cli_command_has_help():
    from server.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for choice in sub._choices_actions:
        assert choice.help, choice.dest
    for flag in ("--allow", "--deny", "--why"):
        assert any(flag in a.option_strings and a.help for a in parser._actions)


def test_store_refuses_another_model(tmp_path):
    VectorStore(tmp_path, model="all-MiniLM-L6-v2", dimension=384)
    with pytest.raises(StoreMismatch, match="built with model 'all-MiniLM-L6-v2'"):
        VectorStore(tmp_path, model="hashing-test", dimension=64)


def test_service_reports_model_mismatch_clearly(home):
    open_service(settings_for(home), embedder=HashingEmbedder(dimension=64)).close()
    with pytest.raises(StoreUnavailable, match="64-d"):
        open_service(settings_for(home), embedder=HashingEmbedder(dimension=32))


def test_cli_reports_model_mismatch_in_one_line(home, tmp_path):
    VectorStore(home / "vectors", model="some-other-model", dimension=768)
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("esfis")), "space", "list"],
        capture_output=True,
        text=True,
        env={"ESFIS_HOME": str(home), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode != 0
    assert proc.stderr.count("\n") == 1 and "some-other-model" in proc.stderr


def test_bad_model_folder_is_a_clear_error(home, tmp_path):
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("esfis")), "space", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"ESFIS_HOME": str(home), "ESFIS_MODEL": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode != 0 and "ESFIS_MODEL" in proc.stderr and proc.stderr.count("\n") == 1


def test_real_model_vectors_are_unit_length(real_embedder):
    vectors = real_embedder.embed_documents(["one", "two words"])
    assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
