"""Spaces in bulk: ``esfis space add --from FILE``, and an import that creates the spaces its rows
name when asked (``--create-spaces``): every created space reported, none created silently,
none under a name ``space add`` refuses, and without the flag an unknown space is that row's
error, as before. The crash guarantees are in tests/test_faults.py."""

from __future__ import annotations

import io
import json
import subprocess

import httpx
import pytest

from tests.conftest import ESFIS_BIN, cli_env

# Names ``space add`` refuses, each a way a hostile dump might try to name a space it may not.
ADVERSARIAL = [
    "Acme",
    "acme corp",
    "../globex",
    "acme/../globex",
    "acme//x",
    "/acme",
    "acme/",
    ".",
    "a" * 64,
    "аcme",  # a Cyrillic а
    "acme\u200b",
    "acme;drop",
    "-acme",
    "/".join(["s"] * 9),
]


def _lines(rows: list[dict]) -> io.BytesIO:
    return io.BytesIO("".join(json.dumps(r) + "\n" for r in rows).encode())


def test_an_import_creates_the_spaces_it_names_only_when_asked_and_lists_each(fake_service):
    rows = [{"text": f"tenant {t} fact {i}", "space": f"tenant-{t}"} for t in range(5) for i in range(3)]
    refused = fake_service.operator.import_jsonl(_lines(rows))
    assert refused.imported == 0 and refused.failed == 15 and refused.created_spaces == ()
    assert "give --create-spaces" in refused.errors[0][1]
    assert [s.name for s in fake_service.operator.spaces()] == []
    made = fake_service.operator.import_jsonl(_lines(rows), create_spaces=True)
    assert made.imported == 15 and made.failed == 0
    assert sorted(made.created_spaces) == [f"tenant-{t}" for t in range(5)]
    assert sorted(s.name for s in fake_service.operator.spaces()) == [f"tenant-{t}" for t in range(5)]
    assert ", created 5 spaces in" in made.summary()
    again = fake_service.operator.import_jsonl(_lines(rows), create_spaces=True)
    assert again.imported == 0 and again.skipped == 15 and again.created_spaces == ()  # re-runs make nothing
    one = fake_service.operator.import_jsonl(_lines([{"text": "a lone fact", "space": "tenant-9"}]), create_spaces=True)
    assert ", created 1 space in" in one.summary()  # one space, said as one


def test_an_import_as_an_ai_a_rule_denies_writes_nothing_there_and_creates_no_space_for_it(fake_service):
    """Rows are written as the import's AI: a deny of that AI refuses its rows in that space, as
    it refuses its remember, and the rest go in; a new space whose rows are all refused is not
    created."""
    operator = fake_service.operator
    operator.create_space("acme")
    operator.create_space("globex")
    operator.deny("cursor", "acme")  # and so every space below it, one the import would create too
    rows = [
        {"text": "acme deploys on tuesday", "space": "acme"},
        {"text": "globex deploys on friday", "space": "globex"},
        {"text": "acme's platform deploys on monday", "space": "acme/platform"},
    ]
    report = operator.import_jsonl(_lines(rows), ai="cursor", create_spaces=True)
    assert (report.imported, report.failed, report.created_spaces) == (1, 2, ())
    assert {line: reason for line, reason in report.errors} == {
        1: "cursor may not use space 'acme' (deny cursor acme)",
        3: "cursor may not use space 'acme/platform' (deny cursor acme)",
    }
    assert sorted(s.name for s in operator.spaces()) == ["acme", "globex"]
    assert fake_service.recall(fake_service.caller("cli", space="acme"), "deploys").memories == []
    allowed = operator.import_jsonl(_lines(rows[:1]), ai="claude-code")  # another AI: as before
    assert allowed.imported == 1


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_create_spaces_never_creates_a_space_under_a_name_space_add_refuses(fake_service, name):
    rows = [{"text": "a fact", "space": name}, {"text": "another fact", "space": "fine"}]
    report = fake_service.operator.import_jsonl(_lines(rows), create_spaces=True)
    assert report.failed == 1 and report.created_spaces == ("fine",)
    assert [s.name for s in fake_service.operator.spaces()] == ["fine"]
    with pytest.raises(Exception, match="invalid space name"):
        fake_service.operator.create_space(name)
    with pytest.raises(Exception, match="invalid space name"):
        fake_service.operator.create_spaces(["ok", name])
    assert [s.name for s in fake_service.operator.spaces()] == ["fine"]  # one refused name makes none


def test_space_add_from_a_file_creates_each_once_and_says_so(home, tmp_path):
    names = tmp_path / "tenants.txt"
    names.write_text("# one tenant a line\n" + "".join(f"tenant-{i:04d}\n" for i in range(1000)) + "\ntenant-0001\n")
    env = cli_env(home)
    done = subprocess.run(
        [ESFIS_BIN, "space", "add", "--from", str(names)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"tenant-{i:04d}" for i in range(1000)]
    assert "created 1000 spaces; 0 existed already" in done.stderr
    again = subprocess.run(
        [ESFIS_BIN, "space", "add", "--from", str(names)], env=env, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0 and again.stdout == "" and "created 0 spaces; 1000 existed already" in again.stderr
    bad = tmp_path / "bad.txt"
    bad.write_text("fresh-one\nAcme Corp\n")
    refused = subprocess.run(
        [ESFIS_BIN, "space", "add", "--from", str(bad)], env=env, capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2 and "bad.txt, line 2: invalid space name 'Acme Corp'" in refused.stderr, (
        refused.stderr
    )
    listed = subprocess.run(
        [ESFIS_BIN, "space", "list", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert "fresh-one" not in listed.stdout


def test_an_http_import_creates_spaces_only_for_the_operator(tmp_path):
    from tests.http.conftest import start_server, stop_server

    (tmp_path / "work").mkdir()
    server = start_server(tmp_path / "home", tmp_path / "work")
    try:
        operator = server.token("--operator")
        server.cli("space", "add", str(server.folder("acme")))
        body = "".join(json.dumps({"text": f"fact {i}", "space": f"tenant-{i % 3}"}) + "\n" for i in range(9))
        scoped = server.agent_token(space="acme")
        refused = httpx.post(
            f"{server.url}/v1/import",
            params={"create_spaces": "true"},
            content=body,
            headers={"Authorization": f"Bearer {scoped}"},
        )
        assert refused.status_code == 403  # an AI token imports nothing, let alone makes spaces
        answer = httpx.post(
            f"{server.url}/v1/import",
            params={"create_spaces": "true"},
            content=body,
            headers={"Authorization": f"Bearer {operator}"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["imported"] == 9 and sorted(answer.json()["created_spaces"]) == [
            "tenant-0",
            "tenant-1",
            "tenant-2",
        ]
    finally:
        stop_server(server)
