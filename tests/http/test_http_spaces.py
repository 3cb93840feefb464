"""POST /v1/spaces: the same answers as ``esfis space add`` for the same folders (one that does
not exist, or is a file, is refused; one listed twice is one folder), and creates racing for one
name or one folder each end as a 201 or a 409, never a 500."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from http_support import error_of

RACERS = 12


def test_a_folder_listed_twice_is_one_folder(server, operator):
    folder = server.folder("twice")
    response = operator.post("/v1/spaces", json={"name": "twice", "folders": [str(folder), str(folder) + "/"]})
    assert response.status_code == 201, response.text
    assert response.json()["folders"] == [str(folder)]


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_a_folder_that_is_not_a_directory_is_refused_like_the_cli(server, operator, kind):
    path = server.work / f"not-a-dir-{kind.replace(' ', '-')}"
    if kind == "a file":
        path.write_text("x")
    response = operator.post("/v1/spaces", json={"name": "nowhere", "folders": [str(path)]})
    assert response.status_code == 422, response.text
    assert error_of(response)["code"] == "invalid_input"
    assert "does not exist or is not a directory" in error_of(response)["message"]
    cli = server.cli("space", "add", str(path), "--name", "nowhere", check=False)
    assert cli.returncode == 2 and "does not exist or is not a directory" in cli.stderr
    assert "nowhere" not in [s["name"] for s in operator.get("/v1/spaces").json()["spaces"]]


def _race(server, bodies: list[dict]) -> list[int]:
    token = server.tokens["operator"]
    start = threading.Barrier(len(bodies))

    def post(body: dict) -> int:
        with server.client(token) as client:
            assert client.get("/v1/spaces").status_code == 200  # connected before the start
            start.wait()
            response = client.post("/v1/spaces", json=body)
            if response.status_code != 201:
                assert error_of(response)["code"] == "space_exists", response.text
            return response.status_code

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(post, bodies))


def test_creates_racing_for_one_name_make_one_space(server, operator):
    statuses = _race(server, [{"name": "racer"}] * RACERS)
    assert sorted(statuses) == [201] + [409] * (RACERS - 1), statuses


def test_creates_racing_for_one_folder_give_it_to_one_space(server, operator):
    folder = str(server.folder("contested"))
    statuses = _race(server, [{"name": f"claim{i}", "folders": [folder]} for i in range(RACERS)])
    assert sorted(statuses) == [201] + [409] * (RACERS - 1), statuses
    owners = [s["name"] for s in operator.get("/v1/spaces").json()["spaces"] if folder in s["folders"]]
    assert len(owners) == 1
    assert not [
        s for s in operator.get("/v1/spaces").json()["spaces"] if s["name"].startswith("claim") and not s["folders"]
    ]
