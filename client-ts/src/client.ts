/**
 * `Esfis`: the client. Each verb is one call of calls.ts, carried out here with the platform's
 * `fetch` (Node 18+, Deno, Bun, a browser's worker): no other dependency.
 *
 *     import { Esfis } from "esfis-client";
 *     const esfis = new Esfis("http://127.0.0.1:8765", token, { space: "acme" });
 *     await esfis.remember("Acme deploys go through ArgoCD", { data: { kind: "decision" } });
 *     await esfis.recall("how does acme deploy?", { filter: { kind: "decision" } });
 */

import * as calls from "./calls.js";
import { type Call, HeldAnswer, type ImportRow, type Place, type Selection } from "./calls.js";
import { ConnectionFailed, HeldForApproval, errorFrom } from "./errors.js";
import type {
  Approval,
  BackupReport,
  Context,
  ImportReport,
  JsonObject,
  Memory,
  MemoryPage,
  Recalled,
  Reference,
  Remembered,
  RunToken,
  SpacePage,
} from "./models.js";
import { NO_RETRIES, Retries, type RetryOptions, pollDelays, sleep } from "./retrying.js";

export const VERSION = "0.1.0";
const USER_AGENT = `esfis-client-ts/${VERSION}`;

/** The platform's `fetch`, or one of your own (a proxy, a test's script). */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface EsfisOptions {
  /** The space the client's calls stand in, unless a call names another. */
  space?: string;
  /** Or a working directory on the server's machine, resolved as the CLI resolves a folder. */
  cwd?: string;
  /** Milliseconds one send may take, answer included (default 60 000); past it, `ConnectionFailed`. */
  timeout?: number;
  /** Which calls are sent again (retrying.ts): `new Retries({...})`, its options, or `NO_RETRIES`. */
  retries?: Retries | RetryOptions;
  /** Throw `HeldForApproval` where a call is held, instead of returning a `Held`. */
  raiseHeld?: boolean;
  /** The `fetch` to send with (default: the platform's). */
  fetch?: FetchLike;
}

/** Every call takes a `signal`: aborting it rejects the call with the signal's reason. */
export interface CallOptions {
  signal?: AbortSignal | undefined;
}

/** Where a call stands: a space, or a folder on the server's machine; neither: the client's. */
export interface PlaceOptions extends CallOptions {
  space?: string | undefined;
  cwd?: string | undefined;
}

export interface RememberOptions extends PlaceOptions {
  /** Metadata of your own, for recall's filter to select by. */
  data?: JsonObject | undefined;
  /** A personal memory (no space). */
  personal?: boolean | undefined;
  /** When it stops being true: an ISO 8601 time, or a Date. */
  validUntil?: string | Date | undefined;
  /** Origin marks, when the content comes from outside (`source:slack`). */
  labels?: readonly string[] | undefined;
  /** false: store it even when the space already holds this fact (default true: answer that memory). */
  dedupe?: boolean | undefined;
}

export interface RecallOptions extends PlaceOptions {
  query?: string | null | undefined;
  /** Select by the memories' `data` before ranking: `{kind: "decision"}`, `{year: {$gte: 2026}}`, … */
  filter?: JsonObject | undefined;
  /** The memories valid at this time (not after now), superseded since included. */
  asOf?: string | Date | undefined;
  /** At most this many (1 to 100; the server's default 10). */
  limit?: number | undefined;
}

export interface ListSpacesOptions extends PlaceOptions {
  /** Only this space and those below it (never personal); absent: every space the call reads. */
  within?: string | undefined;
  /** The previous page's `nextCursor`; absent: the first page. */
  cursor?: string | null | undefined;
  /** Spaces on the page (1 to 200; the server's default 50). */
  limit?: number | undefined;
}

export interface SpacesOptions extends PlaceOptions {
  within?: string | undefined;
  /** Spaces per page read (1 to 200, default 200). */
  page?: number | undefined;
}

export interface ListMemoriesOptions extends PlaceOptions {
  /** Only this space, and with `below` (the default) those under it; absent: all the call reads. */
  within?: string | undefined;
  below?: boolean | undefined;
  /** Select by the memories' `data`, as recall's filter does. */
  filter?: JsonObject | undefined;
  /** The previous page's `nextCursor`; absent: the first (newest) page. */
  cursor?: string | null | undefined;
  /** Memories on the page (1 to 200; the server's default 50). */
  limit?: number | undefined;
}

export interface MemoriesOptions extends PlaceOptions {
  within?: string | undefined;
  below?: boolean | undefined;
  filter?: JsonObject | undefined;
  /** Memories per page read (1 to 200, default 200). */
  page?: number | undefined;
}

export interface ReplaceOptions extends PlaceOptions {
  /** The new version's data (it keeps none unless given). */
  data?: JsonObject | undefined;
  /** Move the new version to another space. */
  newSpace?: string | undefined;
}

export interface RunOptions extends CallOptions {
  /** The run token's scope: the opener's, or a space inside it. */
  space?: string | undefined;
  /** How long it lasts: seconds, or a duration such as "30m", "12h", "7d". */
  ttl?: number | string | undefined;
}

export interface WaitOptions extends CallOptions {
  /** Milliseconds to wait at most; past it, the approval as it stands (still pending). */
  timeout?: number | undefined;
}

export interface ImportOptions extends CallOptions {
  /** The AI recorded as writer (default "import"). */
  ai?: string | undefined;
  /** Create the spaces rows name that do not exist yet. */
  createSpaces?: boolean | undefined;
}

export interface ExportOptions extends Selection, CallOptions {
  /** Memories per page read (1 to 200, default 200). */
  page?: number | undefined;
}

/**
 * A call held for a person (HTTP 202): nothing is applied until the operator approves it.
 * `wait` polls its approval until a person decides or the time runs out.
 */
export class Held {
  approval: Approval;
  readonly message: string;
  readonly #client: Esfis;

  constructor(client: Esfis, answer: HeldAnswer) {
    this.#client = client;
    this.approval = answer.approval;
    this.message = answer.message;
  }

  get id(): string {
    return this.approval.id;
  }

  /** The approval as it stands now. */
  async check(options: CallOptions = {}): Promise<Approval> {
    this.approval = await this.#client.checkApproval(this.id, options);
    return this.approval;
  }

  /**
   * The approval once decided (approved, declined, expired, void, withdrawn), or as it stands
   * when `timeout` milliseconds have passed (still `pending`: never an error). Polls with
   * backoff: 100 ms, doubling to one look every 5 s. An aborted `signal` rejects at once.
   */
  async wait(options: WaitOptions = {}): Promise<Approval> {
    const deadline = options.timeout === undefined ? undefined : Date.now() + options.timeout;
    const delays = pollDelays();
    while ((await this.check({ signal: options.signal })).pending) {
      const left = deadline === undefined ? undefined : deadline - Date.now();
      if (left !== undefined && left <= 0) break;
      const delay = delays.next().value;
      await sleep(left === undefined ? delay : Math.min(delay, left), options.signal);
    }
    return this.approval;
  }

  /** Take the call back: nothing is applied, and its text leaves the catalog. */
  async withdraw(options: CallOptions = {}): Promise<void> {
    await this.#client.withdraw(this.id, options);
  }

  toString(): string {
    return `Held(${this.approval.action} ${this.id}: ${this.approval.status})`;
  }
}

/** Whether a write's answer is a held call (also `answer instanceof Held`). */
export function isHeld(answer: unknown): answer is Held {
  return answer instanceof Held;
}

const NEVER_SENT = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
  "ConnectionRefused", // Bun's
]);

/** Whether a failed fetch never reached the server (refused, no such host): safe to send again. */
function neverSent(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && NEVER_SENT.has(code)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

function describe(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 4; depth++) {
    parts.push(e instanceof Error ? e.message : String(e));
    e = (e as { cause?: unknown }).cause;
  }
  return parts.join(": ");
}

/** The caller's signal and the send's timeout, as one signal; `done` drops the timer and listener. */
function linked(signal: AbortSignal | undefined, timeout: number) {
  const controller = new AbortController();
  let timedOut = false;
  const timer =
    Number.isFinite(timeout) && timeout > 0
      ? setTimeout(() => {
          timedOut = true;
          controller.abort(new Error(`no answer within ${timeout} ms`));
        }, timeout)
      : undefined;
  const onAbort = (): void => controller.abort(signal?.reason);
  if (signal?.aborted) onAbort();
  else signal?.addEventListener("abort", onAbort, { once: true });
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    done: () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    },
  };
}

/**
 * A client of one esfis server, acting as the token's AI (or run).
 *
 * `space` (or `cwd`) is where its calls stand unless a call names another; none: the token's own
 * place (a scoped token stands in its space). Reads are retried on 429/503 and broken
 * connections, writes sent once (retrying.ts). A 202 is a `Held` to wait on.
 */
export class Esfis {
  readonly url: string;
  readonly place: Readonly<Place>;
  readonly timeout: number;
  readonly retries: Retries;
  readonly raiseHeld: boolean;
  readonly #token: string;
  readonly #fetch: FetchLike;

  constructor(url: string, token: string, options: EsfisOptions = {}) {
    if (!token) {
      throw new TypeError("a token is required: esfis token create --ai NAME (or a run token from openRun)");
    }
    this.url = url.replace(/\/+$/, "");
    this.#token = token;
    this.place = { space: options.space, cwd: options.cwd };
    this.timeout = options.timeout ?? 60_000;
    this.retries = options.retries instanceof Retries ? options.retries : new Retries(options.retries);
    this.raiseHeld = options.raiseHeld ?? false;
    if (options.fetch === undefined && typeof globalThis.fetch !== "function") {
      throw new TypeError("no fetch on this platform: pass options.fetch");
    }
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  // -- memories ---------------------------------------------------------------------------

  /** Store a memory where the call stands (or personal); `data`: metadata recall can filter by. */
  async remember(text: string, options: RememberOptions = {}): Promise<Remembered | Held> {
    return this.#result(await this.#run(calls.remember(text, this.#at(options), options), options.signal));
  }

  /**
   * The memories the call reaches that best answer `query`, best first; with a `filter` and no
   * query, the newest that match. `recall("…", {…})` or `recall({filter, …})`. Safe to repeat:
   * retried on 429 and 503.
   */
  async recall(query?: string | null | RecallOptions, options: RecallOptions = {}): Promise<Recalled[]> {
    if (typeof query === "object" && query !== null) {
      options = query;
      query = query.query;
    }
    return this.#run(calls.recall(query, this.#at(options), options), options.signal);
  }

  /** One memory; an id the caller cannot see is `NotFound`, as one that never existed. */
  async get(memoryId: string, options: PlaceOptions = {}): Promise<Memory> {
    return this.#run(calls.get(memoryId, this.#at(options)), options.signal);
  }

  /** Supersede a memory with a new text (and `data`: the new version keeps none unless given). */
  async replace(memoryId: string, text: string, options: ReplaceOptions = {}): Promise<Memory | Held> {
    return this.#result(await this.#run(calls.replace(memoryId, text, this.#at(options), options), options.signal));
  }

  /** Forget a memory for good; a `Held` when the forget waits for a person. */
  async forget(memoryId: string, options: PlaceOptions = {}): Promise<Held | undefined> {
    const answer = await this.#run(calls.forget(memoryId, this.#at(options)), options.signal);
    return answer === undefined ? undefined : this.#held(answer);
  }

  // -- what the call reads, listed ----------------------------------------------------------

  /**
   * One page of the spaces the call reads from where it stands (`within`: that space and those
   * below it), by name; `personal` says whether it reads personal memories. Reads no memory.
   */
  async listSpaces(options: ListSpacesOptions = {}): Promise<SpacePage> {
    return this.#run(calls.spacePage(this.#at(options), options), options.signal);
  }

  /** Every space the call reads, by name, read a page at a time: `for await (const name of esfis.spaces())`. */
  async *spaces(options: SpacesOptions = {}): AsyncGenerator<string, void, undefined> {
    const { page = 200, ...rest } = options;
    let cursor: string | null = null;
    for (;;) {
      const found: SpacePage = await this.listSpaces({ ...rest, cursor, limit: page });
      yield* found.spaces;
      if (found.nextCursor === null) return;
      cursor = found.nextCursor;
    }
  }

  /**
   * One page of the current memories the call reads, newest first (`within`: one space, and with
   * `below` those under it; `filter`: as recall's). The run reads what it lists, as a recall's
   * results: it carries their labels (the data barrier). A filtered page may hold fewer than
   * `limit`, even none, and still have a `nextCursor`.
   */
  async listMemories(options: ListMemoriesOptions = {}): Promise<MemoryPage> {
    return this.#run(calls.listedMemories(this.#at(options), options), options.signal);
  }

  /** Every current memory the call reads, newest first, read a page at a time (each read by the run). */
  async *memories(options: MemoriesOptions = {}): AsyncGenerator<Memory, void, undefined> {
    const { page = 200, ...rest } = options;
    let cursor: string | null = null;
    for (;;) {
      const found: MemoryPage = await this.listMemories({ ...rest, cursor, limit: page });
      yield* found.memories;
      if (found.nextCursor === null) return;
      cursor = found.nextCursor;
    }
  }

  // -- context by reference -----------------------------------------------------------------

  /** A reference to memories the caller sees (ids and labels, never texts), for another agent. */
  async share(memoryIds: Iterable<string>, options: PlaceOptions = {}): Promise<Reference> {
    return this.#run(calls.share(memoryIds, this.#at(options)), options.signal);
  }

  /** The memories of a reference; `DataBarrier` when this run may not carry their labels. */
  async openContext(ref: string, options: PlaceOptions = {}): Promise<Context> {
    return this.#run(calls.openContext(ref, this.#at(options)), options.signal);
  }

  // -- runs and held calls ------------------------------------------------------------------

  /** A run token for one agent session (POST /v1/runs), in this token's scope or a narrower one. */
  async openRun(options: RunOptions = {}): Promise<RunToken> {
    return this.#run(calls.openRun(options.space, options.ttl), options.signal);
  }

  /** A client holding only a new run token, standing in `space`: give one to each agent session. */
  async session(options: RunOptions = {}): Promise<Esfis> {
    const run = await this.openRun(options);
    const settings: EsfisOptions = {
      timeout: this.timeout,
      retries: this.retries,
      raiseHeld: this.raiseHeld,
      fetch: this.#fetch,
    };
    if (options.space !== undefined) settings.space = options.space;
    return new Esfis(this.url, run.token, settings);
  }

  /** A held call of this token's (or run's), as it stands. */
  async checkApproval(approvalId: string, options: CallOptions = {}): Promise<Approval> {
    return this.#run(calls.checkApproval(approvalId, this.place), options.signal);
  }

  /** Withdraw a held call of this run's: nothing is applied. */
  async withdraw(approvalId: string, options: CallOptions = {}): Promise<void> {
    await this.#run(calls.withdraw(approvalId, this.place), options.signal);
  }

  // -- the operator's -----------------------------------------------------------------------

  /**
   * Stream rows (objects, or JSON Lines as text or bytes; an iterable or an async iterable) to
   * POST /v1/import (an operator token): read as they are sent, never sent twice; bad lines come
   * back in the report by number, the rest go in.
   */
  async importMemories(
    rows: Iterable<ImportRow> | AsyncIterable<ImportRow>,
    options: ImportOptions = {},
  ): Promise<ImportReport> {
    const call = calls.importLines(calls.linesOf(rows), options.ai ?? "import", options.createSpaces ?? false);
    return this.#run(call, options.signal);
  }

  /**
   * Every memory the selection names, newest first, read a keyset page at a time from the
   * operator's listing (GET /v1/memories, an operator token; no `space`: personal ones; `below`:
   * the spaces under it too; `state`: current, superseded or expired). The file export with
   * vectors is the CLI's (`esfis export`, on the server's machine).
   */
  async *export(options: ExportOptions = {}): AsyncGenerator<Memory, void, undefined> {
    const { page = 200, signal, ...selection } = options;
    let cursor: string | null = null;
    for (;;) {
      const found: MemoryPage = await this.#run(calls.memoryPage(selection, cursor, page), signal);
      yield* found.memories;
      if (found.nextCursor === null) return;
      cursor = found.nextCursor;
    }
  }

  /** A consistent backup into `path`, a folder on the server's machine (an operator token). */
  async backup(path: string, options: CallOptions = {}): Promise<BackupReport> {
    return this.#run(calls.backup(path), options.signal);
  }

  // -- carrying calls out ---------------------------------------------------------------------

  #at(options: PlaceOptions): Place {
    return options.space !== undefined || options.cwd !== undefined
      ? { space: options.space, cwd: options.cwd }
      : this.place;
  }

  #result<T>(answer: T | HeldAnswer): T | Held {
    return answer instanceof HeldAnswer ? this.#held(answer) : answer;
  }

  #held(answer: HeldAnswer): Held {
    const held = new Held(this, answer);
    if (this.raiseHeld) throw new HeldForApproval(answer.message, held);
    return held;
  }

  async #run<T>(call: Call<T>, signal: AbortSignal | undefined): Promise<T> {
    // A streamed body is read once: it is never sent again, whatever happened.
    const retries = call.stream !== undefined ? NO_RETRIES : this.retries;
    let url = this.url + call.path;
    if (call.params !== undefined && Object.keys(call.params).length > 0) {
      url += "?" + new URLSearchParams(call.params).toString();
    }
    const fields = [...Object.keys(call.json ?? {}), ...Object.keys(call.params ?? {})];
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      const headers: Record<string, string> = {
        Authorization: `Bearer ${this.#token}`,
        "User-Agent": USER_AGENT,
        Accept: "application/json",
        ...call.headers,
      };
      const init: RequestInit & { duplex?: "half" } = { method: call.method, headers };
      if (call.json !== undefined) {
        headers["Content-Type"] = "application/json";
        init.body = JSON.stringify(call.json);
      } else if (call.stream !== undefined) {
        init.body = call.stream();
        init.duplex = "half"; // a streamed request body (Node's fetch requires the word)
      }
      const sending = linked(signal, this.timeout);
      init.signal = sending.signal;
      let status: number;
      let responseHeaders: Headers;
      let body: string;
      try {
        const response = await this.#fetch(url, init);
        status = response.status;
        responseHeaders = response.headers;
        body = await response.text();
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        const wait = sending.timedOut()
          ? retries.afterError(call.safe, attempt, false)
          : retries.afterError(call.safe, attempt, neverSent(error));
        if (wait === null) {
          const why = sending.timedOut() ? `no answer within ${this.timeout} ms` : describe(error);
          throw new ConnectionFailed(`${call.method} ${call.path}: ${why}`, { cause: error });
        }
        await sleep(wait, signal);
        continue;
      } finally {
        sending.done();
      }
      if (status >= 200 && status < 300) {
        return call.read({ status, body: body === "" ? undefined : JSON.parse(body) });
      }
      const wait = retries.afterAnswer(call.safe, attempt, status, responseHeaders);
      if (wait === null) throw errorFrom(status, body, responseHeaders, fields);
      await sleep(wait, signal);
    }
  }

  toString(): string {
    return `Esfis(${this.url}, space=${this.place.space ?? "-"})`;
  }
}
