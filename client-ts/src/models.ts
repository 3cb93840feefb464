/**
 * What the server answers, as typed values. Each reader takes the fields it knows and ignores the
 * rest, so a newer server's additions never break an older client; times are `Date`s; `data` is
 * the memory's metadata (`{}` when none, or when the server is older than metadata). Names are
 * camelCase (`createdAt` for the wire's `created_at`); a memory's `data` is yours, as you wrote it.
 */

/** A JSON object of your own: a memory's metadata, or a filter over it. */
export type JsonObject = { [key: string]: unknown };

/**
 * What travels with a memory: where it lives, its origin marks, its digest, the run that wrote
 * it, and the spaces whose data that run carried.
 */
export interface Labels {
  space: string | null;
  origin: string[];
  digest: string | null;
  run: string | null;
  from: string[];
}

/** A memory as remember, get, replace and the operator's export answer it. */
export interface Memory {
  id: string;
  /** null once forgotten */
  text: string | null;
  /** null: personal */
  space: string | null;
  ai: string;
  createdAt: Date;
  validFrom: Date | null;
  validUntil: Date | null;
  supersededBy: string | null;
  labels: Labels;
  data: JsonObject;
}

/** A memory close to a new one, but not the same fact. */
export interface Similar {
  id: string;
  score: number;
}

/** What remember answers: the memory, and whether the space held the fact already. */
export interface Remembered extends Memory {
  /** Set when the space already held this fact: nothing new was stored, and this is that memory. */
  duplicateOf: string | null;
  /** Up to three current memories of the same space close to this one (an outdated version to replace?). */
  similar: Similar[];
}

/** One memory of a recall, best first: `score` is its cosine to the query (0 with no query). */
export interface Recalled {
  id: string;
  text: string;
  space: string | null;
  score: number;
  createdAt: Date;
  validUntil: Date | null;
  labels: Labels;
  data: JsonObject;
}

export type ApprovalStatus = "pending" | "approved" | "declined" | "expired" | "void" | "withdrawn";

/**
 * A held call's state: pending until a person decides; `memory` is what an approved call wrote
 * (or, for a forget, forgot); `reason` says why it was declined, expired, void or withdrawn.
 */
export interface Approval {
  id: string;
  status: ApprovalStatus | (string & {});
  action: string;
  target: string | null;
  createdAt: Date;
  expiresAt: Date;
  decidedAt: Date | null;
  memory: string | null;
  reason: string | null;
  readonly pending: boolean;
  readonly approved: boolean;
}

/** A run token for one agent session: give the agent `token`, and only that. */
export interface RunToken {
  run: string;
  token: string;
  tokenId: string;
  expiresAt: Date;
}

export interface Shared {
  id: string;
  labels: Labels;
}

/** What share made: hand `ref` to another agent, which opens it (ids and labels, never texts). */
export interface Reference {
  ref: string;
  run: string;
  createdAt: Date;
  memories: Shared[];
}

export interface Opened {
  id: string;
  /** null: forgotten since it was shared */
  text: string | null;
  forgotten: boolean;
  labels: Labels;
  data: JsonObject;
}

/** An opened reference: the memories' texts. */
export interface Context {
  ref: string;
  run: string;
  memories: Opened[];
}

export interface LineError {
  line: number;
  reason: string;
}

/** An import's report: bad lines are listed by number (the first 1000) and the rest went in. */
export interface ImportReport {
  imported: number;
  skipped: number;
  failed: number;
  errors: LineError[];
  seconds: number;
  createdSpaces: string[];
}

export interface BackupReport {
  path: string;
  takenAt: Date;
  memories: number;
  partitions: number;
  forgottenSince: number;
  seconds: number;
}

/**
 * One keyset page of memories, newest first: the operator's listing, or an agent's (the current
 * memories it reads; read by its run, as a recall's results are). `nextCursor` null: the last page.
 */
export interface MemoryPage {
  memories: Memory[];
  nextCursor: string | null;
}

/**
 * One keyset page of the spaces the caller reads from where it stands, by name; `personal`: it
 * reads personal memories too (no space names them). `nextCursor` null: the last page.
 */
export interface SpacePage {
  personal: boolean;
  spaces: string[];
  nextCursor: string | null;
}

// -- readers: the wire's fields into the values above, unknown fields ignored --------------

/** The server answered something this client cannot read (a field it needs is missing). */
export class UnreadableAnswer extends TypeError {
  constructor(what: string, field: string) {
    super(`esfis answered a ${what} without its '${field}': is this an esfis server?`);
    this.name = "UnreadableAnswer";
  }
}

type Wire = Record<string, unknown>;

function object(value: unknown, what: string): Wire {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new UnreadableAnswer(what, "body");
  }
  return value as Wire;
}

function required(o: Wire, field: string, what: string): unknown {
  const value = o[field];
  if (value === undefined || value === null) throw new UnreadableAnswer(what, field);
  return value;
}

function text(o: Wire, field: string, what: string): string {
  return String(required(o, field, what));
}

function textOrNull(o: Wire, field: string): string | null {
  const value = o[field];
  return value === undefined || value === null ? null : String(value);
}

function number(o: Wire, field: string, fallback = 0): number {
  const value = o[field];
  return typeof value === "number" ? value : fallback;
}

function date(o: Wire, field: string, what: string): Date {
  return new Date(text(o, field, what));
}

function dateOrNull(o: Wire, field: string): Date | null {
  const value = textOrNull(o, field);
  return value === null ? null : new Date(value);
}

function texts(o: Wire, field: string): string[] {
  const value = o[field];
  return Array.isArray(value) ? value.map(String) : [];
}

function list<T>(o: Wire, field: string, read: (item: unknown) => T): T[] {
  const value = o[field];
  return Array.isArray(value) ? value.map(read) : [];
}

function data(o: Wire): JsonObject {
  const value = o["data"];
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as JsonObject) : {};
}

export function readLabels(value: unknown): Labels {
  const o = typeof value === "object" && value !== null ? (value as Wire) : {};
  return {
    space: textOrNull(o, "space"),
    origin: texts(o, "origin"),
    digest: textOrNull(o, "digest"),
    run: textOrNull(o, "run"),
    from: texts(o, "from"),
  };
}

export function readMemory(value: unknown): Memory {
  const o = object(value, "memory");
  return {
    id: text(o, "id", "memory"),
    text: textOrNull(o, "text"),
    space: textOrNull(o, "space"),
    ai: textOrNull(o, "ai") ?? "",
    createdAt: date(o, "created_at", "memory"),
    validFrom: dateOrNull(o, "valid_from"),
    validUntil: dateOrNull(o, "valid_until"),
    supersededBy: textOrNull(o, "superseded_by"),
    labels: readLabels(o["labels"]),
    data: data(o),
  };
}

export function readRemembered(value: unknown): Remembered {
  const o = object(value, "memory");
  return {
    ...readMemory(o),
    duplicateOf: textOrNull(o, "duplicate_of"),
    similar: list(o, "similar", (s) => {
      const item = object(s, "similar memory");
      return { id: text(item, "id", "similar memory"), score: number(item, "score") };
    }),
  };
}

export function readRecalled(value: unknown): Recalled {
  const o = object(value, "recalled memory");
  return {
    id: text(o, "id", "recalled memory"),
    text: textOrNull(o, "text") ?? "",
    space: textOrNull(o, "space"),
    score: number(o, "score"),
    createdAt: date(o, "created_at", "recalled memory"),
    validUntil: dateOrNull(o, "valid_until"),
    labels: readLabels(o["labels"]),
    data: data(o),
  };
}

export function readRecall(value: unknown): Recalled[] {
  return list(object(value, "recall"), "memories", readRecalled);
}

export function readApproval(value: unknown): Approval {
  const o = object(value, "approval");
  const status = text(o, "status", "approval");
  return {
    id: text(o, "id", "approval"),
    status,
    action: textOrNull(o, "action") ?? "",
    target: textOrNull(o, "target"),
    createdAt: date(o, "created_at", "approval"),
    expiresAt: date(o, "expires_at", "approval"),
    decidedAt: dateOrNull(o, "decided_at"),
    memory: textOrNull(o, "memory"),
    reason: textOrNull(o, "reason"),
    pending: status === "pending",
    approved: status === "approved",
  };
}

export function readRunToken(value: unknown): RunToken {
  const o = object(value, "run token");
  return {
    run: text(o, "run", "run token"),
    token: text(o, "token", "run token"),
    tokenId: text(o, "token_id", "run token"),
    expiresAt: date(o, "expires_at", "run token"),
  };
}

export function readReference(value: unknown): Reference {
  const o = object(value, "reference");
  return {
    ref: text(o, "ref", "reference"),
    run: text(o, "run", "reference"),
    createdAt: date(o, "created_at", "reference"),
    memories: list(o, "memories", (m) => {
      const item = object(m, "shared memory");
      return { id: text(item, "id", "shared memory"), labels: readLabels(item["labels"]) };
    }),
  };
}

export function readContext(value: unknown): Context {
  const o = object(value, "context");
  return {
    ref: text(o, "ref", "context"),
    run: text(o, "run", "context"),
    memories: list(o, "memories", (m) => {
      const item = object(m, "opened memory");
      return {
        id: text(item, "id", "opened memory"),
        text: textOrNull(item, "text"),
        forgotten: item["forgotten"] === true,
        labels: readLabels(item["labels"]),
        data: data(item),
      };
    }),
  };
}

export function readImportReport(value: unknown): ImportReport {
  const o = object(value, "import report");
  return {
    imported: number(o, "imported"),
    skipped: number(o, "skipped"),
    failed: number(o, "failed"),
    errors: list(o, "errors", (e) => {
      const item = object(e, "import error");
      return { line: number(item, "line"), reason: textOrNull(item, "reason") ?? "" };
    }),
    seconds: number(o, "seconds"),
    createdSpaces: texts(o, "created_spaces"),
  };
}

export function readBackupReport(value: unknown): BackupReport {
  const o = object(value, "backup report");
  return {
    path: text(o, "path", "backup report"),
    takenAt: date(o, "taken_at", "backup report"),
    memories: number(o, "memories"),
    partitions: number(o, "partitions"),
    forgottenSince: number(o, "forgotten_since"),
    seconds: number(o, "seconds"),
  };
}

export function readMemoryPage(value: unknown): MemoryPage {
  const o = object(value, "page of memories");
  return { memories: list(o, "memories", readMemory), nextCursor: textOrNull(o, "next_cursor") };
}

export function readSpacePage(value: unknown): SpacePage {
  const o = object(value, "page of spaces");
  return {
    personal: o["personal"] === true,
    spaces: list(o, "spaces", (s) => text(object(s, "space"), "name", "space")),
    nextCursor: textOrNull(o, "next_cursor"),
  };
}
