/**
 * The client's own rules, against a tiny local HTTP server that answers from a script (no esfis
 * needed): reads sent again after 429 and 503, writes never; Retry-After honoured up to maxWait;
 * each code its class with `retryAfter`; a code this client does not know lands in its family; a
 * signal cancels a call in flight or waiting to retry; a timeout is a ConnectionFailed; unknown
 * fields are ignored; an import's rows streamed as JSON Lines and sent once.
 */

import assert from "node:assert/strict";
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, test } from "node:test";

import {
  CatalogUnavailable,
  Conflict,
  ConnectionFailed,
  DiskFull,
  Esfis,
  EsfisError,
  Held,
  HeldForApproval,
  InternalError,
  NO_RETRIES,
  NotFound,
  NotInstalled,
  NotServed,
  Retries,
  StorageFailed,
  TooManyRequests,
  Unavailable,
} from "../src/index.js";

interface Scripted {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  delay?: number;
}

const script: Scripted[] = [];
const sent: string[] = [];
const bodies: string[] = [];
const timers: NodeJS.Timeout[] = [];
let server: Server;
let url: string;

function error(status: number, code: string, headers: Record<string, string> = {}): Scripted {
  return { status, body: { error: { code, message: `${code} said the server` } }, headers };
}

const RECALLED: Scripted = { status: 200, body: { memories: [] } };
const MEMORY = {
  id: "mem_aaaaaaaaaaaaaaaaaaaaaaaaaa",
  text: "a fact",
  space: "acme",
  ai: "claude-code",
  created_at: "2026-03-31T18:00:00.000000Z",
  valid_from: "2026-03-31T18:00:00.000000Z",
  valid_until: null,
  superseded_by: null,
  labels: { space: "acme", origin: [], digest: "sha256:00", run: "run_1", from: [] },
  data: {},
  duplicate_of: null,
  similar: [],
};

before(async () => {
  server = createServer((request: IncomingMessage, response: ServerResponse) => {
    sent.push(`${request.method} ${request.url?.split("?")[0]}`);
    const chunks: Buffer[] = [];
    request.on("data", (c: Buffer) => chunks.push(c));
    request.on("end", () => {
      bodies.push(Buffer.concat(chunks).toString("utf8"));
      const next = script.shift() ?? { status: 500, body: "no answer scripted" };
      const answer = (): void => {
        if (response.destroyed) return;
        const body = typeof next.body === "string" ? next.body : JSON.stringify(next.body ?? {});
        const type = typeof next.body === "string" ? "text/html" : "application/json";
        response.writeHead(next.status, { "Content-Type": type, ...next.headers });
        response.end(next.status === 204 ? undefined : body);
      };
      if (next.delay) timers.push(setTimeout(answer, next.delay));
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  for (const timer of timers) clearTimeout(timer);
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  script.length = 0;
  sent.length = 0;
  bodies.length = 0;
});

function client(options: ConstructorParameters<typeof Esfis>[2] = {}): Esfis {
  return new Esfis(url, "tok", { retries: new Retries({ backoff: 0 }), ...options });
}

test("a recall is sent again after 429 with its Retry-After, and after 503", async () => {
  script.push(error(429, "too_many_requests", { "Retry-After": "0" }), error(503, "not_served"), RECALLED);
  assert.deepEqual(await client().recall("anything"), []);
  assert.deepEqual(sent, ["POST /v1/recall", "POST /v1/recall", "POST /v1/recall"]);
});

test("gets, approval checks and export pages are reads: sent again too", async () => {
  script.push(error(503, "catalog_unavailable", { "Retry-After": "0" }), { status: 200, body: MEMORY });
  assert.equal((await client().get(MEMORY.id)).text, "a fact");
  script.push(error(503, "storage_failed"), { status: 200, body: { memories: [MEMORY], next_cursor: null } });
  const exported = [];
  for await (const m of client().export({ space: "acme" })) exported.push(m.id);
  assert.deepEqual(exported, [MEMORY.id]);
  assert.deepEqual(sent, ["GET /v1/memories/" + MEMORY.id, "GET /v1/memories/" + MEMORY.id, "GET /v1/memories", "GET /v1/memories"]);
});

test("a write is never sent again, and throws with its retry time", async () => {
  script.push(error(429, "too_many_requests", { "Retry-After": "7" }), { status: 201, body: MEMORY });
  const refused = await client()
    .remember("a fact")
    .catch((e: unknown) => e);
  assert.ok(refused instanceof TooManyRequests, String(refused));
  assert.equal(refused.retryAfter, 7);
  assert.equal(refused.status, 429);
  assert.deepEqual(sent, ["POST /v1/memories"]);
});

test("a Retry-After longer than the client waits is thrown at once", async () => {
  script.push(error(429, "too_many_requests", { "Retry-After": "120" }), RECALLED);
  await assert.rejects(client().recall("anything"), TooManyRequests);
  assert.equal(sent.length, 1);
});

test("NO_RETRIES sends a read once", async () => {
  script.push(error(503, "not_served"), RECALLED);
  await assert.rejects(client({ retries: NO_RETRIES }).recall("anything"), NotServed);
  assert.equal(sent.length, 1);
});

test("a full disk, a catalog away, a failed store and a broken install: their classes, with retryAfter", async () => {
  script.push(error(507, "disk_full", { "Retry-After": "30" }));
  const full = await client()
    .remember("a fact")
    .catch((e: unknown) => e);
  assert.ok(full instanceof DiskFull, String(full));
  assert.equal(full.retryAfter, 30);
  script.push(error(503, "catalog_unavailable", { "Retry-After": "5" }));
  const away = await client({ retries: NO_RETRIES })
    .recall("anything")
    .catch((e: unknown) => e);
  assert.ok(away instanceof CatalogUnavailable && away instanceof Unavailable, String(away));
  assert.equal(away.retryAfter, 5);
  script.push(error(503, "storage_failed", { "Retry-After": "2" }));
  const failed = await client()
    .forget(MEMORY.id)
    .catch((e: unknown) => e);
  assert.ok(failed instanceof StorageFailed && failed instanceof Unavailable, String(failed));
  assert.equal(failed.retryAfter, 2);
  assert.equal(sent.length, 3); // the writes, and the read told to send once
  script.push(error(503, "not_installed", { "Retry-After": "30" }));
  const broken = await client()
    .forget(MEMORY.id)
    .catch((e: unknown) => e);
  assert.ok(broken instanceof NotInstalled && broken instanceof Unavailable, String(broken));
  assert.equal(broken.retryAfter, 30);
});

test("a code this client does not know lands in its family; a proxy's page by its status", async () => {
  script.push(error(409, "a_code_of_a_newer_server"));
  const newer = await client()
    .remember("a fact")
    .catch((e: unknown) => e);
  assert.ok(newer instanceof Conflict, String(newer));
  assert.equal(newer.code, "a_code_of_a_newer_server");
  assert.equal(newer.message, "a_code_of_a_newer_server said the server");
  script.push({ status: 502, body: "<html>Bad Gateway</html>" });
  const proxy = await client()
    .remember("a fact")
    .catch((e: unknown) => e);
  assert.ok(proxy instanceof InternalError, String(proxy));
  assert.equal(proxy.status, 502);
  script.push({ status: 404, body: "<html>Not Found</html>" });
  await assert.rejects(client().remember("a fact"), NotFound);
});

test("a signal aborts a call in flight", async () => {
  script.push({ ...RECALLED, delay: 5_000 });
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 50);
  const started = Date.now();
  await assert.rejects(client().recall("anything", { signal: controller.signal }), { name: "AbortError" });
  assert.ok(Date.now() - started < 2_000);
  assert.equal(sent.length, 1);
});

test("a signal aborts a read waiting to be sent again, with the signal's reason", async () => {
  script.push(error(429, "too_many_requests", { "Retry-After": "5" }), RECALLED);
  const controller = new AbortController();
  const reason = new Error("the user left");
  setTimeout(() => controller.abort(reason), 100);
  const started = Date.now();
  await assert.rejects(client().recall("anything", { signal: controller.signal }), (e: unknown) => e === reason);
  assert.ok(Date.now() - started < 2_000);
  assert.equal(sent.length, 1);
});

test("no answer within the timeout is a ConnectionFailed; a read is sent again first", async () => {
  script.push({ ...RECALLED, delay: 1_000 }, { ...RECALLED, delay: 1_000 });
  const failed = await client({ timeout: 100, retries: new Retries({ attempts: 2, backoff: 0 }) })
    .recall("anything")
    .catch((e: unknown) => e);
  assert.ok(failed instanceof ConnectionFailed && failed instanceof EsfisError, String(failed));
  assert.match(failed.message, /no answer within 100 ms/);
  assert.equal(sent.length, 2);
});

test("a connection never made is tried again, a write included", async () => {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
  const port = (closed.address() as AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve)); // nothing listens there now
  let tries = 0;
  const counting = (input: string, init: RequestInit): Promise<Response> => {
    tries += 1;
    return fetch(input, init);
  };
  const nowhere = new Esfis(`http://127.0.0.1:${port}`, "tok", { fetch: counting, retries: new Retries({ backoff: 0 }) });
  const failed = await nowhere.remember("a fact").catch((e: unknown) => e);
  assert.ok(failed instanceof ConnectionFailed, String(failed));
  assert.match(failed.message, /ECONNREFUSED|refused/i);
  assert.equal(tries, 3);
});

test("answers are typed values that ignore fields they do not know", async () => {
  script.push({
    status: 200,
    body: { memories: [{ ...MEMORY, score: 0.5, something_new: { a: 1 } }], also_new: true },
  });
  const [found] = await client().recall("anything");
  assert.ok(found);
  assert.deepEqual(Object.keys(found).sort(), ["createdAt", "data", "id", "labels", "score", "space", "text", "validUntil"]);
  assert.equal(found.createdAt.toISOString(), "2026-03-31T18:00:00.000Z");
  assert.equal(found.score, 0.5);
});

test("an import streams its rows as JSON Lines and is sent once", async () => {
  script.push({
    status: 200,
    body: { imported: 2, skipped: 0, failed: 1, errors: [{ line: 2, reason: "not JSON" }], seconds: 0.1 },
  });
  function* rows() {
    yield { text: "first", space: "acme" };
    yield "not json\nat all\n";
    yield new TextEncoder().encode('{"text":"third"}');
  }
  const report = await client().importMemories(rows(), { ai: "importer", createSpaces: true });
  assert.deepEqual(report, { imported: 2, skipped: 0, failed: 1, errors: [{ line: 2, reason: "not JSON" }], seconds: 0.1, createdSpaces: [] });
  assert.equal(bodies[0], '{"text":"first","space":"acme"}\nnot json at all\n{"text":"third"}\n');
  script.push(error(503, "unavailable"), RECALLED);
  await assert.rejects(client().importMemories([{ text: "x" }]), Unavailable);
  assert.deepEqual(sent, ["POST /v1/import", "POST /v1/import"]); // the second import: once
});

test("a held call (202) is a Held, or thrown with raiseHeld", async () => {
  const approval = {
    id: "apr_1",
    status: "pending",
    action: "remember",
    target: null,
    created_at: "2026-03-31T18:00:00Z",
    expires_at: "2026-04-01T18:00:00Z",
    decided_at: null,
    memory: null,
    reason: null,
    rendering: "new field",
  };
  script.push({ status: 202, body: { approval, message: "held for the operator" } });
  const held = await client().remember("a personal fact", { personal: true });
  assert.ok(held instanceof Held);
  assert.equal(held.id, "apr_1");
  assert.equal(held.approval.pending, true);
  assert.equal(held.message, "held for the operator");
  script.push({ status: 202, body: { approval, message: "held for the operator" } });
  const raised = await client({ raiseHeld: true })
    .remember("a personal fact", { personal: true })
    .catch((e: unknown) => e);
  assert.ok(raised instanceof HeldForApproval && raised.held instanceof Held, String(raised));
  assert.deepEqual(JSON.parse(bodies[0] ?? "{}"), { text: "a personal fact", personal: true });
});
