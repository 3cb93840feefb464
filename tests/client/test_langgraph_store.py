"""EsfisStore, LangGraph's BaseStore over esfis, in real LangGraph graphs against a real
``esfis serve`` (the real model ranks): namespaces are spaces, a put of a key supersedes, a delete
forgets, search runs recall with the metadata filter before ranking, and an Acme graph never
reads Globex's namespace."""

from __future__ import annotations

import asyncio
from typing import TypedDict

import pytest
from esfis_client import AsyncEsfis, Esfis, InvalidInput, NotFound, OutOfReach, SpaceNotFound
from esfis_client.langgraph import MAX_KEY_CHARS, EsfisStore
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError

from tests.client.client_support import ACME_AUTH, GLOBEX_AUTH, QUESTION

ACME = ("acme",)
PLATFORM = ("acme", "platform")
GLOBEX = ("globex",)


class State(TypedDict, total=False):
    question: str
    found: list[str]


def store_for(server, space: str | None = None, ai: str = "langgraph-agent") -> EsfisStore:
    token = server.agent_token(ai=ai, space=space)
    return EsfisStore(Esfis(server.url, token), aclient=AsyncEsfis(server.url, token), fields=["text"])


@pytest.fixture
def acme(server) -> EsfisStore:
    """A store on a new token scoped to acme: a token is one standing run whose labels only grow,
    and a run that read acme may not write into acme/platform (the barrier), so each test has its own."""
    return store_for(server, "acme")


@pytest.fixture(scope="module")
def globex(server) -> EsfisStore:
    store = store_for(server, "globex")
    store.put(GLOBEX, "auth", {"text": GLOBEX_AUTH, "kind": "decision"})
    return store


def one_node_graph(node, store: BaseStore):
    builder = StateGraph(State)
    builder.add_node("agent", node)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(store=store)


def test_a_graph_stores_and_searches_memories_through_esfis(acme):
    def agent(state: State, *, store: BaseStore) -> State:
        store.put(PLATFORM, "deploys", {"text": "Acme deploys go through ArgoCD", "kind": "decision", "priority": 3})
        store.put(PLATFORM, "standup", {"text": "The platform standup is at 9:30", "kind": "habit", "priority": 1})
        store.put(ACME, "auth", {"text": ACME_AUTH, "kind": "decision", "priority": 2})
        hits = store.search(ACME, query=state["question"], filter={"kind": "decision"}, limit=5)
        return {"found": [f"{'/'.join(h.namespace)}:{h.key}" for h in hits]}

    out = one_node_graph(agent, acme).invoke({"question": "how do we ship to production?"})
    # Recall ranks ArgoCD first; the habit is filtered out before ranking; acme reaches acme/platform.
    assert out["found"] == ["acme/platform:deploys", "acme:auth"]
    ranged = acme.search(ACME, filter={"priority": {"$gte": 2}})  # no query: the newest first
    assert [h.key for h in ranged] == ["auth", "deploys"] and all(h.score is None for h in ranged)
    item = acme.get(PLATFORM, "deploys")
    assert item is not None and item.value == {
        "text": "Acme deploys go through ArgoCD",
        "kind": "decision",
        "priority": 3,
    }
    assert item.namespace == PLATFORM and item.created_at.tzinfo is not None


def test_put_of_an_existing_key_supersedes_and_delete_forgets(server, acme):
    acme.put(ACME, "oncall", {"text": "Alice is on call this week"})
    first = acme.client.recall(filter={"key": "oncall"}, space="acme")[0]
    acme.put(ACME, "oncall", {"text": "Bob is on call this week"})
    item = acme.get(ACME, "oncall")
    assert item is not None and item.value == {"text": "Bob is on call this week"}
    assert item.created_at <= item.updated_at  # created with the first version, updated by the second
    assert acme.client.get(first.id).superseded_by is not None  # superseded, not erased
    assert [h.key for h in acme.search(ACME, filter={"text": {"$in": ["Alice is on call this week"]}})] == []
    current = acme.client.recall(filter={"key": "oncall"}, space="acme")[0]
    acme.delete(ACME, "oncall")
    assert acme.get(ACME, "oncall") is None
    with pytest.raises(NotFound):
        acme.client.get(current.id)  # forgotten for good


def test_an_acme_graph_can_never_read_globex(acme, globex):
    def agent(state: State) -> State:
        store = get_store()
        found = [h.value["text"] for h in store.search(ACME, query=state["question"], limit=10)]
        found += [h.value["text"] for h in store.search((), query=state["question"], limit=10)]
        try:
            store.search(GLOBEX, query=state["question"])
        except OutOfReach as refused:
            found.append(f"refused: {refused.message}")
        return {"found": found}

    acme.put(ACME, "auth", {"text": ACME_AUTH, "kind": "decision"})
    out = one_node_graph(agent, acme).invoke({"question": QUESTION})
    assert ACME_AUTH in out["found"]
    assert not any("Clerk" in t for t in out["found"])
    assert out["found"][-1].startswith("refused: namespace ('globex',)")
    with pytest.raises(OutOfReach):
        acme.get(GLOBEX, "auth")
    assert all(n[0] == "acme" for n in acme.list_namespaces())
    assert globex.get(GLOBEX, "auth").value["text"] == GLOBEX_AUTH  # it is there, for Globex


def test_list_namespaces_lists_what_the_token_reaches(acme):
    acme.put(PLATFORM, "deploys", {"text": "Acme deploys go through ArgoCD"})
    acme.put(ACME, "auth", {"text": ACME_AUTH})
    assert set(acme.list_namespaces()) >= {ACME, PLATFORM}
    assert acme.list_namespaces(prefix=PLATFORM) == [PLATFORM]
    assert acme.list_namespaces(max_depth=1) == [ACME]
    assert acme.list_namespaces(suffix=("platform",)) == [PLATFORM]


def test_list_namespaces_lists_every_namespace_however_many(server, acme, globex, monkeypatch):
    """More namespaces than a page of spaces holds, and than the 100 items the store once read:
    every one is listed, by both the blocking and the async path, and never one of Globex's."""
    monkeypatch.setattr("esfis_client.langgraph.SPACES_PAGE", 40)  # several pages of spaces
    teams = [("acme", "teams", f"t{i:03d}") for i in range(120)]
    with server.client(server.tokens["operator"]) as operator:
        for name in ["acme/teams", *("/".join(t) for t in teams)]:
            assert operator.post("/v1/spaces", json={"name": name}).status_code == 201
    acme.put(teams[0], "charter", {"text": "team 0 owns the billing service"})
    listed = acme.list_namespaces(prefix=("acme", "teams"), limit=500)
    assert listed == [("acme", "teams"), *teams]
    assert asyncio.run(acme.alist_namespaces(limit=500)) == sorted([ACME, PLATFORM, ("acme", "teams"), *teams])
    assert acme.list_namespaces(prefix=("acme", "teams"), max_depth=2, limit=500) == [("acme", "teams")]
    assert acme.list_namespaces(suffix=("t119",)) == [teams[-1]]
    assert globex.list_namespaces(limit=500) == [GLOBEX]


def test_what_cannot_map_fails_with_a_clear_error(acme):
    with pytest.raises(InvalidNamespaceError, match="not a space segment"):
        acme.put(("Acme",), "k", {"text": "upper case is no space name"})
    with pytest.raises(InvalidInput, match=f"at most {MAX_KEY_CHARS} characters"):
        acme.put(ACME, "k" * (MAX_KEY_CHARS + 1), {"text": "a key too long"})
    with pytest.raises(OutOfReach, match=r"namespace \('globex',\)"):
        acme.put(GLOBEX, "k", {"text": "a namespace this token may not write"})
    with pytest.raises(SpaceNotFound, match=r"namespace \('acme', 'finance'\)"):
        acme.put(("acme", "finance"), "k", {"text": "a space nobody made"})
    with pytest.raises(InvalidInput, match="data"):
        acme.put(ACME, "big", {"text": "x" * 5000})  # over esfis's 4 KiB of metadata
    with pytest.raises(InvalidInput, match="limit"):
        acme.search(ACME, limit=90, offset=20)


def test_an_async_graph_uses_the_store_through_the_async_client(acme):
    async def agent(state: State, *, store: BaseStore) -> State:
        await store.aput(PLATFORM, "runbook", {"text": "The platform runbook lives in Notion", "kind": "doc"})
        hits = await store.asearch(PLATFORM, query=state["question"], filter={"kind": "doc"})
        item = await store.aget(PLATFORM, "runbook")
        return {"found": [h.key for h in hits] + [item.value["text"]]}

    out = asyncio.run(one_node_graph(agent, acme).ainvoke({"question": "where is the runbook?"}))
    assert out["found"] == ["runbook", "The platform runbook lives in Notion"]
