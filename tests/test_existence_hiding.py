"""An id the caller cannot see answers exactly like an id that never existed: same exit code,
same message but for the id, over the CLI."""

from __future__ import annotations

import pytest

from server.memories.input import new_id
from tests.helpers import run_cli


@pytest.fixture
def foreign_id(capsys, home, folders, real_embedder):
    for name in ("acme", "globex"):
        assert run_cli(capsys, folders[name], "space", "add", str(folders[name]))[0] == 0
    code, out, err = run_cli(capsys, folders["globex"], "remember", "Globex authentication uses Clerk")
    assert code == 0, err
    return out.strip()


def _answer(capsys, cwd, verb, id_, *extra):
    code, out, err = run_cli(capsys, cwd, verb, id_, *extra)
    return code, out, err.replace(id_, "<ID>")


@pytest.mark.parametrize("verb, extra", [("forget", ()), ("replace", ("acme uses okta",)), ("get", ())])
def test_foreign_id_answers_like_a_random_id(capsys, folders, foreign_id, verb, extra):
    random_id = new_id()
    foreign = _answer(capsys, folders["acme"], verb, foreign_id, *extra)
    missing = _answer(capsys, folders["acme"], verb, random_id, *extra)
    assert foreign == missing
    assert foreign[0] != 0 and foreign[1] == ""
    assert foreign[2].count("\n") == 1  # one line on stderr


@pytest.mark.parametrize("verb, extra", [("forget", ()), ("replace", ("globex uses okta",)), ("get", ())])
def test_denied_id_answers_like_a_random_id(capsys, folders, foreign_id, verb, extra):
    assert run_cli(capsys, folders["acme"], "--deny", "cursor", "globex")[0] == 0
    denied = _answer(capsys, folders["globex"], verb, foreign_id, "--ai", "cursor", *extra)
    missing = _answer(capsys, folders["globex"], verb, new_id(), "--ai", "cursor", *extra)
    assert denied == missing


def test_foreign_forget_leaves_the_memory_in_place(capsys, folders, foreign_id):
    run_cli(capsys, folders["acme"], "forget", foreign_id)
    code, out, _ = run_cli(capsys, folders["globex"], "get", foreign_id)
    assert code == 0 and out.strip() == "Globex authentication uses Clerk"
