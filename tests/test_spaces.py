"""Spaces: naming rules, add/list/remove, and where a caller stands (longest registered folder,
whole path components, symlinks resolved, ESFIS_SPACE, --space)."""

from __future__ import annotations

import json
import os

import pytest

from server.errors import InvalidSpaceName, SpaceExists, SpaceNotEmpty, SpaceNotFound, Unauthorized
from server.spaces import NAME_RULE, contains, validate_space_name
from server.spaces.registry import Registry
from server.spaces.tokens import TokenBook
from tests.helpers import files_containing, run_cli

VALID = ["acme", "acme/platform", "a", "0", "acme-corp", "acme.io", "a_b", "/".join(["s"] * 8), "a" * 63]
INVALID = [
    "",
    "Acme",
    "acme/",
    "/acme",
    "acme//x",
    "acme/../x",
    "..",
    ".",
    "-acme",
    "_acme",
    "acme corp",
    "аcme",
    "acmé",
    "a" * 64,
    "/".join(["s"] * 9),
    "acme\n",
    "acme/.hidden",
]


@pytest.mark.parametrize("name", VALID)
def test_valid_names_are_kept_as_given(name):
    assert validate_space_name(name) == name


@pytest.mark.parametrize("name", INVALID)
def test_invalid_names_are_refused_with_the_rule(name):
    with pytest.raises(InvalidSpaceName) as error:
        validate_space_name(name)
    assert NAME_RULE in error.value.message


@pytest.mark.parametrize(
    "outer, inner, inside",
    [
        ("acme", "acme/platform", True),
        ("acme", "acme", True),
        ("acme", "acme2", False),
        ("acme", "acme-corp", False),
        ("acme/platform", "acme", False),
        ("acme/platform", "acme/finance", False),
    ],
)
def test_containment_is_by_whole_segments(outer, inner, inside):
    assert contains(outer, inner) is inside


def test_default_name_is_base_name_under_enclosing_space(fake_service, folders):
    assert fake_service.operator.add_space(folders["acme"]).name == "acme"
    assert fake_service.operator.add_space(folders["acme/platform"]).name == "acme/platform"
    assert fake_service.operator.add_space(folders["acme/platform/api"]).name == "acme/platform/api"


def test_longest_registered_folder_wins_by_whole_components(fake_service, folders):
    fake_service.operator.add_space(folders["acme"])
    fake_service.operator.add_space(folders["acme/platform"])
    assert fake_service.caller("cli", cwd=folders["acme/platform/api"]).space == "acme/platform"
    assert fake_service.caller("cli", cwd=folders["acme/finance"]).space == "acme"
    # the folder acme2 starts with the string acme but is not inside it
    assert fake_service.caller("cli", cwd=folders["acme2"]).space is None


def test_symlinks_are_resolved(fake_service, folders, tmp_path):
    fake_service.operator.add_space(folders["acme"])
    link = tmp_path / "shortcut"
    link.symlink_to(folders["acme/platform"])
    assert fake_service.caller("cli", cwd=link).space == "acme"
    link2 = tmp_path / "acme-link"
    link2.symlink_to(folders["globex"])
    fake_service.operator.add_space(link2, name="globex")  # registered through a link: stored resolved
    assert fake_service.caller("cli", cwd=folders["globex"]).space == "globex"


def test_a_folder_belongs_to_one_space(fake_service, folders):
    fake_service.operator.add_space(folders["acme"])
    with pytest.raises(SpaceExists):
        fake_service.operator.add_space(folders["acme"], name="other")


def test_a_space_may_have_several_folders(fake_service, folders):
    fake_service.operator.add_space(folders["acme"])
    fake_service.operator.add_space(folders["acme-corp"], name="acme")
    assert fake_service.caller("cli", cwd=folders["acme-corp"]).space == "acme"
    [space] = fake_service.operator.spaces()
    assert len(space.folders) == 2


def test_remove_refuses_while_memories_then_purges(fake_service, folders, home):
    fake_service.operator.add_space(folders["acme"])
    acme = fake_service.caller("cli", cwd=folders["acme"])
    memory = fake_service.remember(acme, "acme secret: blue-falcon-42")
    with pytest.raises(SpaceNotEmpty):
        fake_service.operator.remove_space("acme")
    assert fake_service.operator.remove_space("acme", purge=True) == 1
    assert fake_service.operator.spaces() == []
    assert files_containing(home, "blue-falcon-42") == []
    row = fake_service._parts.catalog.one("SELECT forgotten_at FROM memories WHERE id = ?", (memory.id,))
    assert row["forgotten_at"] is not None


def test_cli_space_add_list_remove_and_env_space(capsys, home, folders, real_embedder, monkeypatch):
    assert run_cli(capsys, folders["acme"], "space", "add", str(folders["acme"]))[1].strip() == "acme"
    code, out, _ = run_cli(capsys, folders["acme"], "space", "add", str(folders["globex"]), "--name", "globex/main")
    assert out.strip() == "globex/main"
    _, out, _ = run_cli(capsys, folders["acme"], "space", "list", "--json")
    names = [s["name"] for s in json.loads(out)["spaces"]]
    assert names == ["acme", "globex/main"]
    monkeypatch.setenv("ESFIS_SPACE", "globex/main")
    run_cli(capsys, folders["acme"], "remember", "written from the env space")
    monkeypatch.delenv("ESFIS_SPACE")
    _, out, _ = run_cli(capsys, folders["globex"], "recall", "env space", "--json")
    assert [m["space"] for m in json.loads(out)["memories"]] == ["globex/main"]
    _, out, _ = run_cli(capsys, folders["outside"], "recall", "env space", "--space", "globex/main", "--json")
    assert len(json.loads(out)["memories"]) == 1
    code, _, err = run_cli(capsys, folders["acme"], "space", "remove", "acme")
    assert code == 0, err
    assert os.path.isdir(folders["acme"])  # the folder itself is never touched


def test_a_new_space_inherits_no_token_left_from_an_old_one(fake_service, folders, clock):
    """A catalog from before removals revoked tokens may hold an active token confined to a
    name no space has; creating a space of that name revokes it instead of reviving it."""
    tokens = TokenBook(fake_service._parts.catalog, clock)
    fake_service.operator.create_space("initech")
    stale, secret = tokens.create(ai="old-tenant", space="initech")
    with fake_service._parts.catalog.transaction() as tx:  # removed the old way
        tx.execute("DELETE FROM spaces WHERE name = 'initech'")
    fake_service.operator.add_space(folders["acme"], "initech")
    assert [t.active for t in tokens.list() if t.id == stale.id] == [False]
    with pytest.raises(Unauthorized):
        tokens.authenticate(f"Bearer {secret}")


def test_a_token_for_a_space_removed_meanwhile_is_refused(fake_service, clock, monkeypatch):
    tokens = TokenBook(fake_service._parts.catalog, clock)
    fake_service.operator.create_space("initech")
    fake_service.operator.remove_space("initech")
    # As if the early check had run just before the removal: the transaction checks again.
    monkeypatch.setattr(Registry, "require", lambda self, name: name)
    with pytest.raises(SpaceNotFound):
        tokens.create(ai="late", space="initech")
    assert tokens.list() == []


@pytest.fixture
def stale_checks(monkeypatch):
    """As if another process registered a name or a folder just after this one looked."""
    monkeypatch.setattr(Registry, "exists", lambda self, name: False)
    monkeypatch.setattr(Registry, "folders", lambda self: {})


def test_a_create_racing_another_for_one_name_is_a_conflict(fake_service, folders, stale_checks):
    fake_service.operator.create_space("racer")
    with pytest.raises(SpaceExists):
        fake_service.operator.create_space("racer")


def test_a_create_racing_another_for_one_folder_is_a_conflict(fake_service, folders, stale_checks):
    fake_service.operator.create_space("claim1", [str(folders["acme"])])
    with pytest.raises(SpaceExists):
        fake_service.operator.create_space("claim2", [str(folders["acme"])])
    with pytest.raises(SpaceExists):
        fake_service.operator.add_space(folders["acme"], "claim3")
    assert [(s.name, len(s.folders)) for s in fake_service.operator.spaces()] == [("claim1", 1)]


def test_cli_get_of_a_replaced_memory_prints_its_text_and_says_it_is_history(capsys, home, folders, real_embedder):
    """stdout keeps the text alone (what scripts read); stderr says it is no longer current."""
    run_cli(capsys, folders["acme"], "space", "add", str(folders["acme"]))
    old = run_cli(capsys, folders["acme"], "remember", "the deploy window is tuesday")[1].strip()
    new = run_cli(capsys, folders["acme"], "replace", old, "the deploy window is thursday")[1].strip()
    code, out, err = run_cli(capsys, folders["acme"], "get", old)
    assert code == 0 and out.strip() == "the deploy window is tuesday"
    assert "no longer current since" in err and f"superseded by {new}" in err, err
    _, _, err = run_cli(capsys, folders["acme"], "get", new)
    assert "no longer current" not in err
