/**
 * esfis-client against a real `esfis serve`: the three-line start, isolation through the client,
 * typed answers, each error code its own class (and the list held to the server's), the barrier,
 * held calls awaited and approved by the operator, dedupe, recall as of a time, context by
 * reference, the operator's streamed import and paged export, and an agent's listings (spaces and
 * memories, page by page; what a page lists is read by the run).
 */

import assert from "node:assert/strict";
import { before, describe, test } from "node:test";

import {
  ApprovalPending,
  BY_CODE,
  DataBarrier,
  ERROR_CLASSES,
  Esfis,
  EsfisError,
  Held,
  HeldForApproval,
  InvalidInput,
  InvalidMemoryId,
  InvalidSpaceName,
  type ImportRow,
  type Memory,
  NotFound,
  OutOfReach,
  SpaceNotFound,
  Unauthorized,
  isHeld,
} from "../src/index.js";
import {
  ACME_AUTH,
  GLOBEX_AUTH,
  OPERATOR_TOKEN,
  QUESTION,
  RUN,
  SECRET,
  SERVER_URL,
  decide,
  harness,
  operator,
  serverCodes,
  session,
  texts,
} from "./support.js";

const globexIds: string[] = [];

before(async () => {
  const acme = await session("acme");
  await acme.remember(ACME_AUTH);
  const platform = await session("acme/platform");
  await platform.remember(SECRET);
  const globex = await session("globex");
  const remembered = await globex.remember(GLOBEX_AUTH);
  assert.ok(!isHeld(remembered));
  globexIds.push(remembered.id);
});

describe("the three-line start", () => {
  test("a TypeScript agent remembers and recalls in three lines", async () => {
    const { token } = await harness().openRun({ space: "acme" }); // what a harness hands the agent

    const esfis = new Esfis(SERVER_URL, token, { space: "acme" });
    await esfis.remember("Acme deploys go through ArgoCD", { data: { kind: "decision" } });
    const found = await esfis.recall("how does acme deploy?", { filter: { kind: "decision" } });

    assert.equal(found[0]?.text, "Acme deploys go through ArgoCD");
    assert.equal(found[0]?.space, "acme");
    assert.deepEqual(found[0]?.data, { kind: "decision" });
  });
});

describe("isolation", () => {
  test("recall from acme returns Auth0, never Clerk; from globex the reverse", async () => {
    const agent = await session(); // unscoped: stands where each call says
    const fromAcme = texts(await agent.recall(QUESTION, { space: "acme" }));
    assert.ok(fromAcme.includes(ACME_AUTH), String(fromAcme));
    assert.ok(!fromAcme.some((t) => t?.includes("Clerk")));
    const other = await session();
    const fromGlobex = texts(await other.recall(QUESTION, { space: "globex" }));
    assert.ok(fromGlobex.includes(GLOBEX_AUTH));
    assert.ok(!fromGlobex.some((t) => t?.includes("Auth0")));
  });

  test("a client scoped to acme never reaches globex: out of reach, and its ids are not found", async () => {
    const acme = await session("acme");
    assert.ok(texts(await acme.recall(QUESTION)).includes(ACME_AUTH)); // a scoped run stands in its space
    const refused = await acme.recall(QUESTION, { space: "globex" }).catch((e: unknown) => e);
    assert.ok(refused instanceof OutOfReach, String(refused));
    assert.ok(refused instanceof EsfisError);
    assert.equal(refused.status, 403);
    assert.equal(refused.code, "out_of_reach");
    assert.ok(!refused.message.includes("globex"), refused.message); // names only its own space
    await assert.rejects(acme.get(globexIds[0] as string), NotFound); // as one that never existed
  });
});

describe("typed answers", () => {
  test("a memory round-trips as a typed value, unknown fields left out", async () => {
    const client = await session("acme");
    const memory = await client.remember(`Acme's release train leaves on Thursdays (${RUN})`);
    assert.ok(!(memory instanceof Held));
    assert.equal(memory.space, "acme");
    assert.equal(memory.ai, "ts-agent");
    assert.ok(memory.createdAt instanceof Date && !Number.isNaN(memory.createdAt.getTime()));
    assert.equal(memory.labels.space, "acme");
    assert.equal(memory.duplicateOf, null);
    assert.ok(!("created_at" in memory) && !("duplicate_of" in memory)); // the wire's names are not kept
    const { duplicateOf: _d, similar: _s, ...stored } = memory;
    assert.deepEqual(await client.get(memory.id), stored);

    const newer = await client.replace(memory.id, `Acme's release train leaves on Wednesdays (${RUN})`);
    assert.ok(!isHeld(newer));
    assert.equal((await client.get(memory.id)).supersededBy, newer.id);
    assert.equal(await client.forget(newer.id), undefined);
    await assert.rejects(client.get(newer.id), NotFound);
  });

  test("labels, validUntil and data travel with the memory", async () => {
    const client = await session("acme");
    const until = new Date(Date.now() + 86_400_000);
    const memory = await client.remember(`Acme's Slack says the freeze starts Monday (${RUN})`, {
      labels: ["source:slack"],
      validUntil: until,
      data: { kind: "notice", week: 12 },
    });
    assert.ok(!isHeld(memory));
    assert.deepEqual(memory.labels.origin, ["source:slack"]);
    assert.ok(memory.validUntil instanceof Date);
    assert.ok(Math.abs(memory.validUntil.getTime() - until.getTime()) < 1000);
    assert.deepEqual(memory.data, { kind: "notice", week: 12 });
  });

  test("the same fact twice is stored once, unless dedupe is false", async () => {
    const client = await session("acme");
    const first = await client.remember(`Acme's on-call rotates every Monday at 10:00 (${RUN})`);
    const again = await client.remember(`Acme's on-call rotates every Monday at 10:00 (${RUN})`);
    assert.ok(!isHeld(first) && !isHeld(again));
    assert.equal(again.duplicateOf, first.id);
    assert.equal(again.id, first.id);
    const forced = await client.remember(`Acme's on-call rotates every Monday at 10:00 (${RUN})`, { dedupe: false });
    assert.ok(!isHeld(forced));
    assert.notEqual(forced.id, first.id);
    assert.equal(forced.duplicateOf, null);
  });

  test("recall as of a time sees the version valid then", async () => {
    const client = await session("acme");
    const old = await client.remember(`Acme's staging cluster runs Kubernetes 1.29 (${RUN})`, { data: { topic: `k8s-version-${RUN}` } });
    assert.ok(!isHeld(old));
    await new Promise((r) => setTimeout(r, 50));
    const then = new Date();
    await new Promise((r) => setTimeout(r, 50));
    await client.replace(old.id, `Acme's staging cluster runs Kubernetes 1.31 (${RUN})`, { data: { topic: `k8s-version-${RUN}` } });
    const now = await client.recall({ filter: { topic: `k8s-version-${RUN}` } });
    assert.deepEqual(texts(now), [`Acme's staging cluster runs Kubernetes 1.31 (${RUN})`]);
    const past = await client.recall({ filter: { topic: `k8s-version-${RUN}` }, asOf: then });
    assert.deepEqual(texts(past), [`Acme's staging cluster runs Kubernetes 1.29 (${RUN})`]);
  });

  test("a shared reference opens in another session of the same space", async () => {
    const writer = await session("acme");
    const memory = await writer.remember(`Acme's incident channel is #acme-incidents (${RUN})`);
    assert.ok(!isHeld(memory));
    const reference = await writer.share([memory.id]);
    assert.match(reference.ref, /^ctx_/);
    assert.deepEqual(
      reference.memories.map((m) => m.id),
      [memory.id],
    );
    const reader = await session("acme");
    const opened = await reader.openContext(reference.ref);
    assert.deepEqual(texts(opened.memories), [`Acme's incident channel is #acme-incidents (${RUN})`]);
    assert.equal(opened.memories[0]?.forgotten, false);
  });
});

describe("errors as types", () => {
  test("each error code is its own class", async () => {
    const stranger = new Esfis(SERVER_URL, "esfis_not_a_token");
    await assert.rejects(stranger.recall(QUESTION), Unauthorized);
    const client = await session();
    await assert.rejects(client.remember("a fact", { space: "initech" }), SpaceNotFound);
    const invalid = await client.remember("a fact", { space: "Acme" }).catch((e: unknown) => e);
    assert.ok(invalid instanceof InvalidSpaceName && invalid instanceof InvalidInput, String(invalid));
    assert.equal(invalid.status, 422);
    assert.equal(invalid.name, "InvalidSpaceName");
    await assert.rejects(client.get("mem_never_was"), InvalidMemoryId);
    await assert.rejects(client.get("mem_" + "a".repeat(26)), NotFound);
  });

  test("a bad input is InvalidInput naming its field", async () => {
    const client = await session("acme");
    const limit = await client.recall("anything", { limit: 0 }).catch((e: unknown) => e);
    assert.ok(limit instanceof InvalidInput, String(limit));
    assert.equal(limit.field, "limit");
    assert.match(limit.message, /limit/);
    const asOf = await client.recall("anything", { asOf: "7d" }).catch((e: unknown) => e);
    assert.ok(asOf instanceof InvalidInput, String(asOf));
    assert.equal(asOf.field, "as_of");
    await assert.rejects(client.recall("billing", { filter: { kind: { $regex: "^dec" } } }), (e: unknown) => {
      return e instanceof InvalidInput && /\$regex/.test(e.message);
    });
  });

  test("every code the server sends has its own class, with the same status", () => {
    const codes = serverCodes();
    assert.ok(Object.keys(codes).length >= 30, JSON.stringify(codes));
    const missing = Object.keys(codes).filter((code) => !BY_CODE.has(code));
    assert.deepEqual(missing, []);
    const statuses = Object.fromEntries(Object.keys(codes).map((code) => [code, BY_CODE.get(code)?.status]));
    assert.deepEqual(statuses, codes);
    const all = ERROR_CLASSES.map((kind) => kind.code);
    assert.equal(new Set(all).size, all.length); // one class per code
  });

  test("the barrier answers DataBarrier through the client", async () => {
    const agent = await session(); // a run that reads acme/platform…
    assert.ok(texts(await agent.recall("staging database password", { space: "acme/platform" })).includes(SECRET));
    const refused = await agent
      .remember("staging db password: vault secret/acme-stg", { space: "globex" }) // …may not carry it into globex
      .catch((e: unknown) => e);
    assert.ok(refused instanceof DataBarrier, String(refused));
    assert.equal(refused.code, "data_barrier");
  });
});

describe("held calls", () => {
  test("a held write is a value, awaited until the operator approves it", async () => {
    const agent = await session();
    await agent.recall("staging database password", { space: "acme/platform" }); // now carries acme/platform
    const held = await agent.remember("the deploy checklist lives in the wiki", {
      personal: true,
      space: "acme/platform",
    });
    assert.ok(held instanceof Held, String(held));
    assert.equal(held.approval.status, "pending");
    assert.equal(held.approval.action, "remember");
    assert.equal((await held.wait({ timeout: 200 })).status, "pending"); // time ran out: a value, no error
    await assert.rejects(
      agent.remember("another personal note", { personal: true, space: "acme/platform" }),
      ApprovalPending, // one held call at a time
    );
    const approving = new Promise((r) => setTimeout(r, 300)).then(() => decide(held.id));
    const approval = await held.wait({ timeout: 30_000 });
    await approving;
    assert.ok(approval.approved, approval.status);
    assert.ok(approval.memory);
    const written = await agent.get(approval.memory, { space: "acme/platform" });
    assert.equal(written.text, "the deploy checklist lives in the wiki");
  });

  test("raiseHeld throws HeldForApproval, whose held can be withdrawn", async () => {
    const agent = await session(undefined, { raiseHeld: true });
    await agent.recall("staging database password", { space: "acme/platform" });
    const raised = await agent
      .remember("a personal note carrying platform data", { personal: true, space: "acme/platform" })
      .catch((e: unknown) => e);
    assert.ok(raised instanceof HeldForApproval, String(raised));
    const held = raised.held;
    assert.ok(held instanceof Held);
    await held.withdraw();
    assert.equal((await held.check()).status, "withdrawn");
  });

  test("waiting stops when its signal aborts", async () => {
    const agent = await session();
    await agent.recall("staging database password", { space: "acme/platform" });
    const held = await agent.remember("a note no one will approve", { personal: true, space: "acme/platform" });
    assert.ok(isHeld(held));
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 150);
    const started = Date.now();
    await assert.rejects(held.wait({ signal: controller.signal }), { name: "AbortError" });
    assert.ok(Date.now() - started < 5_000);
    await held.withdraw();
  });

  test("an aborted signal sends nothing", async () => {
    const agent = await session("acme");
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(agent.remember("never sent", { signal: controller.signal }), { name: "AbortError" });
    assert.ok(!texts(await agent.recall("never sent")).includes("never sent"));
  });
});

describe("the operator's", () => {
  test("an import streams its rows and reports each bad line", async () => {
    async function* rows(): AsyncGenerator<ImportRow> {
      yield { text: `Acme's CI runs on Buildkite (${RUN})`, space: "acme" };
      yield "this line is not JSON";
      yield { space: "acme" };
      yield new TextEncoder().encode(`{"text": "Globex ships on Fridays (${RUN})", "space": "globex"}`);
      yield { text: `Initech uses Jira (${RUN})`, space: "initech" };
    }
    const report = await operator().importMemories(rows(), { ai: "importer" });
    assert.deepEqual([report.imported, report.failed], [2, 3]);
    assert.deepEqual(
      report.errors.map((e) => e.line),
      [2, 3, 5],
    );
    assert.ok(report.errors.every((e) => e.reason));
    const agent = await session("acme");
    assert.ok(texts(await agent.recall("which CI does acme use?")).includes(`Acme's CI runs on Buildkite (${RUN})`));
  });

  test("the operator exports a subtree page by page, never another space", async () => {
    const op = operator();
    const paged = [];
    for await (const m of op.export({ space: "acme", below: true, page: 2 })) paged.push(m);
    const whole = [];
    for await (const m of op.export({ space: "acme", below: true })) whole.push(m);
    assert.ok(whole.length > 2);
    assert.deepEqual(
      paged.map((m) => m.id),
      whole.map((m) => m.id),
    ); // every page, once
    const all = new Set(whole.map((m) => m.text));
    assert.ok(all.has(ACME_AUTH) && all.has(SECRET));
    assert.ok(whole.every((m) => m.space === "acme" || m.space === "acme/platform"));
    const globex = [];
    for await (const m of op.export({ space: "globex", state: "current" })) globex.push(m);
    assert.ok(globex.some((m) => m.text === GLOBEX_AUTH));
    assert.ok(globex.every((m) => m.space === "globex"));
  });
});

describe("listings", () => {
  test("an agent lists the spaces and memories it reads, page by page, never another space's", async () => {
    const acme = await session("acme"); // a run token scoped to acme: no personal memories
    const first = await acme.listSpaces({ limit: 1 });
    assert.deepEqual([first.personal, first.spaces, first.nextCursor], [false, ["acme"], "acme"]);
    const names: string[] = [];
    for await (const name of acme.spaces({ page: 1 })) names.push(name);
    assert.ok(names.includes("acme") && names.includes("acme/platform"), String(names));
    assert.ok(names.every((n) => n === "acme" || n.startsWith("acme/")), String(names));
    assert.equal(new Set(names).size, names.length); // every page, once
    const listed: Memory[] = [];
    for await (const m of acme.memories({ page: 2 })) listed.push(m);
    assert.ok(listed.length > 2);
    assert.equal(new Set(listed.map((m) => m.id)).size, listed.length);
    assert.ok(listed.every((m, i) => i === 0 || m.createdAt <= (listed[i - 1] as Memory).createdAt)); // newest first
    assert.ok(listed.every((m) => m.space === "acme" || m.space?.startsWith("acme/")));
    const all = new Set(texts(listed));
    assert.ok(all.has(ACME_AUTH) && all.has(SECRET) && !all.has(GLOBEX_AUTH));
    const decisions = await acme.listMemories({ filter: { kind: "decision" }, limit: 200 });
    assert.ok(decisions.memories.every((m) => m.data["kind"] === "decision"));
    await assert.rejects(acme.listSpaces({ within: "globex" }), OutOfReach);
    await assert.rejects(acme.listMemories({ within: "globex" }), OutOfReach);
    const cursor = await acme.listMemories({ cursor: "not-a-cursor" }).catch((e: unknown) => e);
    assert.ok(cursor instanceof InvalidInput && cursor.field === "cursor", String(cursor));
    const limit = await acme.listSpaces({ limit: 0 }).catch((e: unknown) => e);
    assert.ok(limit instanceof InvalidInput && limit.field === "limit", String(limit));
  });

  test("what a page lists is in the delivery log and carried by the run", async () => {
    const agent = await session(); // unscoped: stands in acme, reads personal memories too
    assert.equal((await agent.listSpaces({ space: "acme" })).personal, true);
    const listed = await agent.listMemories({ space: "acme", within: "acme/platform" });
    assert.deepEqual(texts(listed.memories), [SECRET]);
    const answer = await fetch(`${SERVER_URL}/v1/deliveries?ai=ts-agent&last=1`, {
      headers: { Authorization: `Bearer ${OPERATOR_TOKEN}` },
    });
    const delivery = ((await answer.json()) as { deliveries: { items: { memory_id: string }[] }[] }).deliveries[0];
    assert.deepEqual(
      delivery?.items.map((i) => i.memory_id),
      listed.memories.map((m) => m.id),
    );
    // The run now carries acme/platform: a write into personal waits for a person…
    const held = await agent.remember(`platform secrets live in vault (${RUN})`, { space: "acme", personal: true });
    assert.ok(isHeld(held), String(held));
    await held.withdraw();
    // …where a run that only listed spaces carries nothing, and writes it at once.
    const other = await session();
    await other.listSpaces({ space: "acme" });
    assert.ok(!isHeld(await other.remember(`a personal note (${RUN})`, { space: "acme", personal: true })));
  });
});
