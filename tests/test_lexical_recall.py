"""The lexical signal keeps the recall order: BM25 is computed inside the partitions the caller
reaches, over the rows valid now, and a forgotten text leaves no term behind. Real model, real
LanceDB; ``stats.postings`` counts the postings each partition's index read."""

from __future__ import annotations

from indexing.relevance.words import query_terms
from tests.helpers import files_containing

CODEWORD = "quuxzebra"  # a term no other memory holds, so only BM25 can single it out


def seed(service, folders):
    for name in ("acme", "globex"):
        service.operator.add_space(folders[name])
    acme = service.caller("claude-code", cwd=folders["acme"])
    globex = service.caller("claude-code", cwd=folders["globex"])
    service.remember(acme, "Acme authentication uses Auth0")
    service.remember(acme, "Acme deploys on Fridays")
    service.remember(globex, "Globex authentication uses Clerk")
    service.remember(globex, f"Globex login codeword is {CODEWORD}")
    return acme, globex


def test_recall_from_acme_reads_no_posting_of_globex(service, folders):
    acme, _ = seed(service, folders)
    service._parts.store.stats.reset()
    result = service.recall(acme, f"authentication login {CODEWORD} Clerk")
    assert [m.text for m in result.memories][0] == "Acme authentication uses Auth0"
    assert all("Globex" not in m.text for m in result.memories)
    stats = service._parts.store.stats
    assert stats.postings["space:acme"] > 0  # the lexical signal ran, in Acme
    assert stats.postings["space:globex"] == 0
    assert stats.loaded["space:globex"] == 0 and stats.scored["space:globex"] == 0
    assert set(stats.postings) <= {"space:acme", "personal"}


def test_a_rare_term_finds_its_memory_in_its_own_space(service, folders):
    _, globex = seed(service, folders)
    result = service.recall(globex, f"what is {CODEWORD}?")
    assert result.memories[0].text == f"Globex login codeword is {CODEWORD}"


def test_forgotten_memory_terms_no_longer_score_and_are_in_no_file(service, folders, home):
    _, globex = seed(service, folders)
    secret = next(m for m in service.recall(globex, CODEWORD).memories if CODEWORD in m.text)
    index = service._parts.store.live_partition("space:globex").lexicon()
    assert CODEWORD in index.term_id
    service.forget(globex, secret.id)
    index = service._parts.store.live_partition("space:globex").lexicon()
    assert CODEWORD not in index.term_id and CODEWORD not in index.terms
    service._parts.store.stats.reset()
    result = service.recall(globex, CODEWORD)
    assert all(CODEWORD not in m.text for m in result.memories)
    assert service._parts.store.stats.postings["space:globex"] == 0  # no posting left to read
    assert files_containing(home, secret.text) == []  # (queries, logged by design, hold the term)


def test_superseded_memory_gets_no_lexical_score(service, folders):
    _, globex = seed(service, folders)
    old = next(m for m in service.recall(globex, CODEWORD).memories if CODEWORD in m.text)
    service.replace(globex, old.id, "Globex login has no codeword any more")
    result = service.recall(globex, CODEWORD, limit=10)
    assert old.id not in [m.id for m in result.memories]
    snap = service._parts.store.live_partition("space:globex")
    row = snap.row_of[old.id]
    valid = snap.valid_until[: snap.rows] > snap.valid_from[: snap.rows].max()  # open rows only
    assert not valid[row]
    assert snap.lexicon().score(query_terms(CODEWORD), valid).scores[row] == 0


def test_expired_memory_gets_no_lexical_score(service, folders, clock):
    _, globex = seed(service, folders)
    service.remember(globex, f"temporary {CODEWORD} pass for the audit", valid_until="2h")
    assert any("temporary" in m.text for m in service.recall(globex, f"temporary {CODEWORD} pass").memories)
    clock.advance(hours=2)
    assert all("temporary" not in m.text for m in service.recall(globex, f"temporary {CODEWORD} pass").memories)


def test_a_term_every_memory_of_a_space_holds_never_lifts_that_space_above_the_answer(service, folders):
    """The lexical bonus is in units of the partition's BM25 spread. Where every memory of a
    space holds the query's one matching term about as often, that spread is near zero while
    the scores are not: divided by it, the bonus of every row there grew without bound (scores
    of 36,735 seen), and in a recall over several spaces that space took every place above the
    memory that answers. A term most rows share now weighs no more than one row in two holding
    it would, and every score stays a cosine plus a bonus of a few cosine spreads."""
    service.operator.add_space(folders["acme"])
    service.operator.add_space(folders["acme/platform"])
    acme = service.caller("claude-code", cwd=folders["acme"])
    platform = service.caller("claude-code", cwd=folders["acme/platform"])
    for i in range(30):
        service.remember(acme, f"Acme team lunch {i} is booked under billing code L{i}")
    answer = service.remember(platform, "How billing works: Stripe sends the invoices on the first of each month")
    result = service.recall(acme, "how does billing work", limit=5)
    assert result.memories[0].id == answer.id, [(m.text, m.score) for m in result.memories]
    assert all(m.score < 2.0 for m in result.memories), [(m.text, m.score) for m in result.memories]
