"""Memory that stays clean (issue 62), through the façade on the real model and real LanceDB:
one fact once at write, updates answered as ``similar``, copies folded in a recall (the later
wins), recall as of a time, and ``Operator.dedupe`` folding what is already there."""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from server.clock import iso
from server.errors import InvalidInput
from server.render import why_text
from server.spaces import partition_key
from tests.conftest import cli_env

AUTH0 = "Acme's login uses Auth0"


@pytest.fixture
def acme(service, folders):
    service.operator.add_space(folders["acme"])
    service.operator.add_space(folders["globex"])
    return service.caller("claude-code", cwd=folders["acme"])


def current_texts(service, caller, query, **kw):
    return [m.text for m in service.recall(caller, query, **kw).memories]


@pytest.mark.parametrize(
    "again",
    ["Acme uses Auth0 for its login", "acme's login uses auth0.", "  Acme's   login uses Auth0!"],
    ids=["paraphrase", "case-and-period", "spaces-and-bang"],
)
def test_the_same_fact_again_stores_nothing_and_answers_the_memory_already_there(service, acme, again):
    first = service.remember(acme, AUTH0)
    second = service.remember(acme, again)
    assert second.id == first.id and second.duplicate_of == first.id and second.text == AUTH0
    assert current_texts(service, acme, "which identity provider does acme's login use?") == [AUTH0]
    run, steps = service.operator.trail(acme.run_id)
    duplicate = [s.step for s in steps if s.step.kind == "duplicate"]
    assert [d.memory_ids for d in duplicate] == [(first.id,)]


def test_dedupe_false_stores_the_copy(service, acme):
    first = service.remember(acme, AUTH0)
    copy = service.remember(acme, "Acme uses Auth0 for its login", dedupe=False)
    assert copy.id != first.id and copy.duplicate_of is None


def test_a_new_value_is_stored_and_answered_with_the_old_one_as_similar(service, acme):
    old = service.remember(acme, AUTH0)
    service.remember(acme, "Acme's office is in Berlin")
    new = service.remember(acme, "Acme's login uses Okta")
    assert new.id != old.id and new.duplicate_of is None
    assert [s.id for s in new.similar][:1] == [old.id] and 0.6 <= new.similar[0].score < 1
    assert len(new.similar) <= 3


def test_a_day_changed_is_a_new_fact_not_a_copy(service, acme):
    """0.94 apart by cosine: the content terms tell them apart."""
    friday = service.remember(acme, "deploys happen on friday")
    thursday = service.remember(acme, "deploys happen on thursday")
    assert thursday.id != friday.id and thursday.duplicate_of is None


def test_the_check_never_looks_outside_the_target_space(service, acme, folders):
    globex = service.caller("claude-code", cwd=folders["globex"])
    theirs = service.remember(globex, AUTH0)
    service.remember(acme, "Acme's office is in Berlin")  # acme's partition exists: the check searches it
    stats = service._parts.store.stats
    stats.reset()
    ours = service.remember(acme, AUTH0)
    assert set(stats.scored) <= {partition_key("acme")} and set(stats.opened) <= {partition_key("acme")}
    assert ours.id != theirs.id and ours.duplicate_of is None
    assert theirs.id not in [s.id for s in ours.similar]
    personal = service.remember(acme, AUTH0, personal=True)
    assert personal.duplicate_of is None and personal.space is None


def test_a_superseded_memory_is_no_duplicate(service, acme):
    old = service.remember(acme, AUTH0)
    service.replace(acme, old.id, "Acme's login uses Okta")
    again = service.remember(acme, AUTH0)
    assert again.duplicate_of is None and again.id != old.id


def test_recall_folds_copies_and_the_later_one_wins(service, acme):
    first = service.remember(acme, AUTH0)
    later = service.remember(acme, "Acme uses Auth0 for its login", dedupe=False)
    service.remember(acme, "Acme's office is in Berlin")
    result = service.recall(acme, "what does acme use for login?")
    ids = [m.id for m in result.memories]
    assert later.id in ids and first.id not in ids
    assert service.operator.delivery(result.delivery_id).cut["copy"] == 1
    assert "copy: 1 memory copies of a delivered memory's fact" in why_text(service.operator.why(result.delivery_id))


def test_recall_as_of_answers_what_was_valid_then(service, acme, clock):
    march = clock()
    old = service.remember(acme, AUTH0)
    clock.advance(days=30)
    service.replace(acme, old.id, "Acme's login uses Okta")
    clock.advance(days=30)
    question = "what does acme's login use?"
    assert current_texts(service, acme, question) == ["Acme's login uses Okta"]
    then = iso(march + timedelta(days=1))
    assert current_texts(service, acme, question, as_of=then) == [AUTH0]
    assert current_texts(service, acme, question, as_of=march - timedelta(seconds=1)) == []


def test_a_forgotten_memory_never_comes_back_at_any_as_of(service, acme, clock):
    start = clock()
    secret = service.remember(acme, "the acme vault key is tangerine")
    clock.advance(days=1)
    service.replace(acme, secret.id, "the acme vault key is rotated monthly")
    clock.advance(days=1)
    service.forget(acme, secret.id)
    for moment in (start, start + timedelta(hours=1), start + timedelta(days=1, hours=1), clock()):
        assert "the acme vault key is tangerine" not in current_texts(service, acme, "vault key", as_of=moment)


@pytest.mark.parametrize("as_of", ["7d", "2999-01-01T00:00:00Z", "last march"], ids=["duration", "future", "words"])
def test_an_as_of_that_is_no_past_time_is_refused_by_name(service, acme, as_of):
    with pytest.raises(InvalidInput) as refused:
        service.recall(acme, "login", as_of=as_of)
    assert refused.value.field == "as_of" and "as_of" in refused.value.message


def test_operator_dedupe_folds_copies_into_the_earliest_within_the_space_only(service, acme, folders, clock):
    globex = service.caller("claude-code", cwd=folders["globex"])
    first = service.remember(acme, AUTH0)
    clock.advance(seconds=1)
    copies = [service.remember(acme, t, dedupe=False) for t in ("Acme uses Auth0 for its login", AUTH0 + ".")]
    kept = service.remember(acme, "Acme's login uses Okta")
    theirs = service.remember(globex, AUTH0)
    stats = service._parts.store.stats
    stats.reset()
    dry = service.operator.dedupe("acme", dry_run=True)
    assert set(stats.scored) == {partition_key("acme")}
    assert (dry.copies, dry.kept, dry.current) == (2, 1, 4)
    assert all(service.get(acme, c.id).superseded_by is None for c in copies)
    done = service.operator.dedupe("acme")
    assert (done.copies, done.kept) == (2, 1)
    assert [service.get(acme, c.id).superseded_by for c in copies] == [first.id, first.id]
    assert service.get(acme, first.id).superseded_by is None and service.get(acme, kept.id).superseded_by is None
    assert service.get(globex, theirs.id).superseded_by is None
    assert service.operator.dedupe("acme").copies == 0


def test_esfis_dedupe_killed_half_way_finishes_on_a_rerun(home, service, acme):
    """A real ``esfis dedupe`` killed (SIGKILL) after its second fold; the rerun folds the rest,
    and counts only what it did."""
    first = service.remember(acme, AUTH0)
    said = ["Acme uses Auth0 for its login", AUTH0 + ".", "acme's login uses auth0", "  Acme's login uses Auth0!"]
    copies = [service.remember(acme, text, dedupe=False) for text in said]

    def dedupe(*extra: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
        env = cli_env(home, **({"ESFIS_FAILPOINT": failpoint} if failpoint else {}))
        command = [str(Path(sys.executable).with_name("esfis")), "dedupe", "--space", "acme", *extra]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    dry = dedupe("--dry-run")
    assert dry.returncode == 0 and "would fold 4 copies into 1 earliest" in dry.stdout, dry.stderr
    killed = dedupe(failpoint="dedupe:after-fold@2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert sum(service.get(acme, c.id).superseded_by == first.id for c in copies) == 2
    rerun = dedupe()
    assert rerun.returncode == 0 and "folded 2 copies into 1 earliest" in rerun.stdout, rerun.stderr
    assert [service.get(acme, c.id).superseded_by for c in copies] == [first.id] * 4
    assert service.get(acme, first.id).superseded_by is None
    assert dedupe().stdout.strip().endswith("folded 0 copies into 0 earliest memories")


def test_esfis_dedupe_names_one_place(home, service, acme):
    env = cli_env(home)
    esfis = str(Path(sys.executable).with_name("esfis"))
    both = subprocess.run([esfis, "dedupe", "--space", "acme", "--personal"], env=env, capture_output=True, text=True)
    missing = subprocess.run([esfis, "dedupe", "--space", "initech"], env=env, capture_output=True, text=True)
    assert both.returncode != 0 and "--space SPACE or --personal" in both.stderr
    assert missing.returncode != 0 and "initech" in missing.stderr


def test_copies_never_leave_a_recall_short_of_its_limit(service, acme):
    """Twelve stored copies fill a recall's first candidates; it looks deeper rather than answer
    fewer than ``limit`` while other memories remain."""
    copies = [service.remember(acme, AUTH0, dedupe=False) for _ in range(12)]
    others = ["Acme's login sessions last 12 hours", "Acme's login page is styled by the web team"]
    for text in others:
        service.remember(acme, text)
    result = service.recall(acme, AUTH0, limit=3)
    assert [m.text for m in result.memories][0] == AUTH0
    assert sorted(m.text for m in result.memories[1:]) == sorted(others)
    assert result.memories[0].id == copies[-1].id  # the later one wins
    assert service.operator.delivery(result.delivery_id).cut["copy"] == 11


def test_a_recall_that_looks_deeper_for_copies_searches_its_partition_once(service, acme, folders):
    """The deeper look takes its rows from the first search's ranking, which went deep enough:
    the partition's vectors are scored once, not once a depth."""
    for _ in range(12):
        service.remember(acme, AUTH0, dedupe=False)
    service.remember(acme, "Acme's login sessions last 12 hours")
    store = service._parts.memories.store
    key = partition_key("acme")
    before = store.stats.scored[key]
    result = service.recall(acme, AUTH0, limit=3)
    assert service.operator.delivery(result.delivery_id).cut["copy"] == 11  # it did look deeper
    assert store.stats.scored[key] - before == 13  # every row scored once


def test_identifiers_that_differ_are_different_facts():
    """A value written with joiners is compared whole: incident a-3 is not incident b-3, however
    close the two texts embed (two servers wrote both, tests/http/test_several_servers.py)."""
    from server.memories.duplicates import same_fact

    assert not same_fact("Globex incident a-3", "Globex incident b-3", cosine=0.99)
    assert not same_fact("ticket INC-1204 is open", "ticket INC-1205 is open", cosine=0.99)
    assert same_fact("Globex incident a-3 is resolved", "globex incident a-3 resolved", cosine=0.99)
