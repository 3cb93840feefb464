/**
 * EsfisStore, LangGraph.js's BaseStore over esfis, in real LangGraph.js graphs against a real
 * `esfis serve` (the real model ranks): namespaces are spaces, a put of a key supersedes, a delete
 * forgets, search runs recall with the metadata filter before ranking, and an Acme graph never
 * reads Globex's namespace.
 */

import assert from "node:assert/strict";
import { before, test } from "node:test";

import { Annotation, END, type LangGraphRunnableConfig, START, StateGraph, getStore } from "@langchain/langgraph";
import type { BaseStore } from "@langchain/langgraph-checkpoint";

import { Esfis, InvalidInput, NotFound, OutOfReach, SpaceNotFound } from "../src/index.js";
import { EsfisStore, InvalidNamespaceError, MAX_KEY_CHARS } from "../src/langgraph.js";
import { ACME_AUTH, GLOBEX_AUTH, OPERATOR_TOKEN, QUESTION, SERVER_URL, agentToken } from "./support.js";

const ACME = ["acme"];
const PLATFORM = ["acme", "platform"];
const GLOBEX = ["globex"];

const State = Annotation.Root({
  question: Annotation<string>(),
  found: Annotation<string[]>(),
});

type Node = (state: typeof State.State, config: LangGraphRunnableConfig) => Promise<Partial<typeof State.State>>;

function oneNodeGraph(node: Node, store: BaseStore) {
  return new StateGraph(State).addNode("agent", node).addEdge(START, "agent").addEdge("agent", END).compile({ store });
}

/**
 * A store on a new agent token scoped to `space`: a token is one standing run whose labels only
 * grow, and a run that read acme may not write into acme/platform (the barrier), so each test has
 * its own.
 */
function storeFor(space: string): EsfisStore {
  return new EsfisStore(new Esfis(SERVER_URL, agentToken(space)), { fields: ["text"] });
}

/** A space made by the operator's route (an agent token cannot make one). */
async function createSpace(name: string): Promise<void> {
  const answer = await fetch(`${SERVER_URL}/v1/spaces`, {
    method: "POST",
    headers: { Authorization: `Bearer ${OPERATOR_TOKEN}`, "Content-Type": "application/json" },
    body: JSON.stringify({ name }),
  });
  if (answer.status !== 201) throw new Error(`space ${name}: ${answer.status} ${await answer.text()}`);
}

let globex: EsfisStore;

before(async () => {
  globex = storeFor("globex");
  await globex.put(GLOBEX, "auth", { text: GLOBEX_AUTH, kind: "decision" });
});

test("a graph stores and searches memories through esfis", async () => {
  const acme = storeFor("acme");
  const graph = oneNodeGraph(async (state, config) => {
    const store = config.store as BaseStore;
    await store.put(PLATFORM, "deploys", { text: "Acme deploys go through ArgoCD", kind: "decision", priority: 3 });
    await store.put(PLATFORM, "standup", { text: "The platform standup is at 9:30", kind: "habit", priority: 1 });
    await store.put(ACME, "auth", { text: ACME_AUTH, kind: "decision", priority: 2 });
    const hits = await store.search(ACME, { query: state.question, filter: { kind: "decision" }, limit: 5 });
    return { found: hits.map((h) => `${h.namespace.join("/")}:${h.key}`) };
  }, acme);
  const out = await graph.invoke({ question: "how do we ship to production?" });
  // Recall ranks ArgoCD first; the habit is filtered out before ranking; acme reaches acme/platform.
  assert.deepEqual(out.found, ["acme/platform:deploys", "acme:auth"]);
  const ranged = await acme.search(ACME, { filter: { priority: { $gte: 2 } } }); // no query: the newest first
  assert.deepEqual(
    ranged.map((h) => h.key),
    ["auth", "deploys"],
  );
  assert.ok(ranged.every((h) => h.score === undefined));
  const item = await acme.get(PLATFORM, "deploys");
  assert.ok(item);
  assert.deepEqual(item.value, { text: "Acme deploys go through ArgoCD", kind: "decision", priority: 3 });
  assert.deepEqual(item.namespace, PLATFORM);
  assert.ok(item.createdAt instanceof Date);
});

test("a put of an existing key supersedes, and a delete forgets", async () => {
  const acme = storeFor("acme");
  await acme.put(ACME, "oncall", { text: "Alice is on call this week" });
  const [first] = await acme.client.recall({ filter: { key: "oncall" }, space: "acme" });
  assert.ok(first);
  await acme.put(ACME, "oncall", { text: "Bob is on call this week" });
  const item = await acme.get(ACME, "oncall");
  assert.ok(item);
  assert.deepEqual(item.value, { text: "Bob is on call this week" });
  assert.ok(item.createdAt <= item.updatedAt); // created with the first version, updated by the second
  assert.ok((await acme.client.get(first.id)).supersededBy); // superseded, not erased
  assert.deepEqual(await acme.search(ACME, { filter: { text: { $in: ["Alice is on call this week"] } } }), []);
  const [current] = await acme.client.recall({ filter: { key: "oncall" }, space: "acme" });
  assert.ok(current);
  await acme.delete(ACME, "oncall");
  assert.equal(await acme.get(ACME, "oncall"), null);
  await assert.rejects(acme.client.get(current.id), NotFound); // forgotten for good
});

test("an Acme graph can never read Globex", async () => {
  const acme = storeFor("acme");
  await acme.put(ACME, "auth", { text: ACME_AUTH, kind: "decision" });
  const graph = oneNodeGraph(async (state) => {
    const store = getStore() as BaseStore;
    const found = (await store.search(ACME, { query: state.question, limit: 10 })).map((h) => String(h.value["text"]));
    found.push(...(await store.search([], { query: state.question, limit: 10 })).map((h) => String(h.value["text"])));
    try {
      await store.search(GLOBEX, { query: state.question });
    } catch (refused) {
      if (!(refused instanceof OutOfReach)) throw refused;
      found.push(`refused: ${refused.message}`);
    }
    return { found };
  }, acme);
  const out = await graph.invoke({ question: QUESTION });
  assert.ok(out.found.includes(ACME_AUTH), String(out.found));
  assert.ok(!out.found.some((t) => t.includes("Clerk")), String(out.found));
  assert.match(out.found.at(-1) ?? "", /^refused: namespace \["globex"\]/);
  await assert.rejects(acme.get(GLOBEX, "auth"), OutOfReach);
  assert.ok((await acme.listNamespaces()).every((n) => n[0] === "acme"));
  assert.equal((await globex.get(GLOBEX, "auth"))?.value["text"], GLOBEX_AUTH); // it is there, for Globex
});

test("listNamespaces lists what the token reaches", async () => {
  const acme = storeFor("acme");
  await acme.put(PLATFORM, "deploys", { text: "Acme deploys go through ArgoCD" });
  await acme.put(ACME, "auth", { text: ACME_AUTH });
  const all = (await acme.listNamespaces()).map((n) => n.join("/"));
  assert.ok(all.includes("acme") && all.includes("acme/platform"), String(all));
  assert.deepEqual(await acme.listNamespaces({ prefix: PLATFORM }), [PLATFORM]);
  assert.deepEqual(await acme.listNamespaces({ maxDepth: 1 }), [ACME]);
  assert.deepEqual(await acme.listNamespaces({ suffix: ["platform"] }), [PLATFORM]);
});

test("listNamespaces lists every namespace, however many, and never one of Globex", async () => {
  // More than a page of spaces (200), and more than the 100 items the store once read.
  const teams = Array.from({ length: 230 }, (_, i) => ["acme", "teams", `t${String(i).padStart(3, "0")}`]);
  for (const names of [[["acme", "teams"]], teams]) {
    for (let i = 0; i < names.length; i += 10) {
      await Promise.all(names.slice(i, i + 10).map((n) => createSpace(n.join("/"))));
    }
  }
  const acme = storeFor("acme");
  await acme.put(teams[0] as string[], "charter", { text: "team 0 owns the billing service" });
  assert.deepEqual(await acme.listNamespaces({ prefix: ["acme", "teams"], limit: 500 }), [["acme", "teams"], ...teams]);
  const all = await acme.listNamespaces({ limit: 500 });
  assert.equal(all.length, 233, String(all.length)); // acme, acme/platform, acme/teams and its 230
  assert.deepEqual(await acme.listNamespaces({ suffix: ["t229"] }), [teams[229]]);
  assert.deepEqual(await storeFor("globex").listNamespaces({ limit: 500 }), [GLOBEX]);
});

test("what cannot map fails with a clear error", async () => {
  const acme = storeFor("acme");
  await assert.rejects(acme.put(["Acme"], "k", { text: "upper case is no space name" }), (e: unknown) => {
    return e instanceof InvalidNamespaceError && /not a space segment/.test(e.message);
  });
  await assert.rejects(acme.put(ACME, "k".repeat(MAX_KEY_CHARS + 1), { text: "a key too long" }), (e: unknown) => {
    return e instanceof InvalidInput && e.message.includes(`at most ${MAX_KEY_CHARS} characters`);
  });
  await assert.rejects(acme.put(GLOBEX, "k", { text: "a namespace this token may not write" }), (e: unknown) => {
    return e instanceof OutOfReach && e.message.startsWith('namespace ["globex"]');
  });
  await assert.rejects(acme.put(["acme", "finance"], "k", { text: "a space nobody made" }), (e: unknown) => {
    return e instanceof SpaceNotFound && e.message.startsWith('namespace ["acme","finance"]');
  });
  await assert.rejects(acme.put(ACME, "big", { text: "x".repeat(5000) }), (e: unknown) => {
    return e instanceof InvalidInput && /data/.test(e.message); // over esfis's 4 KiB of metadata
  });
  await assert.rejects(acme.search(ACME, { limit: 90, offset: 20 }), (e: unknown) => {
    return e instanceof InvalidInput && /limit/.test(e.message);
  });
});
