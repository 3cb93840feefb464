/**
 * `EsfisStore`: LangGraph.js's `BaseStore` over esfis, so a graph's long-term memory lives in
 * esfis's spaces, behind its policies and its barrier. The same mapping as the Python client's
 * `esfis_client.langgraph.EsfisStore`:
 *
 * - **namespace ↔ space**: `["acme", "platform"]` is the space `acme/platform`. Each label must be
 *   a space segment (`[a-z0-9][a-z0-9_-]{0,62}`), 1 to 8 of them; anything else is refused with
 *   LangGraph's `InvalidNamespaceError` naming the rule, never rewritten. The store never creates
 *   a space: a namespace whose space does not exist, or that the token may not reach, throws
 *   esfis's error (`SpaceNotFound`, `OutOfReach`, `PolicyDenied`) naming the namespace.
 * - **an item is a memory**: its text (what recall embeds) is the value's fields named by the
 *   put's `index` or the store's `fields` (LangGraph's paths: `"text"`, `"a.b"`, `"tags[*]"`), by
 *   default the whole value as JSON; its `data` is `{key, namespace, value, created_at}`, so the
 *   value and key travel with the memory and recall's filter reaches them. The value must fit
 *   esfis's metadata limits (4 KiB as compact JSON with the key, nested at most 3 deep inside
 *   `value`); a key is at most `MAX_KEY_CHARS` characters.
 * - **put** of a key the namespace holds replaces that memory (the old version is superseded, not
 *   erased); **put of null / delete** forgets it for good. A write esfis holds for a person throws
 *   `HeldForApproval` (its `held` can be waited on).
 * - **get** is a recall with the filter `{key, namespace}` and no query, in that space.
 * - **search** is a recall in the prefix's space, which reaches the spaces below it (and never one
 *   beside it); `query` ranks by recall's relevance, without one the newest come first; `filter`
 *   runs on the value through esfis's metadata filter (`{status: "active"}` tests
 *   `value.status`) inside the partitions, before ranking. `limit + offset` is at most 100. An
 *   empty prefix searches the store's `roots` (else the token's own place).
 * - **listNamespaces** lists the namespaces the token reads under each root or prefix: every space
 *   it reads from there (`GET /v1/browse/spaces`, followed page by page, however many), whether or
 *   not it holds items yet. It reads no memory, so the run carries nothing from listing them (a
 *   listing of items would be read by the run, as recall's results are, and could bar its writes).
 *
 * Needs `@langchain/langgraph-checkpoint` (a peer dependency; `@langchain/langgraph` brings it).
 */

import {
  BaseStore,
  type GetOperation,
  InvalidNamespaceError,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
  getTextAtPath,
} from "@langchain/langgraph-checkpoint";

import { Esfis, type EsfisOptions, Held } from "./client.js";
import { EsfisError, Forbidden, HeldForApproval, InvalidInput, NotFound } from "./errors.js";
import type { JsonObject, Recalled, SpacePage } from "./models.js";

const SEGMENT = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const MAX_DEPTH = 8; // a space's segments
export const MAX_KEY_CHARS = 512;
const MAX_RESULTS = 100; // recall's limit: a search's limit + offset
const SPACES_PAGE = 200; // spaces read a page at a time by listNamespaces
const WHOLE_VALUE = "$";

/** The space a namespace names, or `InvalidNamespaceError` stating the rule. */
export function spaceOf(namespace: readonly string[]): string {
  if (namespace.length === 0) {
    throw new InvalidNamespaceError("a namespace names a space: it cannot be empty");
  }
  if (namespace.length > MAX_DEPTH) {
    throw new InvalidNamespaceError(
      `namespace ${show(namespace)} is ${namespace.length} deep; a space has at most ${MAX_DEPTH}`,
    );
  }
  for (const label of namespace) {
    if (typeof label !== "string" || !SEGMENT.test(label)) {
      throw new InvalidNamespaceError(
        `namespace label ${JSON.stringify(label)} in ${show(namespace)} is not a space segment: lower-case ` +
          "ASCII letters, digits, '-' and '_', starting with a letter or digit, at most 63 characters",
      );
    }
  }
  return namespace.join("/");
}

export function namespaceOf(space: string): string[] {
  return space.split("/");
}

function show(namespace: readonly string[]): string {
  return JSON.stringify(namespace);
}

export interface EsfisStoreOptions {
  /** What an item's text is made of: LangGraph's paths into the value (default: the whole value). */
  fields?: readonly string[];
  /** The namespaces an empty prefix searches and lists (default: the token's own place). */
  roots?: readonly (readonly string[])[];
}

/** The space a call stands in, for the namespace an error names. */
interface Asked {
  space: string | undefined;
}

/**
 * LangGraph.js's store over esfis: `new EsfisStore(new Esfis(url, token))`, or
 * `EsfisStore.connect(url, token, {fields: ["text"]})`; `builder.compile({ store })`.
 */
export class EsfisStore extends BaseStore {
  readonly client: Esfis;
  readonly fields: readonly string[];
  readonly roots: readonly string[];
  /** An esfis memory's validity does not refresh on read: LangGraph's TTLs are not supported. */
  readonly supportsTtl = false;

  constructor(client: Esfis, options: EsfisStoreOptions = {}) {
    super();
    this.client = client;
    this.fields = options.fields !== undefined && options.fields.length > 0 ? [...options.fields] : [WHOLE_VALUE];
    this.roots = (options.roots ?? []).map((root) => spaceOf(root));
  }

  /** A store on a new client of one server and token. */
  static connect(url: string, token: string, options: EsfisStoreOptions & EsfisOptions = {}): EsfisStore {
    const { fields, roots, ...client } = options;
    const store: EsfisStoreOptions = {};
    if (fields !== undefined) store.fields = fields;
    if (roots !== undefined) store.roots = roots;
    return new EsfisStore(new Esfis(url, token, client), store);
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    for (const op of operations) results.push(await this.#one(op));
    return results as OperationResults<Op>;
  }

  // -- each operation -------------------------------------------------------------------------

  #one(op: Operation): Promise<unknown> {
    if ("namespacePrefix" in op) return this.#search(op);
    if ("value" in op) return this.#put(op);
    if ("key" in op) return this.#get(op);
    if ("limit" in op && "offset" in op) return this.#list(op);
    throw new TypeError(`unknown store operation ${JSON.stringify(op)}`);
  }

  async #found(namespace: readonly string[], key: string): Promise<Recalled | undefined> {
    const space = spaceOf(namespace);
    const filter = { key: checkKey(key), namespace: space };
    const found = await this.#ask({ space }, () => this.client.recall({ filter, limit: 1, space }));
    return found[0];
  }

  async #get(op: GetOperation): Promise<Item | null> {
    const found = await this.#found(op.namespace, op.key);
    return found === undefined ? null : item(found);
  }

  async #put(op: PutOperation): Promise<void> {
    const space = spaceOf(op.namespace);
    const old = await this.#found(op.namespace, op.key);
    if (op.value === null || op.value === undefined) {
      if (old !== undefined) applied(await this.#ask({ space }, () => this.client.forget(old.id, { space })));
      return;
    }
    const value: JsonObject = { ...op.value };
    const created = old?.data["created_at"];
    const data = {
      key: checkKey(op.key),
      namespace: space,
      value,
      created_at: typeof created === "string" ? created : new Date().toISOString(),
    };
    const text = this.#text(value, op.index);
    if (old === undefined) {
      applied(await this.#ask({ space }, () => this.client.remember(text, { data, space })));
    } else {
      applied(await this.#ask({ space }, () => this.client.replace(old.id, text, { data, space })));
    }
  }

  async #search(op: SearchOperation): Promise<SearchItem[]> {
    const limit = op.limit ?? 10;
    const offset = op.offset ?? 0;
    if (limit + offset > MAX_RESULTS) {
      throw new InvalidInput(`a search's limit + offset is at most ${MAX_RESULTS} (esfis's recall limit)`, {
        field: "limit",
      });
    }
    const filter: JsonObject = { namespace: { $exists: true } };
    for (const [name, condition] of Object.entries(op.filter ?? {})) filter[`value.${name}`] = condition;
    const query = op.query ? op.query : undefined;
    const spaces = this.#spaces(op.namespacePrefix);
    let found: Recalled[] = [];
    for (const space of spaces) {
      found.push(
        ...(await this.#ask({ space }, () => this.client.recall({ query, filter, limit: limit + offset, space }))),
      );
    }
    found = found.filter((r) => under(r, op.namespacePrefix));
    if (spaces.length > 1) {
      // several roots: one order over them all
      found.sort(query ? (a, b) => b.score - a.score : (a, b) => b.createdAt.getTime() - a.createdAt.getTime());
    }
    return found.slice(offset, offset + limit).map((r) => {
      const hit: SearchItem = item(r);
      if (query) hit.score = r.score;
      return hit;
    });
  }

  async #list(op: ListNamespacesOperation): Promise<string[][]> {
    const conditions = op.matchConditions ?? [];
    let prefix: string[] = [];
    for (const c of conditions) if (c.matchType === "prefix") prefix = literalHead(c.path);
    const seen = new Map<string, string[]>();
    for (const space of this.#spaces(prefix)) {
      let cursor: string | null = null;
      do {
        // every page: the store lists every space, however many
        const page: SpacePage = await this.#ask({ space }, () =>
          this.client.listSpaces({ cursor, limit: SPACES_PAGE, space }),
        );
        for (const name of page.spaces) seen.set(name, namespaceOf(name));
        cursor = page.nextCursor;
      } while (cursor !== null);
    }
    let matching = [...seen.values()].filter((n) => conditions.every((c) => matches(n, c)));
    if (op.maxDepth !== undefined) {
      const cut = new Map(matching.map((n) => [n.slice(0, op.maxDepth).join("/"), n.slice(0, op.maxDepth)]));
      matching = [...cut.values()];
    }
    matching.sort(compareNamespaces);
    return matching.slice(op.offset, op.offset + op.limit);
  }

  #spaces(prefix: readonly string[]): (string | undefined)[] {
    if (prefix.length > 0) return [spaceOf(prefix)];
    return this.roots.length > 0 ? [...this.roots] : [undefined];
  }

  #text(value: JsonObject, index: false | string[] | undefined): string {
    const fields = Array.isArray(index) && index.length > 0 ? index : this.fields;
    const parts = fields.flatMap((path) => textAt(value, path)).filter((t) => t);
    const text = parts.join("\n").trim();
    // the fields named are absent: the whole value still gives the memory a text
    return text || textAt(value, WHOLE_VALUE).join("\n");
  }

  /** A client call, its esfis error naming the namespace it was about. */
  async #ask<T>(asked: Asked, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw withNamespace(error, asked);
    }
  }
}

function textAt(value: JsonObject, path: string): string[] {
  return path === WHOLE_VALUE ? [JSON.stringify(value)] : getTextAtPath(value, path);
}

function checkKey(key: string): string {
  if (typeof key !== "string" || key === "") throw new InvalidInput("an item's key is a non-empty string");
  if (key.length > MAX_KEY_CHARS) {
    throw new InvalidInput(`an item's key is at most ${MAX_KEY_CHARS} characters, this one has ${key.length}`);
  }
  return key;
}

/** A write the store made: a held one (nothing applied yet) is thrown, with its `held`. */
function applied(result: unknown): void {
  if (result instanceof Held) {
    throw new HeldForApproval(
      `esfis held this write for a person (approval ${result.id}); nothing is applied until the operator ` +
        "approves it: wait on the error's held, or withdraw it",
      result,
    );
  }
}

function item(found: Recalled): Item {
  const data = found.data;
  const created = data["created_at"];
  const value = data["value"];
  return {
    namespace: namespaceOf(found.space ?? ""),
    key: String(data["key"] ?? found.id),
    value: typeof value === "object" && value !== null && !Array.isArray(value) ? value : { text: found.text },
    createdAt: typeof created === "string" ? new Date(created) : found.createdAt,
    updatedAt: found.createdAt,
  };
}

function under(found: Recalled, prefix: readonly string[]): boolean {
  if (found.space === null) return false; // a personal memory reaches every caller; no namespace names personal
  const namespace = namespaceOf(found.space);
  return prefix.every((label, i) => namespace[i] === label);
}

function literalHead(path: readonly string[]): string[] {
  const head: string[] = [];
  for (const label of path) {
    if (label === "*") break;
    head.push(label);
  }
  return head;
}

function matches(namespace: readonly string[], condition: MatchCondition): boolean {
  const path = condition.path;
  if (path.length > namespace.length) return false;
  const part = condition.matchType === "prefix" ? namespace.slice(0, path.length) : namespace.slice(namespace.length - path.length);
  return path.every((p, i) => p === "*" || p === part[i]);
}

function compareNamespaces(a: readonly string[], b: readonly string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i] as string;
    const y = b[i] as string;
    if (x !== y) return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

function withNamespace(error: unknown, asked: Asked): unknown {
  if (asked.space !== undefined && error instanceof EsfisError && (error instanceof Forbidden || error instanceof NotFound)) {
    error.message = `namespace ${show(namespaceOf(asked.space))} (esfis space '${asked.space}'): ${error.message}`;
  }
  return error;
}

export { InvalidNamespaceError };
