"""Bad input: one line on stderr naming the problem, a non-zero exit, nothing stored changed.
These run the installed ``esfis`` command as a real process."""

from __future__ import annotations

import subprocess

import pytest

from tests.catalogs import catalog_rows, settings_for
from tests.conftest import ESFIS_BIN, cli_env


def esfis(home, cwd, *argv, env=None):
    proc = subprocess.run(
        [ESFIS_BIN, *argv], cwd=cwd, env=env or cli_env(home), capture_output=True, text=True, timeout=120
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def stocked(home, folders, real_embedder):
    """A store with one memory in acme, written through the library (fast)."""
    from server.facade import open_service

    svc = open_service(settings_for(home), embedder=real_embedder)
    svc.operator.add_space(folders["acme"])
    svc.remember(svc.caller("cli", cwd=folders["acme"]), "acme uses postgres")
    svc.close()
    return home


def state(home):
    return (
        catalog_rows(home, "SELECT id, space, valid_until, superseded_by, forgotten_at FROM memories ORDER BY id"),
        catalog_rows(home, "SELECT * FROM spaces ORDER BY name"),
        catalog_rows(home, "SELECT * FROM policies ORDER BY ai"),
    )


CASES = [
    pytest.param(["remember", ""], "text is empty", id="empty-text"),
    pytest.param(["remember", "   \n\t"], "text is empty or blank", id="blank-text"),
    pytest.param(["remember", "x" * (32 * 1024 + 1)], "limit is 32768 bytes", id="text-over-32KiB"),
    pytest.param(["recall", ""], "query is empty", id="empty-query"),
    pytest.param(["recall", "q" * 5000], "limit is 4096 bytes", id="query-over-4KiB"),
    pytest.param(["recall", "x", "--limit", "0"], "--limit must be an integer from 1 to 100", id="limit-0"),
    pytest.param(["recall", "x", "--limit", "101"], "--limit must be an integer from 1 to 100", id="limit-101"),
    pytest.param(["recall", "x", "--limit", "ten"], "--limit must be an integer", id="limit-word"),
    pytest.param(["recall", "x", "--space", "Acme"], "invalid space name 'Acme'", id="space-upper"),
    pytest.param(["recall", "x", "--space", "acme/../globex"], "invalid space name", id="space-dotdot"),
    pytest.param(["recall", "x", "--space", "acme//x"], "invalid space name", id="space-empty-segment"),
    pytest.param(["recall", "x", "--space", "/acme"], "invalid space name", id="space-leading-slash"),
    pytest.param(["recall", "x", "--space", "acme/"], "invalid space name", id="space-trailing-slash"),
    pytest.param(["recall", "x", "--space", "аcme"], "invalid space name", id="space-cyrillic-lookalike"),
    pytest.param(["recall", "x", "--space", "a" * 64], "invalid space name", id="space-segment-too-long"),
    pytest.param(["recall", "x", "--space", "/".join("a" * 9)], "invalid space name", id="space-nine-segments"),
    pytest.param(["recall", "x", "--space", "initech"], "no space named 'initech'", id="space-unknown"),
    pytest.param(["forget", "12345"], "malformed memory id", id="id-malformed"),
    pytest.param(
        ["forget", "mem_aaaaaaaaaaaaaaaaaaaaaaaaaa"], "no memory mem_aaaaaaaaaaaaaaaaaaaaaaaaaa", id="id-unknown"
    ),
    pytest.param(["replace", "mem_aaaaaaaaaaaaaaaaaaaaaaaaaa", ""], "no memory", id="replace-unknown"),
    pytest.param(
        ["remember", "x", "--valid-until", "tomorrowish"], "valid_until must be an ISO 8601 time", id="bad-time"
    ),
    pytest.param(["remember", "x", "--valid-until", "2001-01-01T00:00:00Z"], "must lie in the future", id="past-time"),
    pytest.param(["--deny", "Cursor", "acme"], "invalid AI name 'Cursor'", id="ai-upper"),
    pytest.param(["--deny", "cursor", "initech"], "no space named 'initech'", id="policy-unknown-space"),
    pytest.param(["space", "remove", "acme"], "holds 1 memory;", id="remove-nonempty-space"),
    pytest.param(["remember", "x", "--ai", "bad name"], "invalid AI name", id="ai-space"),
    pytest.param(["--why", "99"], "no delivery 99", id="why-unknown"),
    pytest.param(["policy", "clear", "cursor", "acme"], "no rule for cursor in acme", id="clear-missing-rule"),
]


@pytest.mark.parametrize("argv, message", CASES)
def test_bad_input_one_line_nonzero_nothing_changed(stocked, folders, argv, message):
    before = state(stocked)
    code, out, err = esfis(stocked, folders["acme"], *argv)
    assert code != 0
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("esfis: error: "), err
    assert message in err
    assert state(stocked) == before


def test_remember_outside_every_space_says_how_to_fix_it(stocked, folders):
    code, _, err = esfis(stocked, folders["outside"], "remember", "a loose fact")
    assert code != 0 and "stands in no space" in err and "personal" in err


@pytest.mark.parametrize("vectors", ["gs://bucket/esfis", "s3://", "s3:///prefix", "/tmp/elsewhere", "s3://A_B/x"])
def test_esfis_vectors_that_is_not_an_s3_prefix_is_refused_by_name(home, vectors):
    from indexing.embedding.testing import HashingEmbedder
    from server.errors import StoreUnavailable
    from server.facade import open_service
    from tests.catalogs import settings_for

    with pytest.raises(StoreUnavailable, match="ESFIS_VECTORS must be s3://bucket/prefix"):
        open_service(settings_for(home, vectors=vectors), embedder=HashingEmbedder())
    assert not (home / "vectors").exists() or not any((home / "vectors").glob("p.*"))
