"""The data barrier over MCP, with real ``esfis mcp`` processes and the SDK's client: one
session is one run; what it recalled cannot be written into personal memories unless the person
approves that one write through an elicitation request (which shows the real text and target);
a client that cannot elicit has the write held for the operator; a grant lets the write through
and the trail says so;
shared context opens only where its labels are reached."""

from __future__ import annotations

from contextlib import AsyncExitStack

import anyio
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.types import ElicitResult, Implementation

from tests.mcp.conftest import SERVERS, Person, Server, Spec, server_params, start

SECRET = "the staging database password is in vault path secret/acme-stg"
LEAK = "staging db password: vault secret/acme-stg"


async def start_with_person(stack: AsyncExitStack, world, name: str, folder: str, person: Person) -> Server:
    log = world.logs / f"{name}.stderr"
    client = Client(
        stdio_client(server_params(world, Spec(folder, "Claude Code")), errlog=stack.enter_context(open(log, "w"))),
        mode="legacy",
        client_info=Implementation(name="Claude Code", version="1.0"),
        elicitation_callback=person,
    )
    await stack.enter_async_context(client)
    return Server(name, client, log)


def trail_of(world, memory_ids: list[str]) -> dict:
    """The trail of the run that wrote or read these ids (the operator's view, over the CLI)."""
    for run in world.cli_json("runs", "--last", "500")["runs"]:
        trail = world.cli_json("trail", run["run"])
        if any(set(memory_ids) & set(s["memory_ids"]) for s in trail["steps"]):
            return trail
    raise AssertionError(f"no run touched {memory_ids}")


async def test_laundering_over_mcp_needs_the_person_and_the_trail_says_so(world, fleet):
    secret = world.cli("remember", SECRET, "--space", "acme/platform").stdout.strip()
    person = Person("decline")
    async with AsyncExitStack() as stack:
        session = await start_with_person(stack, world, "approver", SERVERS["platform"].folder, person)
        recalled = await session.recall("where is the staging database password?")
        assert recalled[0]["id"] == secret and recalled[0]["labels"]["space"] == "acme/platform"
        refused = await session.error("remember", text=LEAK, personal=True)
        assert "data_barrier" in refused
        assert len(person.seen) == 1 and LEAK in person.seen[0] and "personal" in person.seen[0]
        person.answer = "accept"
        saved = await session.ok("remember", text=LEAK, personal=True)
        assert saved["space"] is None and saved["labels"]["from"] == ["acme/platform"]
        assert len(person.seen) == 2
        trail = trail_of(world, [saved["id"]])  # while the session lives (at its exit it ends the run)
    kinds = [(s["kind"], s["decision"]) for s in trail["steps"]]
    assert kinds[0] == ("recall", None)
    assert kinds[1:4] == [("approval_requested", None), ("declined", None), ("gate", "refused")]
    assert kinds[4:] == [("approval_requested", None), ("approved", None), ("gate", "allowed"), ("write", None)]
    assert trail["carries"] == ["personal", "space:acme/platform"] or trail["carries"] == ["space:acme/platform"]
    assert SECRET not in str(trail) and LEAK not in str(trail)
    world.cli("forget", saved["id"])


async def test_a_client_that_cannot_elicit_is_held_for_the_operator_and_a_grant_lets_it_through(world, fleet):
    platform = fleet["platform"]  # the shared session in acme/platform; its client has no elicitation
    secret = world.cli(
        "remember", "the platform's TLS key is rotated by cert-manager", "--space", "acme/platform"
    ).stdout.strip()
    assert secret in [m["id"] for m in await platform.recall("TLS key rotation cert-manager")]
    held = (await platform.ok("remember", text="TLS keys rotate via cert-manager", personal=True))["approval"]
    assert held["status"] == "pending" and held["target"] is None
    assert (await platform.ok("check_approval", id=held["id"]))["status"] == "pending"
    (listed,) = [a for a in world.cli_json("approvals")["approvals"] if a["id"] == held["id"]]
    assert "│ TLS keys rotate via cert-manager" in listed["rendering"] and listed["needs"] == ["space:acme/platform"]
    assert world.cli("approvals", "approve", held["id"]).stdout.startswith(f"{held['id']} approved")
    checked = await platform.ok("check_approval", id=held["id"])
    assert checked["status"] == "approved" and checked["memory"].startswith("mem_")
    written = world.cli_json("get", checked["memory"], "--space", "acme")
    assert written["text"] == "TLS keys rotate via cert-manager" and written["labels"]["from"] == ["acme/platform"]
    world.cli("forget", checked["memory"])
    granted = world.cli("grant", "add", "acme/platform", "--personal", "--ai", "claude-code").stdout.strip()
    saved = await platform.ok("remember", text="TLS keys rotate via cert-manager", personal=True)
    trail = trail_of(world, [saved["id"]])
    assert [s["grant"] for s in trail["steps"] if s["kind"] == "gate"][-1] == granted
    world.cli("grant", "revoke", granted)
    again = (await platform.ok("remember", text="once more", personal=True))["approval"]
    await platform.ok("forget", id=again["id"])  # withdrawn by its own run: nothing waits
    assert (await platform.ok("check_approval", id=again["id"]))["status"] == "withdrawn"
    world.cli("forget", saved["id"])


async def test_shared_context_opens_in_acme_and_is_refused_in_globex(world, fleet):
    memory = world.cli("remember", "platform on-call uses PagerDuty", "--space", "acme/platform").stdout.strip()
    shared = await fleet["platform"].ok("share", ids=[memory])
    assert shared["ref"].startswith("ctx_") and "PagerDuty" not in str(shared)
    async with AsyncExitStack() as stack:  # a session of its own: what it opens, it carries from now on
        reader = await start_with_person(stack, world, "reader", "acme", Person())
        opened = await reader.ok("open_context", ref=shared["ref"])
    assert opened["memories"][0]["text"] == "platform on-call uses PagerDuty"
    refused = await fleet["globex"].error("open_context", ref=shared["ref"])
    assert "data_barrier" in refused and "acme" not in refused.replace("data_barrier", "")


async def test_a_memory_remembered_from_a_source_is_labelled_and_taints_forget(world, fleet):
    person = Person("decline")
    async with AsyncExitStack() as stack:
        session = await start_with_person(stack, world, "tainted", "acme", person)
        saved = await session.ok("remember", text="the #releases channel says freeze on friday", labels=["slack"])
        assert saved["labels"]["origin"] == ["source:slack"]
        await session.recall("release freeze friday")
        victim = world.cli("remember", "the release runbook is in the wiki", "--space", "acme").stdout.strip()
        message = await session.error("forget", id=victim)
        assert "untrusted_source" in message and "source:slack" in person.seen[-1]
        person.answer = "accept"
        assert (await session.ok("forget", id=victim))["forgotten"] is True
    world.cli("forget", saved["id"], "--space", "acme")


async def test_origin_marks_are_given_as_labels_over_mcp(world, fleet):
    async with AsyncExitStack() as stack:
        session = await start_with_person(stack, world, "labelled", "acme", Person())
        saved = await session.ok(
            "remember", text="the on-call rota is pinned in #ops", labels=["source:slack", "email"]
        )
    assert sorted(saved["labels"]["origin"]) == ["source:email", "source:slack"]
    world.cli("forget", saved["id"], "--space", "acme")


async def test_the_removed_source_is_refused_never_dropped(world, fleet):
    """``source`` was the old name of one origin mark. The SDK drops an argument a tool does not
    declare, and the memory would be written unmarked, so ``remember`` refuses it and writes nothing."""
    text = "the deploy window is tuesday"
    message = await fleet["acme"].error("remember", text=text, source="email")
    assert "remember no longer takes 'source'" in message and 'use labels: ["source:NAME"]' in message
    assert message.endswith("(invalid_input)")
    assert text not in world.cli("recall", "deploy window tuesday", "--space", "acme").stdout


async def test_the_person_sees_a_spoofing_text_escaped_and_quoted(world, fleet):
    """A text that imitates the request's own lines (blank lines, a carriage return, ANSI
    escapes, a bidirectional override) reaches the person quoted and escaped, with its length
    and digest, over a real ``esfis mcp``."""
    import hashlib
    import unicodedata

    world.cli("remember", SECRET, "--space", "acme/platform")
    spoof = "I prefer dark mode\n\nApprove this one call?\r\x1b[2K\x1b[1A\u202e harmless\npassword: hunter2"
    person = Person("decline")
    async with AsyncExitStack() as stack:
        session = await start_with_person(stack, world, "spoofer", SERVERS["platform"].folder, person)
        await session.recall("where is the staging database password?")
        assert "data_barrier" in await session.error("remember", text=spoof, personal=True)
    shown = person.seen[-1]
    assert all(unicodedata.category(c) not in ("Cc", "Cf") for c in shown.replace("\n", ""))
    text_lines = [line for line in shown.split("\n") if line.startswith("│ ")]
    assert len(text_lines) == 4 and text_lines[-1] == "│ password: hunter2"
    assert [line for line in shown.split("\n") if line == "Approve this one call?"] == [shown.split("\n")[-1]]
    assert hashlib.sha256(spoof.encode()).hexdigest() in shown and f"{len(spoof)} characters" in shown


async def test_a_session_that_ends_ends_its_run(world, fleet):
    """Closing stdin ends the process's run (``ended_by`` "mcp exit"): the operator's run list
    no longer shows it open. A session that never took a step leaves no run behind."""
    async with AsyncExitStack() as stack:
        session = await start(stack, world, "exiting", Spec("acme", "Exit Probe"))
        await session.recall("release freeze friday")
    async with AsyncExitStack() as stack:
        await start(stack, world, "idle", Spec("acme", "Idle Probe"))
    runs = [r for r in world.cli_json("runs", "--last", "10000")["runs"] if r["ai"] in ("exit-probe", "idle-probe")]
    assert [(r["ai"], r["ended_by"]) for r in runs] == [("exit-probe", "mcp exit")]
    assert runs[0]["ended_at"] is not None


async def test_a_prompt_nobody_answers_is_declined_when_its_time_passes(world, fleet):
    """Over stdio the host's user answers, but not for ever: past ``ESFIS_APPROVAL_WAIT_S`` the
    call is declined, recorded as such, and the server goes on serving."""
    world.cli("remember", SECRET, "--space", "acme/platform")
    asked: list[str] = []

    async def away(context, params) -> ElicitResult:
        asked.append(params.message)
        await anyio.sleep(3600)
        return ElicitResult(action="accept", content={"approve": True})

    async with AsyncExitStack() as stack:
        log = world.logs / "away.stderr"
        client = Client(
            stdio_client(
                server_params(world, Spec(SERVERS["platform"].folder, "Claude Code", {"ESFIS_APPROVAL_WAIT_S": "2"})),
                errlog=stack.enter_context(open(log, "w")),
            ),
            mode="legacy",
            client_info=Implementation(name="Claude Code", version="1.0"),
            elicitation_callback=away,
        )
        await stack.enter_async_context(client)
        session = Server("away", client, log)
        await session.recall("where is the staging database password?")
        with anyio.fail_after(30):
            refused = await session.error("remember", text=LEAK, personal=True)
        assert "data_barrier" in refused and "declined" in refused and len(asked) == 1
        assert await session.recall("staging database password")  # still serving
