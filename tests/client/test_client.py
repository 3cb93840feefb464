"""esfis_client against a real ``esfis serve``: isolation holds through the client, answers are
typed values, each error code is its own exception, a held call is a value to wait on, a
refusal for too many requests carries its retry time, and an import reports its bad lines."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
from esfis_client import (
    ApprovalPending,
    AsyncEsfis,
    AsyncHeld,
    DataBarrier,
    Esfis,
    Forbidden,
    Held,
    HeldForApproval,
    InvalidInput,
    InvalidMemoryId,
    InvalidSpaceName,
    Memory,
    NotFound,
    OutOfReach,
    SpaceNotFound,
    TooManyRequests,
    Unauthorized,
)

from tests.client.client_support import ACME_AUTH, GLOBEX_AUTH, QUESTION, agent, serve
from tests.http.conftest import stop_server

SECRET = "the staging database password is in vault path secret/acme-stg"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """This module's server lets one token open two run tokens in ten seconds: the tests here
    open at most two with one token, but the one that meets the limit."""
    srv = serve(tmp_path_factory, ESFIS_RATE_RUNS="2/10seconds")
    try:
        yield srv
    finally:
        stop_server(srv)


@pytest.fixture(scope="module")
def seeded(server):
    with agent(server) as writer:
        writer.remember(ACME_AUTH, space="acme")
        writer.remember(GLOBEX_AUTH, cwd=str(server.work / "globex"))
        writer.remember(SECRET, space="acme/platform")
    return server


def texts(recalled) -> list[str]:
    return [m.text for m in recalled]


def test_recall_from_acme_returns_auth0_never_clerk_through_the_client(seeded):
    with agent(seeded) as client:
        from_acme = texts(client.recall(QUESTION, space="acme"))
        from_globex = texts(client.recall(QUESTION, cwd=str(seeded.work / "globex")))
    assert ACME_AUTH in from_acme and not any("Clerk" in t for t in from_acme)
    assert GLOBEX_AUTH in from_globex and not any("Auth0" in t for t in from_globex)


def test_a_client_scoped_to_acme_can_never_reach_globex(seeded):
    with agent(seeded, space="acme") as acme:
        assert ACME_AUTH in texts(acme.recall(QUESTION))  # a scoped token stands in its space
        with pytest.raises(OutOfReach) as refused:
            acme.recall(QUESTION, space="globex")
        assert refused.value.status == 403 and refused.value.code == "out_of_reach"
        assert "globex" not in refused.value.message  # names only its own space


def test_answers_are_typed_values_and_a_memory_round_trips(seeded):
    with agent(seeded, space="acme") as client:
        memory = client.remember("Acme's release train leaves on Thursdays")
        assert isinstance(memory, Memory) and memory.space == "acme" and memory.ai == "claude-code"
        assert memory.created_at.tzinfo is not None and memory.labels.space == "acme"
        assert client.get(memory.id) == memory
        newer = client.replace(memory.id, "Acme's release train leaves on Wednesdays")
        assert isinstance(newer, Memory) and client.get(memory.id).superseded_by == newer.id
        assert client.forget(newer.id) is None
        with pytest.raises(NotFound):
            client.get(newer.id)


def test_each_error_code_is_its_own_exception(seeded):
    with Esfis(seeded.url, "esf_not_a_token") as stranger, pytest.raises(Unauthorized):
        stranger.recall(QUESTION)
    with agent(seeded) as client:
        with pytest.raises(SpaceNotFound):
            client.remember("a fact", space="initech")
        with pytest.raises(InvalidSpaceName) as invalid:
            client.remember("a fact", space="Acme")
        assert isinstance(invalid.value, ValueError) and invalid.value.status == 422
        with pytest.raises(InvalidMemoryId):
            client.get("mem_never_was")
        with pytest.raises(NotFound):
            client.get("mem_" + "a" * 26)


def test_the_barrier_answers_data_barrier_through_the_client(seeded):
    """A session that read Acme's platform may not write what it carries into Globex."""
    with agent(seeded, ai="cursor") as harness, harness.session() as session:
        assert SECRET in texts(session.recall("staging database password", space="acme/platform"))
        with pytest.raises(DataBarrier) as refused:
            session.remember("staging db password: vault secret/acme-stg", space="globex")
    assert refused.value.code == "data_barrier"


def approve_soon(server, approval_id: str) -> threading.Timer:
    """The operator approves the held call from another thread, while the caller waits."""

    def approve() -> None:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.tokens['operator']}"}) as op:
            assert op.post(f"/v1/approvals/{approval_id}/approve").status_code == 200

    timer = threading.Timer(0.3, approve)
    timer.start()
    return timer


def test_a_held_write_is_a_value_waited_on_until_the_operator_approves(seeded):
    with agent(seeded, ai="cursor") as harness, harness.session() as session:
        session.recall("staging database password", space="acme/platform")  # now carries acme/platform
        held = session.remember("the deploy checklist lives in the wiki", personal=True, space="acme/platform")
        assert isinstance(held, Held) and held.approval.status == "pending" and held.approval.action == "remember"
        assert held.wait(timeout=0.2).status == "pending"  # the time ran out: still a value, no exception
        with pytest.raises(ApprovalPending):  # one held call at a time
            session.remember("another personal note", personal=True, space="acme/platform")
        approving = approve_soon(seeded, held.id)
        approval = held.wait(timeout=30)
        approving.join()
        assert approval.approved and approval.memory is not None
        assert session.get(approval.memory, space="acme/platform").text == "the deploy checklist lives in the wiki"


def test_a_held_call_is_raised_when_the_client_asks_and_can_be_withdrawn(seeded):
    with agent(seeded, ai="cursor", raise_held=True) as harness, harness.session() as session:
        session.recall("staging database password", space="acme/platform")
        with pytest.raises(HeldForApproval) as raised:
            session.remember("a personal note carrying platform data", personal=True, space="acme/platform")
        held = raised.value.held
        held.withdraw()
        assert held.check().status == "withdrawn"


def test_the_async_client_waits_on_a_held_call_too(seeded):
    async def scenario() -> None:
        harness = AsyncEsfis(seeded.url, seeded.agent_token(ai="cursor"))
        async with harness, await harness.session() as session:
            assert SECRET in texts(await session.recall("staging database password", space="acme/platform"))
            held = await session.remember("the on-call rota is in PagerDuty", personal=True, space="acme/platform")
            assert isinstance(held, AsyncHeld)
            approving = approve_soon(seeded, held.id)
            approval = await held.wait(timeout=30)
            approving.join()
            assert approval.approved
            assert (
                await session.get(approval.memory, space="acme/platform")
            ).text == "the on-call rota is in PagerDuty"

    asyncio.run(scenario())


class Counting(httpx.HTTPTransport):
    """The real transport, counting what it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(f"{request.method} {request.url.path}")
        return super().handle_request(request)


def test_too_many_requests_carries_its_retry_time_and_a_write_is_sent_once(server):
    counting = Counting()
    with Esfis(server.url, server.agent_token(), transport=counting) as harness:
        harness.open_run(space="acme")
        harness.open_run(space="acme")
        with pytest.raises(TooManyRequests) as refused:
            harness.open_run(space="acme")
    assert refused.value.status == 429 and 0 < refused.value.retry_after <= 10
    assert counting.sent.count("POST /v1/runs") == 3  # the refused run token was not asked for again


def test_an_import_streams_its_rows_and_reports_each_bad_line(server, operator):
    rows = [
        {"text": "Acme's CI runs on Buildkite", "space": "acme"},
        "this line is not JSON",
        {"space": "acme"},
        {"text": "Globex ships on Fridays", "space": "globex"},
        {"text": "Initech uses Jira", "space": "initech"},
    ]
    report = operator.import_memories(iter(rows), ai="importer")
    assert (report.imported, report.failed) == (2, 3)
    assert [e.line for e in report.errors] == [2, 3, 5]
    assert all(e.reason for e in report.errors)
    with agent(server) as client:
        assert "Acme's CI runs on Buildkite" in texts(client.recall("which CI does acme use?", space="acme"))


def test_the_async_client_imports_from_an_async_iterable(server):
    async def rows():
        yield {"text": "Globex's on-call uses Opsgenie", "space": "globex"}
        yield '{"text": 7}'

    async def scenario():
        async with AsyncEsfis(server.url, server.tokens["operator"]) as operator:
            return await operator.import_memories(rows())

    report = asyncio.run(scenario())
    assert (report.imported, report.failed, [e.line for e in report.errors]) == (1, 1, [2])


def test_metadata_travels_with_the_memory_and_recall_filters_by_it(seeded):
    with agent(seeded, space="acme") as client:
        chosen = client.remember("Acme chose PostgreSQL for billing", data={"kind": "decision", "year": 2026})
        client.remember("Acme's billing retro is on Friday", data={"kind": "meeting", "year": 2026})
        client.remember("Acme's billing runs on a cron at midnight")
        assert chosen.data == {"kind": "decision", "year": 2026} == client.get(chosen.id).data
        decided = client.recall("what did acme decide about billing?", filter={"kind": "decision"})
        assert [(m.text, m.data["year"]) for m in decided] == [("Acme chose PostgreSQL for billing", 2026)]
        newest = client.recall(filter={"year": {"$gte": 2026}})  # no query: the newest that match
        assert [m.text for m in newest][:2] == [
            "Acme's billing retro is on Friday",
            "Acme chose PostgreSQL for billing",
        ]
        with pytest.raises(InvalidInput, match=r"\$regex"):
            client.recall("billing", filter={"kind": {"$regex": "^dec"}})
        newer = client.replace(chosen.id, "Acme moved billing to MySQL", data={"kind": "decision", "year": 2027})
        assert newer.data == {"kind": "decision", "year": 2027}
        assert [m.text for m in client.recall(filter={"kind": "decision"})] == ["Acme moved billing to MySQL"]


def test_the_operator_exports_a_subtree_page_by_page_never_another_space(seeded, operator):
    paged = list(operator.export(space="acme", below=True, page=2))
    whole = list(operator.export(space="acme", below=True))
    assert [m.id for m in paged] == [m.id for m in whole] and len(whole) > 2  # every page, once
    assert {ACME_AUTH, SECRET} <= {m.text for m in whole}
    assert {m.space for m in whole} <= {"acme", "acme/platform"}
    globex = list(operator.export(space="globex", state="current"))
    assert GLOBEX_AUTH in {m.text for m in globex} and {m.space for m in globex} == {"globex"}


def test_a_harness_gives_each_agent_session_a_run_token_of_its_own(seeded):
    """client/README.md's harness: a runs-only token opens one run token per session."""
    runs = []
    with Esfis(seeded.url, seeded.token("--ai", "my-agent", "--runs-only")) as harness:
        for task in ("how does login work?", "which CI does acme use?"):
            with harness.session(space="acme", ttl="1h") as memory:
                notes = memory.recall(task, limit=5)
                written = memory.remember(f"answered {task!r} from {len(notes)} notes", data={"task": task})
                assert isinstance(written, Memory) and written.ai == "my-agent" and written.space == "acme"
                runs.append(written.labels.run)
        with pytest.raises(Forbidden):  # the harness's own token opens runs, nothing else
            harness.recall("how does login work?", space="acme")
    assert len(set(runs)) == 2 and all(runs)
