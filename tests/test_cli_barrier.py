"""The data barrier on the command line: ``--run``/``ESFIS_RUN`` join a run, a refusal is one
line and exit code 4, a person at a terminal can approve one write into personal (and only at
a terminal), and the operator's ``grant``, ``trust``, ``runs`` and ``trail`` commands."""

from __future__ import annotations

import json
import os
import pty
import subprocess

from tests.conftest import ESFIS_BIN, cli_env

SECRET = "the staging database password is in vault path secret/acme-stg"


def esfis(home, cwd, *argv, env=None, check=True):
    done = subprocess.run(
        [ESFIS_BIN, *argv], cwd=cwd, env=cli_env(home, **(env or {})), capture_output=True, text=True, timeout=120
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def test_a_refused_write_is_one_line_exit_4_and_a_terminal_can_approve(home, folders):
    platform = folders["acme/platform"]
    esfis(home, folders["acme"], "space", "add", str(folders["acme"]))
    esfis(home, platform, "space", "add", str(platform))
    esfis(home, platform, "remember", SECRET)
    esfis(home, platform, "recall", "staging database password", "--run", "task-7")
    refused = esfis(
        home, platform, "remember", "summary of the secret", "--personal", check=False, env={"ESFIS_RUN": "task-7"}
    )
    assert refused.returncode == 4 and refused.stderr.count("\n") == 1
    assert "data_barrier" in refused.stderr and "space:acme/platform" in refused.stderr

    # The same write at a terminal: the person sees the text and the target, and says yes.
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [ESFIS_BIN, "remember", "summary of the secret", "--personal", "--run", "task-7"],
        cwd=platform,
        env=cli_env(home),
        stdin=child,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(child)
    try:
        os.write(main, b"y\n")
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(main)
    assert proc.returncode == 0, err
    assert "summary of the secret" in err and "personal" in err and "approve?" in err
    memory_id = out.strip()
    got = json.loads(esfis(home, folders["outside"], "get", memory_id, "--json").stdout)
    assert got["labels"]["from"] == ["(elsewhere)"]  # read from outside acme: the space is not named

    runs = json.loads(esfis(home, platform, "runs", "--json").stdout)["runs"]
    run = next(r for r in runs if r["name"] == "task-7")
    trail = json.loads(esfis(home, platform, "trail", run["run"], "--json").stdout)
    assert [s["kind"] for s in trail["steps"]] == ["recall", "gate", "approval_requested", "approved", "gate", "write"]
    assert "gate" in esfis(home, platform, "trail", run["run"]).stdout


def test_grants_and_trusted_sources_from_the_cli(home, folders):
    esfis(home, folders["acme"], "space", "add", str(folders["acme"]))
    esfis(home, folders["globex"], "space", "add", str(folders["globex"]))
    grant = esfis(home, folders["acme"], "grant", "add", "acme", "globex", "--until", "7d").stdout.strip()
    listed = json.loads(esfis(home, folders["acme"], "grant", "list", "--json").stdout)["grants"]
    assert [(g["id"], g["from"], g["to"]) for g in listed] == [(grant, "acme", "globex")]
    both = esfis(home, folders["acme"], "grant", "add", "acme", "globex", "--personal", check=False)
    assert both.returncode == 2 and "exactly one" in both.stderr
    missing = esfis(home, folders["acme"], "grant", "add", "acme", "initech", check=False)
    assert missing.returncode == 3
    esfis(home, folders["acme"], "grant", "revoke", grant)
    assert json.loads(esfis(home, folders["acme"], "grant", "list", "--json").stdout)["grants"] == []
    assert esfis(home, folders["acme"], "trust", "add", "github").stdout.strip() == "source:github"
    assert "source:github" in esfis(home, folders["acme"], "trust", "list").stdout
    esfis(home, folders["acme"], "trust", "remove", "source:github")
    bad = esfis(home, folders["acme"], "trust", "add", "space:globex", check=False)
    assert bad.returncode == 2 and "origin mark" in bad.stderr


def test_without_a_terminal_nobody_is_asked(home, folders):
    esfis(home, folders["acme"], "space", "add", str(folders["acme"]))
    esfis(home, folders["acme"], "remember", "acme signs releases with sigstore")
    esfis(home, folders["acme"], "recall", "release signing", "--run", "r")
    done = subprocess.run(
        [ESFIS_BIN, "remember", "sigstore", "--personal", "--run", "r"],
        cwd=folders["acme"],
        env=cli_env(home),
        input="y\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 4 and "approve?" not in done.stderr


def test_cli_renderings_escape_control_characters(home, folders):
    """``recall``, ``get`` and ``open`` print a memory text with every control character escaped,
    so a text cannot rewrite the terminal; ``--json`` stays JSON, exact."""
    acme = folders["acme"]
    esfis(home, acme, "space", "add", str(acme))
    text = "deploys freeze on friday\r\x1b[2K\x1b]0;owned\x07 all clear\u202e"
    memory_id = esfis(home, acme, "remember", text).stdout.strip()
    ref = esfis(home, acme, "share", memory_id).stdout.strip()
    outputs = [
        esfis(home, acme, "recall", "deploys freeze friday").stdout,
        esfis(home, acme, "get", memory_id).stdout,
        esfis(home, acme, "open", ref).stdout,
    ]
    for out in outputs:
        assert not any(c in out for c in ("\r", "\x1b", "\x07", "\u202e")), repr(out)
        assert "\\x1b[2K" in out and "all clear" in out
    assert json.loads(esfis(home, acme, "get", memory_id, "--json").stdout)["text"] == text


def test_origin_marks_are_labels_on_the_cli(home, folders):
    """``--labels`` is the one name of origin marks (as over HTTP and MCP; the old ``--label`` is
    gone from the help). A bare mark reads ``source:…``; both ride on the memory, as ``get`` shows."""
    platform = folders["acme/platform"]
    assert "--label MARK" not in esfis(home, platform, "remember", "--help").stdout
    esfis(home, platform, "space", "add", str(platform))
    named = esfis(home, platform, "remember", "the deploy bot posts in #ops", "--labels", "source:slack").stdout.strip()
    bare = esfis(home, platform, "remember", "a vendor mailed the new rates", "--labels", "email").stdout.strip()
    for memory_id, mark in ((named, "source:slack"), (bare, "source:email")):
        got = json.loads(esfis(home, platform, "get", memory_id, "--json").stdout)
        assert mark in got["labels"]["origin"], got["labels"]
    # The old name is refused, not read as an abbreviation of the new one, and nothing is written;
    # no option is abbreviated.
    for argv in (("--label", "slack"), ("--lab", "slack")):
        refused = esfis(home, platform, "remember", "a note with its mark misnamed", *argv, check=False)
        assert refused.returncode == 2 and f"unrecognized arguments: {argv[0]}" in refused.stderr, refused.stderr
    assert "misnamed" not in esfis(home, platform, "recall", "a note with its mark misnamed").stdout
