"""Containment: a caller reaches personal, its own space and the spaces below it — by whole
segments, never by string prefix — and a folder outside every space sees personal only.
Real model, real LanceDB."""

from __future__ import annotations

import pytest

FACTS = {
    "acme": "acme deploys with terraform",
    "acme/platform": "acme platform deploys with helm charts",
    "acme/finance": "acme finance deploys with a spreadsheet macro",
    "acme2": "acme2 deploys with ansible",
    "acme-corp": "acme-corp deploys with pulumi",
    "globex": "globex deploys with bash scripts",
    None: "I prefer deploys on tuesdays",
}

REACH = {
    "acme": {"acme", "acme/platform", "acme/finance", None},
    "acme/platform": {"acme/platform", None},
    "acme/finance": {"acme/finance", None},
    "acme2": {"acme2", None},
    "acme-corp": {"acme-corp", None},
    "globex": {"globex", None},
    "outside": {None},
}


@pytest.fixture
def stocked(service, folders):
    for name in ("acme", "acme/platform", "acme/finance", "acme2", "acme-corp", "globex"):
        service.operator.add_space(folders[name], name=name)
    for space, text in FACTS.items():
        caller = service.caller("cli", space=space)
        service.remember(caller, text, personal=space is None)
    return service


@pytest.mark.parametrize("where", list(REACH), ids=list(REACH))
def test_caller_reaches_exactly_its_subtree_and_personal(stocked, folders, where):
    caller = stocked.caller("cli", cwd=folders[where])
    got = {m.space for m in stocked.recall(caller, "how do we deploy?", limit=100).memories}
    assert got == REACH[where]


def test_nested_folder_of_platform_stands_in_platform(stocked, folders):
    caller = stocked.caller("cli", cwd=folders["acme/platform/api"])
    assert caller.space == "acme/platform"


def test_acme_never_scores_acme2_or_acme_corp(stocked, folders):
    stocked._parts.store.stats.reset()
    stocked.recall(stocked.caller("cli", cwd=folders["acme"]), "how do we deploy?")
    scored = set(stocked._parts.store.stats.scored)
    assert scored == {"personal", "space:acme", "space:acme/platform", "space:acme/finance"}
