"""POST /v1/backup: an operator's backup of a running server's home, into a folder on the
server's machine (absolute, absent or empty), restorable by ``esfis restore``; agents are
refused, and so are relative and non-empty targets."""

from __future__ import annotations

import json
import secrets
import subprocess

from http_support import error_of, remember

from tests import catalogs
from tests.conftest import cli_env
from tests.http.conftest import ESFIS_BIN


def restore_env(server, restored) -> dict[str, str]:
    """The restored home's environment. On PostgreSQL a restore goes into an empty database of
    its own, under the source's schema name (docs/backup.md)."""
    env = cli_env(restored)
    source = server.env.get("ESFIS_CATALOG")
    if source is not None:
        assert catalogs.CLUSTER is not None
        name = "http_restore_" + secrets.token_hex(4)
        catalogs.CLUSTER._admin.execute(f"CREATE DATABASE {name}")
        env["ESFIS_CATALOG"] = catalogs.CLUSTER.url(name, source.rsplit("%3D", 1)[1])
    return env


def test_an_operator_backs_up_a_running_server_and_it_restores(server, operator, agent, tmp_path):
    remember(agent, "Acme authentication uses Auth0", space="acme")
    response = operator.post("/v1/backup", json={"path": str(tmp_path / "backup")})
    assert response.status_code == 201, response.text
    report = response.json()
    assert report["memories"] >= 1 and report["path"] == str(tmp_path / "backup")
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert manifest["memories"] == report["memories"]
    restored = tmp_path / "restored"
    env = restore_env(server, restored)
    done = subprocess.run(
        [ESFIS_BIN, "restore", str(tmp_path / "backup")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    listed = subprocess.run(
        [ESFIS_BIN, "space", "list", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert {s["name"] for s in json.loads(listed.stdout)["spaces"]} >= {"acme", "globex"}


def test_backup_refuses_agents_relative_paths_and_busy_folders(operator, agent, tmp_path):
    refused = agent.post("/v1/backup", json={"path": str(tmp_path / "b")})
    assert refused.status_code == 403 and error_of(refused)
    relative = operator.post("/v1/backup", json={"path": "relative/b"})
    assert relative.status_code == 422 and error_of(relative)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("mine")
    busy = operator.post("/v1/backup", json={"path": str(tmp_path / "busy")})
    assert busy.status_code == 422 and "not empty" in error_of(busy)["message"]
    assert not (tmp_path / "b").exists()
