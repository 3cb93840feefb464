"""The seed's own test: Acme's auth is Auth0, Globex's is Clerk. Both facts answer a question
about login; only the partition keeps the other client's fact out, and the other partition is
never even scored."""

from __future__ import annotations

import json

from server.facade import open_service
from tests.catalogs import settings_for
from tests.helpers import run_cli

QUESTION = "how does login work?"


def seed(capsys, folders) -> None:
    for name in ("acme", "globex"):
        code, _, err = run_cli(capsys, folders[name], "space", "add", str(folders[name]))
        assert code == 0, err
    assert run_cli(capsys, folders["acme"], "remember", "Acme authentication uses Auth0")[0] == 0
    assert run_cli(capsys, folders["globex"], "remember", "Globex authentication uses Clerk")[0] == 0


def recall_texts(capsys, cwd) -> list[str]:
    code, out, err = run_cli(capsys, cwd, "recall", QUESTION, "--json")
    assert code == 0, err
    return [m["text"] for m in json.loads(out)["memories"]]


def test_login_question_from_acme_returns_auth0_never_clerk(home, folders, capsys, real_embedder):
    seed(capsys, folders)
    texts = recall_texts(capsys, folders["acme"])
    assert texts == ["Acme authentication uses Auth0"]


def test_login_question_from_globex_returns_clerk_never_auth0(home, folders, capsys, real_embedder):
    seed(capsys, folders)
    texts = recall_texts(capsys, folders["globex"])
    assert texts == ["Globex authentication uses Clerk"]


def test_both_facts_match_the_question_so_only_the_partition_keeps_clerk_out(real_embedder):
    query = real_embedder.embed_query(QUESTION)
    auth0, clerk = real_embedder.embed_documents(["Acme authentication uses Auth0", "Globex authentication uses Clerk"])
    assert float(query @ clerk) > 0.2 and float(query @ auth0) > 0.2


def test_recall_from_acme_never_opens_or_scores_the_globex_partition(home, folders, capsys, real_embedder):
    seed(capsys, folders)
    service = open_service(settings_for(home), embedder=real_embedder)
    caller = service.caller("claude-code", cwd=folders["acme"])
    result = service.recall(caller, QUESTION)
    assert [m.text for m in result.memories] == ["Acme authentication uses Auth0"]
    stats = service._parts.store.stats
    assert stats.scored["space:acme"] == 1
    assert stats.opened["space:globex"] == 0
    assert stats.loaded["space:globex"] == 0
    assert stats.scored["space:globex"] == 0
    assert set(stats.scored) <= {"space:acme", "personal"}
