"""The arrows point one way (interfaces → core → indexing), commands that do not embed never
import the model stack, every CLI command has help, and a store refuses another model."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from indexing.errors import StoreMismatch
from indexing.store import VectorStore
from server.errors import StoreUnavailable
from server.service import open_service
from server.settings import Settings
from indexing.testing import HashingEmbedder

ROOT = Path(__file__).resolve().parents[1]
INTERFACES = {"server.cli", "server.cli_extra", "server.http", "server.mcp", "server.web"}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def test_indexing_never_imports_server():
    for path in (ROOT / "indexing").rglob("*.py"):
        assert not [m for m in imports_of(path) if m.split(".")[0] == "server"], path


def test_core_never_imports_an_interface():
    for path in (ROOT / "server").rglob("*.py"):
        name = module_name(path)
        if any(name == i or name.startswith(i + ".") for i in INTERFACES):
            continue
        bad = [m for m in imports_of(path) if any(m == i or m.startswith(i + ".") for i in INTERFACES)]
        assert not bad, f"{name} imports {bad}"


@pytest.mark.parametrize("argv", [["space", "list"], ["policy", "list"], ["deliveries"], ["--deny", "x"]])
def test_commands_that_do_not_embed_never_import_the_model_stack(argv, tmp_path):
    code = (
        "import sys; from server.cli import main; main(sys.argv[1:]); "
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]; "
        "print('HEAVY', heavy, file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          env={"ESFIS_HOME": str(tmp_path / "h"), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert "HEAVY []" in proc.stderr, proc.stderr


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
    open_service(Settings(home=home, model=None), embedder=HashingEmbedder(dimension=64)).close()
    with pytest.raises(StoreUnavailable, match="64-d"):
        open_service(Settings(home=home, model=None), embedder=HashingEmbedder(dimension=32))


def test_cli_reports_model_mismatch_in_one_line(home, tmp_path):
    VectorStore(home / "vectors", model="some-other-model", dimension=768)
    proc = subprocess.run([str(Path(sys.executable).with_name("esfis")), "space", "list"], capture_output=True,
                          text=True, env={"ESFIS_HOME": str(home), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.count("\n") == 1 and "some-other-model" in proc.stderr


def test_bad_model_folder_is_a_clear_error(home, tmp_path):
    proc = subprocess.run([str(Path(sys.executable).with_name("esfis")), "space", "list"], capture_output=True,
                          text=True, timeout=60,
                          env={"ESFIS_HOME": str(home), "ESFIS_MODEL": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode != 0 and "ESFIS_MODEL" in proc.stderr and proc.stderr.count("\n") == 1


def test_real_model_vectors_are_unit_length(real_embedder):
    vectors = real_embedder.embed_documents(["one", "two words"])
    assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
