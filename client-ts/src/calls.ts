/**
 * Each verb once, as data: the request it sends, whether it is safe to send again, and how its
 * answer reads. `Esfis` only carries calls out (client.ts), as the Python client's `calls` does.
 *
 * Which calls may be sent again (`safe`): reads (get, recall, a listing's page, openContext, an
 * approval's check, an export page), where a second answer is as good as the first. A write (remember, replace,
 * forget, withdraw, share, a run token, an import, a backup) is sent once: esfis has no
 * idempotency key, so a write repeated after an answer was lost could be applied twice; only a
 * connection that was never made is tried again (retrying.ts).
 */

import {
  type Approval,
  type BackupReport,
  type Context,
  type ImportReport,
  type JsonObject,
  type Memory,
  type MemoryPage,
  type Recalled,
  type Reference,
  type Remembered,
  type RunToken,
  type SpacePage,
  readApproval,
  readBackupReport,
  readContext,
  readImportReport,
  readMemory,
  readMemoryPage,
  readRecall,
  readReference,
  readRemembered,
  readRunToken,
  readSpacePage,
} from "./models.js";

/** An answer as a call reads it: its status and its parsed JSON body (undefined for 204). */
export interface Answer {
  status: number;
  body: unknown;
}

/** A 202: the call is held for a person; the client turns it into a `Held` it can wait on. */
export class HeldAnswer {
  constructor(
    readonly approval: Approval,
    readonly message: string,
  ) {}
}

export interface Call<T> {
  method: "GET" | "POST" | "DELETE";
  path: string;
  read: (answer: Answer) => T;
  safe: boolean;
  json?: Record<string, unknown>;
  params?: Record<string, string>;
  /** A streamed body (an import's lines): sent once, whatever happens. */
  stream?: () => ReadableStream<Uint8Array>;
  headers?: Record<string, string>;
}

/**
 * Where the caller stands: a space, or a working directory on the server's machine, else the
 * token's own (a scoped token stands in its space; an unscoped one in none: personal only).
 */
export interface Place {
  space?: string | undefined;
  cwd?: string | undefined;
}

function placeFields(place: Place): Record<string, string> {
  const fields: Record<string, string> = {};
  if (place.space !== undefined) fields["space"] = place.space;
  if (place.cwd !== undefined) fields["cwd"] = place.cwd;
  return fields;
}

function segment(value: string): string {
  return encodeURIComponent(value);
}

function heldOr<T>(read: (body: unknown) => T): (answer: Answer) => T | HeldAnswer {
  return ({ status, body }) => {
    if (status === 202) {
      const held = body as { approval?: unknown; message?: unknown };
      return new HeldAnswer(readApproval(held.approval), String(held.message ?? ""));
    }
    return read(body);
  };
}

export interface RememberFields {
  personal?: boolean | undefined;
  validUntil?: string | Date | undefined;
  labels?: readonly string[] | undefined;
  data?: JsonObject | undefined;
  dedupe?: boolean | undefined;
}

function iso(value: string | Date): string {
  return value instanceof Date ? value.toISOString() : value;
}

export function remember(text: string, place: Place, fields: RememberFields = {}): Call<Remembered | HeldAnswer> {
  const body: Record<string, unknown> = { text, ...placeFields(place) };
  if (fields.personal) body["personal"] = true;
  if (fields.validUntil !== undefined) body["valid_until"] = iso(fields.validUntil);
  if (fields.labels !== undefined) body["labels"] = [...fields.labels];
  // Sent only when given: a server older than metadata (or dedupe) refuses the field.
  if (fields.data !== undefined) body["data"] = fields.data;
  if (fields.dedupe !== undefined) body["dedupe"] = fields.dedupe;
  return { method: "POST", path: "/v1/memories", read: heldOr(readRemembered), safe: false, json: body };
}

export interface RecallFields {
  limit?: number | undefined;
  filter?: JsonObject | undefined;
  asOf?: string | Date | undefined;
}

export function recall(query: string | null | undefined, place: Place, fields: RecallFields = {}): Call<Recalled[]> {
  const body: Record<string, unknown> = { ...placeFields(place) };
  if (query !== null && query !== undefined) body["query"] = query;
  if (fields.limit !== undefined) body["limit"] = fields.limit;
  if (fields.filter !== undefined) body["filter"] = fields.filter;
  if (fields.asOf !== undefined) body["as_of"] = iso(fields.asOf);
  return { method: "POST", path: "/v1/recall", read: ({ body: b }) => readRecall(b), safe: true, json: body };
}

export function get(memoryId: string, place: Place): Call<Memory> {
  return {
    method: "GET",
    path: `/v1/memories/${segment(memoryId)}`,
    read: ({ body }) => readMemory(body),
    safe: true,
    params: placeFields(place),
  };
}

export interface ReplaceFields {
  data?: JsonObject | undefined;
  newSpace?: string | undefined;
}

export function replace(
  memoryId: string,
  text: string,
  place: Place,
  fields: ReplaceFields = {},
): Call<Memory | HeldAnswer> {
  const body: Record<string, unknown> = { text, ...placeFields(place) };
  if (fields.newSpace !== undefined) body["new_space"] = fields.newSpace;
  if (fields.data !== undefined) body["data"] = fields.data;
  return {
    method: "POST",
    path: `/v1/memories/${segment(memoryId)}/replace`,
    read: heldOr(readMemory),
    safe: false,
    json: body,
  };
}

export function forget(memoryId: string, place: Place): Call<HeldAnswer | undefined> {
  return {
    method: "DELETE",
    path: `/v1/memories/${segment(memoryId)}`,
    read: (answer) => (answer.status === 204 ? undefined : (heldOr(readMemory)(answer) as HeldAnswer)),
    safe: false,
    params: placeFields(place),
  };
}

/** A held call of this run's, withdrawn: esfis takes an approval's id where forget takes a memory's. */
export function withdraw(approvalId: string, place: Place): Call<void> {
  return {
    method: "DELETE",
    path: `/v1/memories/${segment(approvalId)}`,
    read: () => undefined,
    safe: false,
    params: placeFields(place),
  };
}

export function checkApproval(approvalId: string, place: Place): Call<Approval> {
  return {
    method: "GET",
    path: `/v1/approvals/${segment(approvalId)}`,
    read: ({ body }) => readApproval(body),
    safe: true,
    params: placeFields(place),
  };
}

export function share(memoryIds: Iterable<string>, place: Place): Call<Reference> {
  return {
    method: "POST",
    path: "/v1/context",
    read: ({ body }) => readReference(body),
    safe: false,
    json: { memory_ids: [...memoryIds], ...placeFields(place) },
  };
}

export function openContext(ref: string, place: Place): Call<Context> {
  return {
    method: "GET",
    path: `/v1/context/${segment(ref)}`,
    read: ({ body }) => readContext(body),
    safe: true,
    params: placeFields(place),
  };
}

export interface SpacePageFields {
  within?: string | undefined;
  cursor?: string | null | undefined;
  limit?: number | undefined;
}

/** One page of the spaces the caller reads (GET /v1/browse/spaces): a read. */
export function spacePage(place: Place, fields: SpacePageFields = {}): Call<SpacePage> {
  const params = placeFields(place);
  if (fields.within !== undefined) params["within"] = fields.within;
  if (fields.cursor !== undefined && fields.cursor !== null) params["cursor"] = fields.cursor;
  if (fields.limit !== undefined) params["limit"] = String(fields.limit);
  return { method: "GET", path: "/v1/browse/spaces", read: ({ body }) => readSpacePage(body), safe: true, params };
}

export interface MemoryListFields {
  within?: string | undefined;
  below?: boolean | undefined;
  filter?: JsonObject | undefined;
  cursor?: string | null | undefined;
  limit?: number | undefined;
}

/**
 * One page of the memories the caller reads (POST /v1/browse/memories), newest first: a read (the
 * run reads what it lists, as a recall's results; a second answer is as good as the first).
 */
export function listedMemories(place: Place, fields: MemoryListFields = {}): Call<MemoryPage> {
  const body: Record<string, unknown> = { ...placeFields(place) };
  if (fields.within !== undefined) body["within"] = fields.within;
  if (fields.below === false) body["below"] = false;
  if (fields.filter !== undefined) body["filter"] = fields.filter;
  if (fields.cursor !== undefined && fields.cursor !== null) body["cursor"] = fields.cursor;
  if (fields.limit !== undefined) body["limit"] = fields.limit;
  return {
    method: "POST",
    path: "/v1/browse/memories",
    read: ({ body: b }) => readMemoryPage(b),
    safe: true,
    json: body,
  };
}

export function openRun(space?: string, ttl?: number | string): Call<RunToken> {
  const body: Record<string, unknown> = {};
  if (space !== undefined) body["space"] = space;
  if (ttl !== undefined) body["ttl"] = ttl;
  return { method: "POST", path: "/v1/runs", read: ({ body: b }) => readRunToken(b), safe: false, json: body };
}

export function importLines(
  lines: () => ReadableStream<Uint8Array>,
  ai: string,
  createSpaces: boolean,
): Call<ImportReport> {
  const params: Record<string, string> = { ai };
  if (createSpaces) params["create_spaces"] = "true";
  return {
    method: "POST",
    path: "/v1/import",
    read: ({ body }) => readImportReport(body),
    safe: false,
    params,
    stream: lines,
    headers: { "Content-Type": "application/x-ndjson" },
  };
}

export interface Selection {
  space?: string | undefined;
  below?: boolean | undefined;
  ai?: string | undefined;
  origin?: string | undefined;
  since?: string | Date | undefined;
  before?: string | Date | undefined;
  state?: "current" | "superseded" | "expired" | undefined;
}

/** One keyset page of the operator's listing (GET /v1/memories), newest first: a read. */
export function memoryPage(selection: Selection, cursor: string | null, limit: number): Call<MemoryPage> {
  const params: Record<string, string> = {};
  for (const [name, value] of Object.entries(selection)) {
    if (value === undefined || value === null || value === false) continue;
    params[name] = value === true ? "true" : value instanceof Date ? value.toISOString() : String(value);
  }
  params["limit"] = String(limit);
  if (cursor !== null) params["cursor"] = cursor;
  return { method: "GET", path: "/v1/memories", read: ({ body }) => readMemoryPage(body), safe: true, params };
}

export function backup(path: string): Call<BackupReport> {
  return {
    method: "POST",
    path: "/v1/backup",
    read: ({ body }) => readBackupReport(body),
    safe: false,
    json: { path },
  };
}

/** An import row: an object (encoded as JSON), or a line as text or bytes, sent as it is. */
export type ImportRow = JsonObject | string | Uint8Array;

const encoder = new TextEncoder();

/**
 * One import row as a JSON Lines line: an object is encoded, a string or bytes sent as it is (so
 * a bad line reaches the server and comes back in the report with its number).
 */
export function jsonl(row: ImportRow): Uint8Array {
  let line: string;
  if (row instanceof Uint8Array) {
    line = new TextDecoder().decode(row);
  } else if (typeof row === "string") {
    line = row;
  } else {
    line = JSON.stringify(row);
  }
  return encoder.encode(line.replace(/[\r\n]+$/, "").replace(/\r?\n/g, " ") + "\n");
}

const CHUNK = 64 * 1024;

/** Rows, pulled as the body is sent: lines gathered into chunks of about 64 KiB. */
export function linesOf(rows: Iterable<ImportRow> | AsyncIterable<ImportRow>): () => ReadableStream<Uint8Array> {
  return () => {
    const source: AsyncIterator<ImportRow> | Iterator<ImportRow> =
      Symbol.asyncIterator in rows
        ? (rows as AsyncIterable<ImportRow>)[Symbol.asyncIterator]()
        : (rows as Iterable<ImportRow>)[Symbol.iterator]();
    return new ReadableStream<Uint8Array>({
      async pull(controller) {
        const parts: Uint8Array[] = [];
        let size = 0;
        while (size < CHUNK) {
          const next = await source.next();
          if (next.done) break;
          const line = jsonl(next.value);
          parts.push(line);
          size += line.length;
        }
        if (size > 0) {
          const chunk = new Uint8Array(size);
          let at = 0;
          for (const part of parts) {
            chunk.set(part, at);
            at += part.length;
          }
          controller.enqueue(chunk);
        }
        if (size < CHUNK) controller.close();
      },
      async cancel() {
        await source.return?.();
      },
    });
  };
}
