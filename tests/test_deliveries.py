"""Deliveries: every recall records ids and reasons, never memory texts; ``--why`` names the
other-space match for the operator and changes nothing it reads."""

from __future__ import annotations

import json

from tests.catalogs import catalog_rows
from tests.helpers import files_containing, run_cli

AUTH0 = "Acme authentication uses Auth0"
CLERK = "Globex authentication uses Clerk"


def seed(capsys, folders):
    for name in ("acme", "globex"):
        assert run_cli(capsys, folders[name], "space", "add", str(folders[name]))[0] == 0
    run_cli(capsys, folders["acme"], "remember", AUTH0)
    run_cli(capsys, folders["acme"], "remember", "Acme deploys on fridays")
    run_cli(capsys, folders["globex"], "remember", CLERK)


def test_delivery_records_ids_and_reasons_not_texts(capsys, home, folders, real_embedder):
    seed(capsys, folders)
    code, out, _ = run_cli(
        capsys, folders["acme"], "recall", "how does login work?", "--limit", "1", "--ai", "claude-code"
    )
    assert code == 0 and AUTH0 in out
    code, out, _ = run_cli(capsys, folders["acme"], "deliveries", "--json")
    [delivery] = json.loads(out)["deliveries"]
    assert delivery["ai"] == "claude-code" and delivery["space"] == "acme" and delivery["transport"] == "cli"
    assert [i["outcome"] for i in delivery["items"]] == ["delivered", "limit"]
    assert delivery["cut"]["space"] == 1  # Clerk: another space, never scored
    assert delivery["searched"] == ["personal", "acme"]
    for text in (AUTH0, CLERK, "Acme deploys on fridays"):
        assert not [p for p in files_containing(home, text) if p.name.startswith("esfis.db")]


def test_deliveries_filters(capsys, home, folders, real_embedder):
    seed(capsys, folders)
    run_cli(capsys, folders["acme"], "recall", "login", "--ai", "claude-code")
    run_cli(capsys, folders["globex"], "recall", "login", "--ai", "cursor")
    _, out, _ = run_cli(capsys, folders["acme"], "deliveries", "--ai", "cursor", "--json")
    assert [d["space"] for d in json.loads(out)["deliveries"]] == ["globex"]
    _, out, _ = run_cli(capsys, folders["acme"], "deliveries", "--space", "acme", "--last", "5", "--json")
    assert [d["ai"] for d in json.loads(out)["deliveries"]] == ["claude-code"]


def test_why_names_the_other_space_match_and_changes_nothing(capsys, home, folders, real_embedder):
    seed(capsys, folders)
    run_cli(capsys, folders["acme"], "recall", "how does login work?")
    before = _delivery_rows(home)
    code, out, err = run_cli(capsys, folders["acme"], "--why", "1")
    assert code == 0, err
    assert AUTH0 in out  # what went in, with today's text
    other = out.split("other spaces that would have answered")[1]
    assert CLERK in other and "never seen by the agent" in out
    code, out, _ = run_cli(capsys, folders["acme"], "--why", "1", "--json")
    why = json.loads(out)
    assert [o["text"] for o in why["other_spaces"]["top"]] == [CLERK]
    assert _delivery_rows(home) == before


def test_why_shows_forgotten_for_a_forgotten_memory(capsys, home, folders, real_embedder):
    seed(capsys, folders)
    _, out, _ = run_cli(capsys, folders["acme"], "recall", "how does login work?", "--json")
    first = json.loads(out)["memories"][0]["id"]
    run_cli(capsys, folders["acme"], "forget", first)
    _, out, _ = run_cli(capsys, folders["acme"], "--why", "1")
    assert "(forgotten)" in out and AUTH0 not in out


def _delivery_rows(home):
    return (
        catalog_rows(home, "SELECT * FROM deliveries ORDER BY id"),
        catalog_rows(home, "SELECT * FROM all_delivery_items ORDER BY delivery_id, rank"),
    )


def test_why_of_a_scoped_token_names_personal_as_out_of_reach_not_policy(fake_service):
    """A token confined to acme never reaches personal memories: --why must say "space"."""
    svc = fake_service
    svc.operator.create_space("acme")
    svc.remember(svc.caller("cli", space="acme"), "acme login uses auth0")
    svc.remember(svc.caller("cli"), "my login preference is passkeys", personal=True)
    scoped = svc.caller("claude-code", space="acme", scope="acme")
    delivered = svc.recall(scoped, "login")
    assert all(m.space == "acme" for m in delivered.memories)
    why = svc.operator.why(delivered.delivery_id)
    assert why.delivery.scope == "acme"
    assert [(o.space, o.reason) for o in why.others] == [(None, "space")]


def _seed_three(svc):
    for name in ("acme", "globex", "initech"):
        svc.operator.create_space(name)
    svc.remember(svc.caller("cli", space="acme"), "acme login uses auth0")
    globex = [svc.remember(svc.caller("cli", space="globex"), f"globex fact {i}") for i in range(3)]
    for i in range(2):
        svc.remember(svc.caller("cli", space="initech"), f"initech fact {i}")
    svc.remember(svc.caller("cli"), "my login preference is passkeys", personal=True)
    return globex


def test_cut_by_space_counts_what_other_spaces_hold_after_forgets_and_removals(fake_service):
    svc = fake_service
    globex = _seed_three(svc)
    first = svc.recall(svc.caller("claude-code", space="acme"), "login")
    assert svc.operator.delivery(first.delivery_id).cut["space"] == 5  # globex 3, initech 2
    svc.forget(svc.caller("cli", space="globex"), globex[0].id)
    svc.operator.remove_space("initech", purge=True)
    svc.operator.deny("claude-code", "acme")
    second = svc.recall(svc.caller("claude-code", space="acme"), "login")
    cut = svc.operator.delivery(second.delivery_id).cut
    assert (cut["space"], cut["policy"]) == (2, 1)  # globex's two left; acme's one, denied
    assert svc.operator.delivery(first.delivery_id).cut["space"] == 5  # an old delivery keeps its figures


def test_a_catalog_from_before_the_live_total_counts_its_memories(home, clock):
    """A store made by schema version 3 has no ``totals``: opening it counts what it holds.
    (SQLite's: PostgreSQL catalogs begin at version 4.)"""
    import sqlite3

    from indexing.embedding.testing import HashingEmbedder
    from server.facade import open_service
    from server.settings import Settings

    def service():
        return open_service(Settings(home=home, model=None), embedder=HashingEmbedder(), clock=clock)

    svc = service()
    _seed_three(svc)
    svc.close()
    with sqlite3.connect(home / "esfis.db") as conn:
        for trigger in ("totals_on_insert", "totals_on_update", "totals_on_delete"):
            conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute("DROP TABLE totals")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema'")
    svc = service()
    try:
        svc.remember(svc.caller("cli", space="globex"), "globex fact written after the upgrade")
        delivered = svc.recall(svc.caller("claude-code", space="acme"), "login")
        assert svc.operator.delivery(delivered.delivery_id).cut["space"] == 6
    finally:
        svc.close()
