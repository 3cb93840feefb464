"""A property of the barrier over HTTP, against callers that choose everything: random agent
tokens, scoped tokens, runs-only tokens and the run tokens they open, with and without made-up
run headers, recall, get, share, open, remember and replace across a space tree, while an
operator adds grants and denies at random. A real ``esfis serve`` with the real model.

The oracle keeps the truth the server must never contradict:
- **no laundering**: a write that succeeds puts data only where every space its credential's
  run has received may go: the target holds it (it lies at or below the target), or a grant in
  force covers the crossing and no deny stands between that AI and the data;
- **deny is absolute**: a denied AI never receives a text of a space it is denied.

What a run has received is tracked per *family*: an agent token's standing run and every run
token it opened share one (whoever holds the agent token holds them all); a run token opened by
a runs-only token is a family of its own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from server.spaces import contains

SPACES = ["a", "a/x", "a/y", "b", "b/x"]
AIS = ["claude-code", "cursor"]
WORDS = ["auth", "deploy", "billing", "secret", "vault", "oncall", "release", "schema", "queue", "cache"]


@dataclass
class Credential:
    token: str
    ai: str
    family: str
    scope: str | None = None
    runs_only: bool = False
    run_token: bool = False


@dataclass
class Oracle:
    memories: dict[str, tuple[str | None, frozenset[str]]] = field(default_factory=dict)  # id → space, provenance
    received: dict[str, set[str]] = field(default_factory=dict)  # family → spaces of what it received
    seen_ids: dict[str, list[str]] = field(default_factory=dict)  # family → ids it may share
    grants: dict[str, tuple[str, str | None, str | None]] = field(default_factory=dict)  # id → from, to, ai
    denies: set[tuple[str, str]] = field(default_factory=set)  # (ai, space)
    writes: int = 0
    refusals: int = 0

    def denied(self, ai: str, space: str | None) -> bool:
        return space is not None and any(a in (ai, "*") and contains(s, space) for a, s in self.denies)

    def receive(self, cred: Credential, memory_id: str) -> None:
        assert memory_id in self.memories, f"a memory the test never wrote: {memory_id}"
        space, provenance = self.memories[memory_id]
        assert not self.denied(cred.ai, space), f"{cred.ai} received a text of {space}, which it is denied"
        family = self.received.setdefault(cred.family, set())
        family.update(provenance | ({space} if space is not None else set()))
        self.seen_ids.setdefault(cred.family, []).append(memory_id)

    def check_write(self, cred: Credential, target: str | None, extra: frozenset[str] = frozenset()) -> frozenset[str]:
        carried = frozenset(self.received.get(cred.family, set())) | extra
        for space in carried:
            if target is not None and contains(target, space):
                continue
            crossing = [
                g
                for g, (src, dst, ai) in self.grants.items()
                if contains(src, space) and dst == target and ai in (None, cred.ai)
            ]
            assert crossing, f"{cred.family} carried {space} into {target or 'personal'} with no grant"
            assert not self.denied(cred.ai, space), f"{cred.ai} moved {space}'s data past a deny under a grant"
        return carried


@pytest.fixture(scope="module")
def tree(server, operator):
    names = {s["name"] for s in operator.get("/v1/spaces").json()["spaces"]}
    for name in SPACES:
        if name not in names:
            assert operator.post("/v1/spaces", json={"name": name}).status_code == 201
    return server


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    """One truth for the module's server: a later seed's callers reach the earlier one's memories."""
    return Oracle()


@pytest.mark.parametrize("seed", [7, 2026])
def test_no_write_launders_and_no_denied_ai_reads(tree, operator, oracle, seed):
    rng = random.Random(seed)
    writes, refusals = oracle.writes, oracle.refusals
    server = tree
    creds: list[Credential] = []
    for ai in AIS:
        for scope in (None, "a", "b"):
            token = server.agent_token(ai, space=scope)
            creds.append(Credential(token, ai, f"{ai}:{scope}:{token[-6:]}", scope))
        creds.append(Credential(server.token("--ai", ai, "--runs-only"), ai, "", runs_only=True))
    clients = {c.token: server.client(c.token) for c in creds}
    try:
        for step in range(240):
            cred = rng.choice(creds)
            client = clients[cred.token]
            where = rng.choice([s for s in SPACES if cred.scope is None or contains(cred.scope, s)])
            headers = {"X-Esfis-Run": f"r{rng.randrange(3)}"} if rng.random() < 0.1 else {}
            op = rng.choices(
                ["recall", "remember", "share_open", "get", "replace", "grant", "policy", "run"],
                [28, 25, 10, 8, 7, 8, 6, 10],
            )[0]
            text = " ".join(rng.sample(WORDS, 3)) + f" #{seed}-{step}"
            if headers:  # a made-up run header is refused before anything is read or written
                answer = client.post("/v1/recall", json={"query": text, "space": where}, headers=headers)
                assert answer.status_code == 400
                continue
            if cred.runs_only and op != "run":
                assert client.post("/v1/recall", json={"query": text, "space": where}).status_code == 403
                continue
            if op == "recall":
                answer = client.post("/v1/recall", json={"query": text, "space": where})
                if answer.status_code == 200:
                    for memory in answer.json()["memories"]:
                        oracle.receive(cred, memory["id"])
                else:
                    assert answer.status_code == 403, answer.text
            elif op in ("remember", "replace"):
                personal = rng.random() < 0.3 and cred.scope is None
                target = None if personal else where
                if op == "replace":
                    known = [i for i in oracle.seen_ids.get(cred.family, []) if oracle.memories[i][0] is not None]
                    if not known:
                        continue
                    old = rng.choice(known)
                    answer = client.post(f"/v1/memories/{old}/replace", json={"text": text, "space": where})
                    target = oracle.memories[old][0]
                    extra = oracle.memories[old][1] | {target}
                else:
                    body = {"text": text, "personal": True} if personal else {"text": text, "space": target}
                    answer = client.post("/v1/memories", json=body)
                    extra = frozenset()
                if answer.status_code == 201:
                    carried = oracle.check_write(cred, target, frozenset(s for s in extra if s))
                    oracle.memories[answer.json()["id"]] = (answer.json()["space"], carried)
                    if op == "replace":
                        oracle.received.setdefault(cred.family, set()).update(s for s in extra if s)
                    oracle.writes += 1
                else:
                    assert answer.status_code in (403, 404, 409), answer.text
                    oracle.refusals += 1
            elif op == "get":
                known = list(oracle.memories)
                if not known:
                    continue
                memory_id = rng.choice(known)
                answer = client.get(f"/v1/memories/{memory_id}", params={"space": where})
                if answer.status_code == 200:
                    oracle.receive(cred, memory_id)
            elif op == "share_open":
                known = oracle.seen_ids.get(cred.family, [])
                if not known:
                    continue
                shared = client.post("/v1/context", json={"memory_ids": [rng.choice(known)], "space": where})
                if shared.status_code != 201:
                    continue
                reader = rng.choice([c for c in creds if not c.runs_only])
                reader_space = rng.choice([s for s in SPACES if reader.scope is None or contains(reader.scope, s)])
                opened = clients[reader.token].get(
                    f"/v1/context/{shared.json()['ref']}", params={"space": reader_space}
                )
                if opened.status_code == 200:
                    for memory in opened.json()["memories"]:
                        if memory["text"] is not None:
                            oracle.receive(reader, memory["id"])
                else:
                    assert opened.status_code == 403, opened.text
            elif op == "grant":
                if oracle.grants and rng.random() < 0.3:
                    gone = rng.choice(list(oracle.grants))
                    assert operator.delete(f"/v1/grants/{gone}").status_code == 200
                    del oracle.grants[gone]
                    continue
                src = rng.choice(SPACES)
                dst = rng.choice([s for s in SPACES if s != src] + [None])
                ai = rng.choice(AIS + [None])
                made = operator.post("/v1/grants", json={"from": src, "to": dst, "ai": ai})
                assert made.status_code == 201, made.text
                oracle.grants[made.json()["id"]] = (src, dst, ai)
            elif op == "policy":
                ai, space = rng.choice(AIS), rng.choice(SPACES)
                if (ai, space) in oracle.denies:
                    assert (
                        operator.request("DELETE", "/v1/policies", params={"ai": ai, "space": space}).status_code == 204
                    )
                    oracle.denies.discard((ai, space))
                else:
                    rule = operator.put("/v1/policies", json={"ai": ai, "space": space, "effect": "deny"})
                    assert rule.status_code == 200, rule.text
                    oracle.denies.add((ai, space))
            elif op == "run":
                opener = rng.choice([c for c in creds if not c.run_token])
                opened = clients[opener.token].post("/v1/runs", json={})
                assert opened.status_code == 201, opened.text
                body = opened.json()
                family = f"run:{body['run']}" if opener.runs_only else opener.family
                run = Credential(body["token"], opener.ai, family, opener.scope, run_token=True)
                creds.append(run)
                clients[run.token] = server.client(run.token)
        # Both sides exercised: writes that went through and writes the barrier refused.
        assert oracle.writes - writes >= 8 and oracle.refusals - refusals >= 5, (oracle.writes, oracle.refusals)
    finally:
        for client in clients.values():
            client.close()
        for ai, space in list(oracle.denies):
            operator.request("DELETE", "/v1/policies", params={"ai": ai, "space": space})
        for grant in oracle.grants:
            operator.delete(f"/v1/grants/{grant}")
        oracle.denies.clear()
        oracle.grants.clear()
