"""One vocabulary for choosing memories at the command line (``server.cli.selection``): the
same flags on ``esfis memories list`` and ``esfis forget`` (and ``--filter`` on recall), the
names HTTP and the Python client use; the old spellings (``--where``) still work for a release,
each with one warning line on stderr and ``deprecated`` in ``--help``."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_cli


@pytest.fixture
def world(service, folders):
    """acme and acme/platform, with memories by cursor and claude, one of them from Slack."""
    op = service.operator
    op.create_space("acme")
    op.create_space("acme/platform")
    cursor = service.caller("cursor", space="acme")
    ids = {
        "kept": service.remember(cursor, "acme deploys with argo", data={"k": 1}).id,
        "slack": service.remember(cursor, "slack says acme deploys on fridays", labels=["source:slack"]).id,
        "below": service.remember(service.caller("cursor", space="acme/platform"), "platform runs on k8s").id,
        "claude": service.remember(service.caller("claude", space="acme"), "acme's designs live in figma").id,
    }
    service.close()
    return folders["acme"], ids


def _listed(capsys, cwd, *argv):
    code, out, err = run_cli(capsys, cwd, "memories", "list", *argv, "--json")
    assert code == 0, err
    return {m["id"] for m in json.loads(out)["memories"]}, err


def test_memories_list_selects_by_space_below_ai_and_origin_with_the_shared_flags(capsys, world):
    cwd, ids = world
    assert _listed(capsys, cwd, "--space", "acme") == ({ids["kept"], ids["slack"], ids["claude"]}, "")
    assert _listed(capsys, cwd, "--space", "acme", "--below", "--ai", "cursor")[0] == {
        ids["kept"],
        ids["slack"],
        ids["below"],
    }
    assert _listed(capsys, cwd, "--space", "acme", "--origin", "slack")[0] == {ids["slack"]}
    since = ("--since", "2000-01-01T00:00:00Z")
    assert _listed(capsys, cwd, "--space", "acme", "--state", "current", *since)[0] == {
        ids["kept"],
        ids["slack"],
        ids["claude"],
    }
    assert _listed(capsys, cwd, "--space", "acme", "--before", "2000-01-01T00:00:00Z")[0] == set()
    assert _listed(capsys, cwd, "--personal")[0] == set() == _listed(capsys, cwd)[0]  # no place: personal


def test_the_old_where_still_selects_the_same_with_one_warning_line(capsys, world):
    cwd, ids = world
    new, quiet = _listed(capsys, cwd, "--space", "acme", "--ai", "cursor")
    old, warned = _listed(capsys, cwd, "--where", '{"space": "acme", "ai": "cursor"}')
    assert old == new == {ids["kept"], ids["slack"]} and quiet == ""
    assert warned.count("\n") == 1 and "--where is deprecated" in warned and "--space" in warned
    code, _, err = run_cli(capsys, cwd, "memories", "list", "--where", '{"space": "acme"}', "--ai", "cursor")
    assert code == 2 and "cannot be combined" in err


def test_forget_by_selection_takes_the_same_flags_and_the_old_where(capsys, world):
    cwd, ids = world
    code, out, err = run_cli(capsys, cwd, "forget", "--space", "acme", "--origin", "slack", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["matched"] == 1 and err == ""
    code, out, err = run_cli(capsys, cwd, "forget", "--where", '{"space": "acme", "ai": "claude"}', "--dry-run")
    assert code == 0 and out.startswith("would forget 1 memory") and "deprecated" in err
    code, out, _ = run_cli(capsys, cwd, "forget", "--space", "acme", "--origin", "slack", "--yes")
    assert code == 0 and out.strip() == "forgot 1 memory"
    assert _listed(capsys, cwd, "--space", "acme", "--state", "current")[0] == {ids["kept"], ids["claude"]}


def test_forget_takes_an_id_or_a_selection_never_both_never_neither(capsys, world):
    cwd, ids = world
    code, _, err = run_cli(capsys, cwd, "forget")
    assert code == 2 and "a selection" in err
    code, _, err = run_cli(capsys, cwd, "forget", ids["kept"], "--origin", "slack")
    assert code == 2 and "leave out the selection" in err
    code, _, err = run_cli(capsys, cwd, "forget", "--space", "acme", "--personal", "--dry-run")
    assert code == 2 and "name one place" in err
    code, out, _ = run_cli(capsys, cwd, "forget", ids["kept"], "--ai", "cursor", "--space", "acme")  # who forgets
    assert code == 0 and out.strip() == f"forgot {ids['kept']}"


def test_recall_filters_data_with_filter_and_still_takes_where_with_a_warning(capsys, world):
    cwd, ids = world
    code, out, err = run_cli(capsys, cwd, "recall", "--space", "acme", "--filter", '{"k": 1}', "--json")
    assert code == 0 and [m["id"] for m in json.loads(out)["memories"]] == [ids["kept"]] and err == ""
    code, out, err = run_cli(capsys, cwd, "recall", "--space", "acme", "--where", '{"k": 1}', "--json")
    assert code == 0 and [m["id"] for m in json.loads(out)["memories"]] == [ids["kept"]]
    assert err.count("\n") == 1 and "recall --where is deprecated" in err and "--filter" in err
    code, _, err = run_cli(capsys, cwd, "recall", "--space", "acme", "--filter", "{}", "--where", "{}")
    assert code == 2 and "give one" in err


@pytest.mark.parametrize("command", [["memories", "list"], ["forget"], ["recall"]])
def test_help_names_the_old_spelling_deprecated(capsys, command):
    from server.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--where JSON deprecated, accepted until the next release" in shown
