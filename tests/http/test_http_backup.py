"""POST /v1/backup: an operator's backup of a running server's home, into a folder on the
server's machine (absolute, absent or empty), restorable by ``esfis restore``; agents are
refused, and so are relative paths, paths through a link or inside the home (422), folders
holding anything else (409), and a backup into a folder another backup is writing (409)."""

from __future__ import annotations

import json
import secrets
import subprocess
import threading

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
        [ESFIS_BIN, "restore", str(tmp_path / "backup"), "--key-file", str(server.home / "backup.key")],
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
    assert busy.status_code == 409 and error_of(busy)["code"] == "folder_not_empty"
    assert "not empty" in error_of(busy)["message"]
    assert not (tmp_path / "b").exists()


def test_backup_refuses_a_folder_holding_incomplete_that_no_backup_marked(operator, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "INCOMPLETE").write_text("not a backup's")
    (mine / "photos.tar").write_text("everything else")
    refused = operator.post("/v1/backup", json={"path": str(mine)})
    assert refused.status_code == 409 and error_of(refused)["code"] == "folder_not_empty"
    assert sorted(p.name for p in mine.iterdir()) == ["INCOMPLETE", "photos.tar"]


def test_backup_refuses_links_and_the_home_with_a_clear_error(server, operator, tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    for path, says in [
        (tmp_path / "link", "symbolic link"),
        (tmp_path / "link" / "b", "symbolic link"),
        (server.home / "vectors", "inside ESFIS_HOME"),
        (server.home / "vectors" / "b", "inside ESFIS_HOME"),
        (server.home.parent, "holds ESFIS_HOME"),
    ]:
        refused = operator.post("/v1/backup", json={"path": str(path)})
        assert refused.status_code == 422 and says in error_of(refused)["message"], (path, refused.text)
    assert list((tmp_path / "real").iterdir()) == [] and not (server.home / "vectors" / "b").exists()
    assert operator.get("/v1/spaces").status_code == 200


def test_three_backups_into_one_folder_at_once_answer_one_success_and_conflicts(server, operator, tmp_path):
    """Never a 500: the one that holds the folder succeeds; the others find it held (or, once
    it is done, holding a complete backup), and say so."""
    barrier, answers = threading.Barrier(3), []

    def post() -> None:
        with server.client(server.tokens["operator"]) as client:
            barrier.wait()
            answers.append(client.post("/v1/backup", json={"path": str(tmp_path / "backup")}))

    threads = [threading.Thread(target=post) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert sorted(r.status_code for r in answers) == [201, 409, 409], [r.text for r in answers]
    assert {error_of(r)["code"] for r in answers if r.status_code == 409} <= {"backup_under_way", "folder_not_empty"}
    assert json.loads((tmp_path / "backup" / "manifest.json").read_text())["memories"] >= 0
