"""Bulk import (``esfis import``, ``server.bulk.importer``): bad rows reported by line while the rest go
in, re-runs that add nothing twice, Parquet, precomputed vectors, and a killed import that a
re-run completes with every row present exactly once. The rows of ``import --restore`` are
judged the same way: a NUL anywhere, or a control character outside the text, is that line's
error on both catalogs, and the good rows of its batch go in."""

from __future__ import annotations

import io
import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from indexing.embedding.testing import HashingEmbedder
from indexing.partitions.store import VectorStore
from server.bulk.importer import import_stream
from server.cli import main
from server.errors import StoreUnavailable
from server.facade import open_service
from server.spaces import partition_key
from tests.catalogs import catalog_rows as _catalog
from tests.catalogs import settings_for
from tests.conftest import ESFIS_BIN, cli_env

DIM = 384


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self, dimension: int = 64) -> None:
        super().__init__(dimension)
        self.texts: list[str] = []

    def embed_documents(self, texts):
        self.texts.extend(texts)
        return super().embed_documents(texts)


# -- the real CLI, the real model ----------------------------------------------------------


def test_cli_reports_bad_lines_by_number_and_imports_the_rest(home: Path, tmp_path: Path, real_embedder):
    svc = open_service(settings_for(home), embedder=real_embedder)
    svc.operator.create_space("acme")
    svc.close()
    source = _jsonl(
        tmp_path / "memories.jsonl",
        [
            {"text": "Acme deploys with Kubernetes on Fridays", "space": "acme"},
            "{not json",
            {"space": "acme"},
            {"text": "a bad space name", "space": "Acme Corp"},
            {"text": "Globex deploys on Mondays", "space": "globex"},
            {"text": "a bad date", "valid_until": "yesterday"},
            {"text": "a short vector", "vector": [0.1, 0.2]},
            {"text": "I prefer tabs over spaces"},
            {
                "text": "Acme's staging database is Postgres 16",
                "space": "acme",
                "key": "acme-db",
                "labels": ["source:wiki"],
            },
        ],
    )
    run = subprocess.run(
        [ESFIS_BIN, "import", str(source)], env=cli_env(home), capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 2, run.stderr
    assert run.stdout.startswith("imported 3, skipped 0, failed 6 in "), run.stdout
    errors = [line for line in run.stderr.splitlines() if line.startswith("line ")]
    assert [e.split(":")[0] for e in errors] == [f"line {n}" for n in (2, 3, 4, 5, 6, 7)]
    assert "invalid JSON" in errors[0] and "text is missing" in errors[1]
    assert "invalid space name" in errors[2] and "no space named 'globex'" in errors[3]
    assert "valid_until" in errors[4] and "vector has 2 dimensions" in errors[5]
    assert run.stderr.splitlines()[-1].startswith("esfis: error: 6 of 9 rows failed")

    svc = open_service(settings_for(home), embedder=real_embedder)
    try:
        assert [s.name for s in svc.operator.spaces()] == ["acme"]  # an import never creates spaces
        recalled = svc.recall(svc.caller("claude-code", space="acme"), "when does acme deploy to kubernetes?").memories
        assert recalled[0].text == "Acme deploys with Kubernetes on Fridays"
        assert {m.text for m in recalled} == {
            "Acme deploys with Kubernetes on Fridays",
            "I prefer tabs over spaces",
            "Acme's staging database is Postgres 16",
        }
        [db_id] = [m.id for m in recalled if m.text == "Acme's staging database is Postgres 16"]
        db = svc.get(svc.caller("cli", space="acme"), db_id)
        assert (db.ai, db.key, db.origin) == ("import", "acme-db", ("source:wiki",))
    finally:
        svc.close()

    again = subprocess.run(
        [ESFIS_BIN, "import", str(source)], env=cli_env(home), capture_output=True, text=True, timeout=300
    )
    assert again.stdout.startswith("imported 0, skipped 3, failed 6 in "), again.stdout


def test_cli_exits_zero_when_every_row_is_imported_or_skipped(home: Path, tmp_path: Path, real_embedder, capsys):
    svc = open_service(settings_for(home), embedder=real_embedder)
    svc.operator.create_space("acme")
    svc.close()
    rng = np.random.default_rng(3)
    rows = [{"text": f"fact {i}", "space": "acme", "vector": rng.standard_normal(DIM).tolist()} for i in range(5)]
    source = _jsonl(tmp_path / "ok.jsonl", rows + rows[:2])
    assert main(["import", str(source), "--batch-size", "2"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("imported 5, skipped 2, failed 0 in ") and err == ""


# -- re-runs --------------------------------------------------------------------------------


def test_a_rerun_adds_nothing_twice_by_key_or_by_text(fake_service):
    fake_service.operator.create_space("acme")
    rows = [
        {"text": "Acme bills monthly", "space": "acme", "key": "billing"},
        {"text": "Acme uses Auth0", "space": "acme", "key": "auth"},
        {"text": "Acme's CI is GitHub Actions", "space": "acme"},
        {"text": "Acme's CI is GitHub Actions", "space": "acme"},  # a repeat inside the file
        {"text": "Acme's CI is GitHub Actions"},  # the same text in another space is another memory
    ]
    lines = [json.dumps(r) for r in rows]
    first = import_stream(fake_service._parts, lines, batch_size=2)
    assert (first.imported, first.skipped, first.failed) == (4, 1, 0)
    second = import_stream(fake_service._parts, lines)
    assert (second.imported, second.skipped, second.failed) == (0, 5, 0)

    changed = [
        {"text": "Acme bills quarterly now", "space": "acme", "key": "billing"},  # a known key: never updated
        {"text": "Acme uses Auth0", "space": "acme"},  # a known text (first imported under a key)
        {"text": "Acme uses Auth0", "space": "acme", "key": "auth-v2"},  # a new key: a new memory
    ]
    third = import_stream(fake_service._parts, [json.dumps(r) for r in changed])
    assert (third.imported, third.skipped) == (1, 2)
    assert _catalog(fake_service.home, "SELECT count(*) FROM memories")[0][0] == 5


def test_a_forgotten_memory_is_not_present_and_can_be_imported_again(fake_service):
    lines = [json.dumps({"text": "the wifi password is in the vault", "key": "wifi"})]
    assert import_stream(fake_service._parts, lines).imported == 1
    caller = fake_service.caller("cli")
    [memory] = fake_service.recall(caller, "wifi password").memories
    fake_service.forget(caller, memory.id)
    assert import_stream(fake_service._parts, lines).imported == 1


# -- per-row errors -------------------------------------------------------------------------

BAD_ROWS = [
    pytest.param('{"text": ', "invalid JSON", id="invalid-json"),
    pytest.param('{"text": "cut" "short"', "invalid JSON: Expecting ',' delimiter (column 16)", id="json-column"),
    pytest.param('{"text": "cut"\n', "invalid JSON: Expecting ',' delimiter (at the end of the line)", id="json-cut"),
    pytest.param("[1, 2]", "JSON object", id="not-an-object"),
    pytest.param({"space": "acme"}, "text is missing", id="missing-text"),
    pytest.param({"text": "   "}, "empty or blank", id="blank-text"),
    pytest.param('{"text": "half a pair \\ud800"}', "not valid Unicode", id="lone-surrogate-text"),
    pytest.param('{"text": "t", "key": "\\udfff"}', "not valid Unicode", id="lone-surrogate-key"),
    pytest.param({"text": "x" * (33 * 1024)}, "the limit is 32768 bytes", id="text-too-long"),
    pytest.param({"text": "t", "space": "globex"}, "no space named 'globex'", id="unknown-space"),
    pytest.param({"text": "t", "space": "acme/"}, "invalid space name", id="bad-space-name"),
    pytest.param({"text": "t", "valid_from": "soon"}, "valid_from must be an ISO 8601", id="bad-valid-from"),
    pytest.param({"text": "t", "valid_until": 12}, "valid_until must be an ISO 8601", id="number-date"),
    pytest.param(
        {"text": "t", "valid_from": "2026-01-02", "valid_until": "2026-01-01"},
        "valid_until must be after valid_from",
        id="until-before-from",
    ),
    pytest.param({"text": "t", "labels": "source:slack"}, "labels must be a list", id="bad-labels"),
    pytest.param({"text": "t", "key": 7}, "key must be a string", id="bad-key"),
    # A NUL anywhere is that row's error, on SQLite as on PostgreSQL (whose text refuses it).
    pytest.param({"text": "t", "key": "a\x00b"}, "key holds a NUL", id="nul-in-key"),
    pytest.param({"text": "t\x00"}, "text holds a NUL", id="nul-in-text"),
    pytest.param({"text": "t", "labels": ["source:slack\x00"]}, "source:", id="nul-in-label"),
    pytest.param({"text": "t", "space": "acme\x00"}, "invalid space name", id="nul-in-space"),
    pytest.param({"text": "t", "valid_from": "2026-01-01\x00"}, "valid_from must be an ISO 8601", id="nul-in-time"),
    pytest.param({"text": "t", "te\x00xt": "t"}, "unknown field", id="nul-in-field-name"),
    # Nor a control character, but in the text (whose tabs and newlines are its own).
    pytest.param({"text": "t", "key": "a\x1b[2Jb"}, "key holds a control character (U+001B)", id="escape-in-key"),
    pytest.param({"text": "t", "key": "a\x7f"}, "key holds a control character (U+007F)", id="delete-in-key"),
    pytest.param({"text": "t", "key": "a\x85"}, "key holds a control character (U+0085)", id="c1-in-key"),
    pytest.param(
        {"text": "t", "valid_from": "2026-01-01\n"}, "valid_from holds a control character", id="newline-in-time"
    ),
    pytest.param({"text": "t", "valid_until": "7d\t"}, "valid_until holds a control character", id="tab-in-duration"),
    pytest.param(
        {"text": "t", "vector": [0.5] * 63},
        "vector has 63 dimensions; this store's vectors have 64",
        id="wrong-dimension",
    ),
    pytest.param({"text": "t", "vector": ["0.5"] * 64}, "list of numbers", id="vector-of-strings"),
    pytest.param({"text": "t", "vector": [0.0] * 64}, "not be all zeros", id="zero-vector"),
    pytest.param({"text": "t", "valid_untill": "7d"}, "unknown field(s) 'valid_untill'", id="unknown-field"),
    pytest.param('{"text": "t", "vector": [NaN' + ", 0.5" * 63 + "]}", "finite numbers", id="nan-in-vector"),
    pytest.param('{"text": "t", "vector": [1e400' + ", 0.5" * 63 + "]}", "finite numbers", id="overflow-in-vector"),
    pytest.param(
        '{"text": "t", "labels": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply", id="nested-too-deeply"
    ),
]


@pytest.mark.parametrize("bad, reason", BAD_ROWS)
def test_a_bad_row_is_that_lines_error_and_the_rest_go_in(fake_service, bad, reason):
    fake_service.operator.create_space("acme")
    lines = [
        json.dumps({"text": "before", "space": "acme"}),
        bad if isinstance(bad, str) else json.dumps(bad),
        json.dumps({"text": "after"}),
    ]
    report = import_stream(fake_service._parts, lines)
    assert (report.imported, report.skipped, report.failed) == (2, 0, 1)
    assert report.errors[0][0] == 2 and reason in report.errors[0][1], report.errors
    assert [s.name for s in fake_service.operator.spaces()] == ["acme"]


def test_a_text_keeps_its_tabs_and_newlines(fake_service):
    report = import_stream(fake_service._parts, [json.dumps({"text": "step 1\tbuild\nstep 2\ttest"})])
    assert (report.imported, report.failed) == (1, 0), report.errors


# -- per-row errors of import --restore -------------------------------------------------------


def _restored(n: int, **changes: object) -> dict:
    """An export line (``server.bulk.export``) of acme, with ``changes`` at dotted paths."""
    row: dict = {
        "id": "mem_" + "a" * 25 + "bcdefghijklmnopqrstuvwxyz234567"[n],
        "space": "acme",
        "text": f"restored fact {n}",
        "labels": {"space": "acme", "origin": ["source:slack"], "run": "run_" + "0" * 24, "from": []},
        "valid_from": "2026-01-01T00:00:00Z",
        "valid_until": None,
        "created_at": "2026-01-01T00:00:00Z",
        "ai": "claude-code",
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        where = row
        for name in parents:
            where = where[name]
        where[last] = value
    return row


BAD_RESTORED_ROWS = [
    # PostgreSQL's text refuses a NUL: one in labels.run ended the whole restore, good rows and all.
    pytest.param({"labels__run": "run_" + "0" * 23 + "\x00"}, "labels.run must be", id="nul-in-run"),
    pytest.param({"labels__run": "run_\x1b[31m" + "0" * 19}, "labels.run must be", id="escape-in-run"),
    pytest.param({"labels__run": "task-7"}, "labels.run must be null or a run id", id="run-not-a-run-id"),
    pytest.param({"labels__run": "RUN_" + "0" * 24}, "labels.run must be", id="run-in-capitals"),
    pytest.param({"labels__run": 7}, "labels.run must be", id="run-not-a-string"),
    pytest.param({"text": "restored\x00"}, "text holds a NUL", id="nul-in-text"),
    pytest.param({"ai": "claude\x00code"}, "invalid AI name", id="nul-in-ai"),
    pytest.param({"id": "mem_" + "a" * 25 + "\x00"}, "malformed memory id", id="nul-in-id"),
    pytest.param({"space": "acme\x00", "labels__space": "acme\x00"}, "invalid space name", id="nul-in-space"),
    pytest.param({"labels__origin": ["source:slack\x00"]}, "origin mark", id="nul-in-origin"),
    pytest.param({"labels__from": ["acme\x1b"]}, "invalid space name", id="escape-in-from"),
    pytest.param({"labels__note\x00": "x"}, "unknown label(s) 'note\\x00'", id="nul-in-label-name"),
    pytest.param({"labels__digest": "0" * 63 + "\x00"}, "labels.digest is not the sha256", id="nul-in-digest"),
    pytest.param(
        {"created_at": "2026-01-01T00:00:00Z\n"}, "created_at holds a control character", id="newline-in-time"
    ),
    pytest.param({"valid_until": "2099-01-01\x00"}, "valid_until", id="nul-in-valid-until"),
]


@pytest.mark.parametrize("changes, reason", BAD_RESTORED_ROWS)
def test_a_bad_restored_row_is_that_lines_error_and_the_rest_of_its_batch_goes_in(fake_service, changes, reason):
    fake_service.operator.create_space("acme")
    lines = [_restored(0), _restored(1, **changes), _restored(2)]
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    report = fake_service.operator.import_restore(io.BytesIO(body))
    assert (report.imported, report.skipped, report.failed) == (2, 0, 1), report.errors
    assert report.errors[0][0] == 2 and reason in report.errors[0][1], report.errors
    for good in (lines[0], lines[2]):
        memory = fake_service._parts.memories.load(good["id"])
        assert memory is not None and memory.text == good["text"] and memory.run_id == good["labels"]["run"]


def test_lines_are_numbered_as_an_editor_numbers_them(fake_service):
    lines = [b"", json.dumps({"text": "a"}).encode(), b"  ", b"\xff\xfe", b"{}"]
    report = import_stream(fake_service._parts, lines)
    assert report.imported == 1
    assert report.errors == [(4, "not UTF-8 (byte 0)"), (5, "text is missing")]


def test_errors_kept_are_capped_but_all_are_counted(fake_service):
    report = import_stream(fake_service._parts, ["nope"] * 1500)
    assert report.failed == 1500 and len(report.errors) == 1000


# -- embedding ------------------------------------------------------------------------------


def test_precomputed_vectors_skip_embedding_and_a_text_is_embedded_once(home: Path, clock):
    embedder = CountingEmbedder()
    svc = open_service(settings_for(home), embedder=embedder, clock=clock)
    try:
        rng = np.random.default_rng(1)
        with_vectors = [
            json.dumps({"text": f"migrated {i}", "vector": rng.standard_normal(64).tolist()}) for i in range(20)
        ]
        assert import_stream(svc._parts, with_vectors, batch_size=7).imported == 20
        assert embedder.texts == []

        same_text = [json.dumps({"text": "the same words", "key": f"k{i}"}) for i in range(20)]
        assert import_stream(svc._parts, same_text, batch_size=7).imported == 20  # distinct keys: 20 memories
        assert embedder.texts == ["the same words"]  # one embedding, reused within and across batches
    finally:
        svc.close()


def test_a_precomputed_vector_is_stored_at_unit_length(fake_service):
    vector = [3.0] + [0.0] * 63
    import_stream(fake_service._parts, [json.dumps({"text": "east", "vector": vector})])
    [hit] = fake_service.recall(fake_service.caller("cli"), "east").memories
    stored = fake_service._parts.store.vector(partition_key(None), hit.id)
    assert np.allclose(stored, [1.0] + [0.0] * 63)


# -- Parquet --------------------------------------------------------------------------------


def test_parquet_rows_import_like_json_lines(home: Path, tmp_path: Path, real_embedder, capsys):
    svc = open_service(settings_for(home), embedder=real_embedder)
    svc.operator.create_space("acme")
    invoice = "Acme pays invoices on the 5th of each month"
    invoice_vector = real_embedder.embed_documents([invoice])[0]
    table = pa.table(
        {
            "text": [invoice, "I like green tea", "a three-number vector", invoice, "Acme's VPN is WireGuard"],
            "space": ["acme", None, None, "acme", "acme"],
            "key": ["invoices", None, None, "invoices", None],
            "labels": [["source:erp"], None, None, None, []],
            "valid_until": pa.array(
                [datetime(2030, 1, 1, tzinfo=UTC), None, None, None, None], type=pa.timestamp("us", tz="UTC")
            ),
            "vector": pa.array(
                [invoice_vector.tolist(), None, [1.0, 2.0, 3.0], invoice_vector.tolist(), None],
                type=pa.list_(pa.float32()),
            ),
        }
    )
    path = tmp_path / "memories.parquet"
    pq.write_table(table, path, row_group_size=3)
    svc.close()

    assert main(["import", str(path), "--batch-size", "2"]) == 2
    out, err = capsys.readouterr()
    assert out.startswith("imported 3, skipped 1, failed 1 in "), out
    assert "line 3: vector has 3 dimensions; this store's vectors have 384" in err

    svc = open_service(settings_for(home), embedder=real_embedder)
    try:
        caller = svc.caller("claude-code", space="acme")
        recalled = svc.recall(caller, "when does acme pay its bills?").memories
        assert recalled[0].text == invoice
        memory = svc.get(caller, recalled[0].id)
        assert memory.key == "invoices" and memory.origin == ("source:erp",)
        assert memory.valid_until.isoformat() == "2030-01-01T00:00:00+00:00"
        assert np.allclose(svc._parts.store.vector(partition_key("acme"), memory.id), invoice_vector, atol=1e-6)
        assert "I like green tea" in {m.text for m in svc.recall(caller, "favourite drink").memories}
    finally:
        svc.close()


def test_a_parquet_file_with_an_unknown_column_is_refused_whole(home: Path, tmp_path: Path, capsys):
    path = tmp_path / "odd.parquet"
    pq.write_table(pa.table({"text": ["a"], "body": ["b"]}), path)
    assert main(["import", str(path)]) == 2
    assert "unknown column(s) 'body'" in capsys.readouterr().err


# -- killed and resumed ---------------------------------------------------------------------

BASES = [
    "Acme's production database runs on Postgres 16",
    "Acme deploys to Kubernetes every Friday afternoon",
    "Acme's on-call rotation changes every Monday",
    "The Acme billing service retries failed payments three times",
    "I take my coffee black with no sugar",
    "My favourite editor is Neovim with a dark theme",
]


def test_a_killed_import_reruns_to_completion_with_each_row_once(home: Path, tmp_path: Path, real_embedder):
    svc = open_service(settings_for(home), embedder=real_embedder)
    svc.operator.create_space("acme")
    svc.close()
    vectors = real_embedder.embed_documents(BASES)
    rng = np.random.default_rng(11)
    rows = []
    for i in range(4000):
        base = i % len(BASES)
        noisy = vectors[base] + rng.normal(0, 0.01, DIM)
        rows.append(
            {
                "text": f"{BASES[base]} (note {i})",
                "space": "acme" if base < 4 else None,
                "key": f"row-{i}",
                "vector": noisy.round(5).tolist(),
            }
        )
    source = _jsonl(tmp_path / "big.jsonl", rows)

    command = [ESFIS_BIN, "import", str(source), "--batch-size", "50"]
    victim = subprocess.Popen(command, env=cli_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    written = 0
    while time.monotonic() < deadline and victim.poll() is None:
        try:
            written = _catalog(home, "SELECT count(*) FROM memories")[0][0]
        except (sqlite3.OperationalError, StoreUnavailable):  # not made yet
            written = 0
        if written >= 800:
            break
        time.sleep(0.01)
    victim.send_signal(signal.SIGKILL)
    victim.communicate()
    assert victim.returncode == -signal.SIGKILL
    partial = _catalog(home, "SELECT count(*) FROM memories")[0][0]
    assert 0 < partial < len(rows), "the kill must land mid-way"

    rerun = subprocess.run(command, env=cli_env(home), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.startswith(f"imported {len(rows) - partial}, skipped {partial}, failed 0"), rerun.stdout

    keys = _catalog(home, "SELECT key, count(*) FROM memories GROUP BY key")
    assert len(keys) == len(rows) and all(n == 1 for _, n in keys)
    store = VectorStore(home / "vectors", model=real_embedder.name, dimension=DIM)
    stored = store.row_ids(partition_key("acme")) + store.row_ids(partition_key(None))
    assert len(stored) == len(set(stored)) == len(rows)  # no orphan, no duplicate vector
    assert not list((home / "imports").glob("pending-*"))

    svc = open_service(settings_for(home), embedder=real_embedder)
    try:
        recalled = svc.recall(svc.caller("claude-code", space="acme"), "which database does acme use?", limit=5)
        assert all(m.text.startswith(BASES[0]) for m in recalled.memories)
    finally:
        svc.close()


CRASH_BETWEEN_VECTORS_AND_CATALOG = """
import os, signal, sys
import numpy as np
from pathlib import Path
from indexing.embedding.testing import HashingEmbedder
from server.bulk.journal import Journal
from server.memories.input import NewMemory, new_id
from server.facade import open_service
from server.settings import Settings

home = Path(sys.argv[1])
svc = open_service(Settings(home=home, model=None, catalog=os.environ.get("ESFIS_CATALOG")), embedder=HashingEmbedder())
now = svc.clock()
memories = [NewMemory(id=new_id(), space=None, text=f"half-written {i}", vector=np.eye(64, dtype=np.float32)[i],
                      ai="import", created_at=now, valid_from=now, valid_until=None) for i in range(3)]
journal = Journal.open(home, svc._parts.catalog, svc._parts.store)
journal.pending({"personal": [m.id for m in memories]})
svc._parts.store.add("personal", [m.row() for m in memories])  # the vectors, and then the kill: no catalog
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_vectors_of_an_import_killed_before_its_commit_are_purged_by_the_next(home: Path, fake_service):
    fake_service.close()
    crashed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CRASH_BETWEEN_VECTORS_AND_CATALOG), str(home)],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    store = VectorStore(home / "vectors", model="hashing-test", dimension=64)
    assert len(store.row_ids("personal")) == 3  # orphans: vectors no catalog entry names

    svc = open_service(settings_for(home), embedder=HashingEmbedder())
    try:
        assert svc.recall(svc.caller("cli"), "half-written 1").memories == []  # recall ignores them
        report = import_stream(svc._parts, [json.dumps({"text": "half-written 1"})])
        assert report.imported == 1
        fresh = VectorStore(home / "vectors", model="hashing-test", dimension=64)
        assert [fresh.text("personal", i) for i in fresh.row_ids("personal")] == ["half-written 1"]
        assert not list((home / "imports").glob("pending-*"))
    finally:
        svc.close()


def test_two_imports_of_the_same_rows_at_once_add_each_row_once(fake_service):
    import threading

    lines = [json.dumps({"text": f"shared {i}", "key": f"k{i}" if i % 2 else None}) for i in range(600)]
    lines = [json.dumps({k: v for k, v in json.loads(line).items() if v is not None}) for line in lines]
    reports = []
    threads = [
        threading.Thread(target=lambda: reports.append(import_stream(fake_service._parts, lines, batch_size=37)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(r.imported for r in reports) == 600
    assert sum(r.skipped for r in reports) == 600
    assert _catalog(fake_service.home, "SELECT count(*) FROM memories")[0][0] == 600


def test_repeats_in_neighbouring_batches_go_in_once_while_batches_overlap(fake_service):
    # Batch n+1 is checked while batch n is still being written: its repeats of batch n's rows
    # are caught by the last check, under the lock, against the rows written since.
    fake_service.operator.create_space("acme")
    rows = []
    for i in range(400):
        rows.append({"text": f"fact {i}", "space": "acme"})
        rows.append({"text": f"keyed fact {i}", "space": "acme", "key": f"key-{i}"})
        if i >= 3:  # the same text and the same key again, a batch or two later
            rows.append({"text": f"fact {i - 3}", "space": "acme"})
            rows.append({"text": f"another text, known key {i - 3}", "space": "acme", "key": f"key-{i - 3}"})
    report = import_stream(fake_service._parts, [json.dumps(r) for r in rows], batch_size=3)
    assert (report.imported, report.failed) == (800, 0)
    assert report.skipped == len(rows) - 800
    assert _catalog(fake_service.home, "SELECT count(*) FROM memories")[0][0] == 800
    assert _catalog(fake_service.home, "SELECT count(DISTINCT digest) FROM memories")[0][0] == 800


def test_a_text_counts_as_present_only_when_a_memory_holds_it(fake_service):
    # A keyed row that is already present writes nothing: a keyless row with its text, in the
    # same batch, is then new unless some memory has that text. Either order, the same answer.
    for space in ("acme", "globex"):
        fake_service.operator.create_space(space)
        assert (
            import_stream(
                fake_service._parts, [json.dumps({"text": "bills monthly", "space": space, "key": "billing"})]
            ).imported
            == 1
        )
    rows = [
        {"text": "bills quarterly", "key": "billing"},  # a known key: skipped
        {"text": "bills quarterly"},  # no memory says this yet: imported
        {"text": "CI is GitHub Actions", "key": "ci"},  # a new key: imported
        {"text": "CI is GitHub Actions"},  # its text goes in beside it: skipped
    ]
    for space, order in (("acme", rows), ("globex", rows[::-1])):
        report = import_stream(fake_service._parts, [json.dumps({**r, "space": space}) for r in order])
        assert (report.imported, report.skipped) == (2, 2), space
        again = import_stream(fake_service._parts, [json.dumps({**r, "space": space}) for r in order])
        assert (again.imported, again.skipped) == (0, 4), space
    assert _catalog(fake_service.home, "SELECT count(*) FROM memories")[0][0] == 6


def test_a_failed_write_stops_the_import_and_leaves_no_vector_behind(fake_service, monkeypatch):
    # The third batch's vectors reach disk, then the write fails, and so does its own clean-up:
    # no later batch may be written (it would also wipe the journal that names those vectors),
    # and closing the import purges them.
    store = fake_service._parts.store
    real_add, real_purge = store.add_many, store.purge  # an import's batch writes its partitions in one call
    calls = {"add": 0, "purge": 0}

    def add(batches):
        calls["add"] += 1
        real_add(batches)
        if calls["add"] == 3:
            raise OSError("disk full")

    def purge(key, ids, **how):
        calls["purge"] += 1
        if calls["purge"] == 1:
            raise OSError("disk still full")
        real_purge(key, ids, **how)

    monkeypatch.setattr(store, "add_many", add)
    monkeypatch.setattr(store, "purge", purge)
    lines = [json.dumps({"text": f"note {i}"}) for i in range(200)]
    with pytest.raises(OSError, match="disk full"):
        import_stream(fake_service._parts, lines, batch_size=10)
    written = _catalog(fake_service.home, "SELECT count(*) FROM memories")[0][0]
    assert written == 20 and calls["add"] == 3  # batches 1 and 2; nothing after the failed one
    assert sorted(store.row_ids("personal")) == sorted(
        r[0] for r in _catalog(fake_service.home, "SELECT id FROM memories")
    )
    assert not list((fake_service.home / "imports").glob("pending-*"))


@pytest.mark.parametrize(
    "bad, reason",
    [
        pytest.param({"text": "t", "vector": [1, [2], 3] + [0.5] * 61}, "list of numbers", id="ragged-vector"),
        pytest.param({"text": "t", "valid_until": "999999999d"}, "past the year 9999", id="duration-overflow"),
        pytest.param(
            {"text": "t", "valid_until": "9999-12-31T23:59:59-01:00"}, "past the year 9999", id="date-overflow"
        ),
    ],
)
def test_values_past_what_python_holds_are_that_rows_error(fake_service, bad, reason):
    report = import_stream(fake_service._parts, [json.dumps({"text": "fine"}), json.dumps(bad)])
    assert (report.imported, report.failed) == (1, 1)
    assert reason in report.errors[0][1]


def test_the_same_rows_in_two_spaces_go_into_each_while_batches_overlap(fake_service):
    # The checks for what is present look inside one space only: a text or key in acme never
    # makes a globex row look present, however the batches fall.
    for space in ("acme", "globex"):
        fake_service.operator.create_space(space)
    rows = []
    for i in range(300):
        rows.append({"text": f"fact {i}", "space": "acme"})
        rows.append({"text": f"keyed {i}", "space": "acme", "key": f"key-{i}"})
        if i >= 2:  # the same text and key in the other space, a batch or two later
            rows.append({"text": f"fact {i - 2}", "space": "globex"})
            rows.append({"text": f"keyed {i - 2}", "space": "globex", "key": f"key-{i - 2}"})
    report = import_stream(fake_service._parts, [json.dumps(r) for r in rows], batch_size=3)
    assert (report.imported, report.skipped, report.failed) == (len(rows), 0, 0)
    per_space = dict(_catalog(fake_service.home, "SELECT space, count(*) FROM memories GROUP BY space"))
    assert per_space == {"acme": 600, "globex": 596}
