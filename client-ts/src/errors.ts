/**
 * esfis's errors as classes: one per code the server sends, under one base, mirroring the
 * Python client's `esfis_client.errors`.
 *
 *     EsfisError                      code                   status
 *     ├── InvalidInput                invalid_input          422   a field is wrong (the message names it; `field`)
 *     │   ├── InvalidSpaceName        invalid_space          422
 *     │   ├── InvalidMemoryId         invalid_id             422
 *     │   ├── TextTooLong             too_long               422
 *     │   ├── BadImportLine           bad_line               422
 *     │   ├── BackupDamaged           backup_damaged         422
 *     │   └── BadRequest              bad_request            400
 *     ├── NotFound                    not_found              404   alike for ids that never existed and unseen ones
 *     │   └── SpaceNotFound           space_not_found        404
 *     ├── Forbidden                   forbidden              403
 *     │   ├── PolicyDenied            policy_denied          403
 *     │   ├── OutOfReach              out_of_reach           403
 *     │   ├── DataBarrier             data_barrier           403   the barrier: names the rule, the label, the target
 *     │   ├── UntrustedSource         untrusted_source       403
 *     │   ├── RunEnded                run_ended              403
 *     │   └── BackupNotTrusted        backup_untrusted       403
 *     ├── Unauthorized                unauthorized           401
 *     ├── Conflict                    conflict               409
 *     │   ├── AlreadySuperseded       superseded             409
 *     │   ├── SpaceNotEmpty           space_not_empty        409
 *     │   ├── SpaceExists             space_exists           409
 *     │   ├── ApprovalPending         approval_pending       409   this run (or token) already holds a call
 *     │   ├── ApprovalDecided         approval_decided       409
 *     │   ├── FolderNotEmpty          folder_not_empty       409
 *     │   └── BackupUnderWay          backup_under_way       409
 *     ├── MethodNotAllowed            method_not_allowed     405
 *     ├── PayloadTooLarge             too_large              413
 *     ├── UnsupportedMediaType        unsupported_media_type 415
 *     ├── TooManyRequests             too_many_requests      429   `retryAfter`: seconds, from Retry-After
 *     ├── DiskFull                    disk_full              507   no room on the server's disk: nothing was written;
 *     │                                                            reads go on; `retryAfter` from Retry-After
 *     ├── Unavailable                 unavailable            503   come back later (`retryAfter`): nothing was written
 *     │   ├── CatalogUnavailable      catalog_unavailable    503   the server's catalog cannot be reached now
 *     │   ├── StorageFailed           storage_failed         503   the server's disk or object store failed (EIO)
 *     │   └── NotInstalled            not_installed          503   a part of the server failed to load (MCP, OAuth)
 *     ├── NotServed                   not_served             503
 *     ├── StoreUnavailable            store_error            500
 *     ├── InternalError               internal               500
 *     ├── HeldForApproval             (client)                     a held call, thrown only when asked (`raiseHeld`)
 *     └── ConnectionFailed            (client)                     the server could not be reached or answered no HTTP
 *
 * Every server error body is `{"error": {"code": …, "message": …}}`; `errorFrom` picks the class
 * by code, and for a code this client does not know yet, the nearest class by status.
 */

import type { Held } from "./client.js";

export interface EsfisErrorOptions {
  code?: string;
  status?: number;
  cause?: unknown;
}

/** Base of every error this client throws: `code` and `status` as the server sent them. */
export class EsfisError extends Error {
  static readonly code: string = "error";
  static readonly status: number = 500;

  readonly code: string;
  readonly status: number;

  constructor(message: string, options: EsfisErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    const kind = new.target as typeof EsfisError;
    this.name = kind.name;
    this.code = options.code ?? kind.code;
    this.status = options.status ?? kind.status;
  }
}

/** A field is wrong; the message names it, and `field` is that name when the message gives it. */
export class InvalidInput extends EsfisError {
  static override readonly code: string = "invalid_input";
  static override readonly status: number = 422;

  /** The request's field the message names (`invalid field 'limit': …`, `as_of must be …`), if any. */
  field: string | undefined;

  constructor(message: string, options: EsfisErrorOptions & { field?: string } = {}) {
    super(message, options);
    this.field = options.field ?? fieldNamedIn(message);
  }
}

export class InvalidSpaceName extends InvalidInput {
  static override readonly code: string = "invalid_space";
}

export class InvalidMemoryId extends InvalidInput {
  static override readonly code: string = "invalid_id";
}

export class TextTooLong extends InvalidInput {
  static override readonly code: string = "too_long";
}

export class BadImportLine extends InvalidInput {
  static override readonly code: string = "bad_line";
}

export class BackupDamaged extends InvalidInput {
  static override readonly code: string = "backup_damaged";
}

export class BadRequest extends InvalidInput {
  static override readonly code: string = "bad_request";
  static override readonly status: number = 400;
}

export class NotFound extends EsfisError {
  static override readonly code: string = "not_found";
  static override readonly status: number = 404;
}

export class SpaceNotFound extends NotFound {
  static override readonly code: string = "space_not_found";
}

export class Forbidden extends EsfisError {
  static override readonly code: string = "forbidden";
  static override readonly status: number = 403;
}

export class PolicyDenied extends Forbidden {
  static override readonly code: string = "policy_denied";
}

export class OutOfReach extends Forbidden {
  static override readonly code: string = "out_of_reach";
}

/** Data would cross a boundary esfis has no authority to cross: not a policy to edit. */
export class DataBarrier extends Forbidden {
  static override readonly code: string = "data_barrier";
}

export class UntrustedSource extends Forbidden {
  static override readonly code: string = "untrusted_source";
}

export class RunEnded extends Forbidden {
  static override readonly code: string = "run_ended";
}

export class BackupNotTrusted extends Forbidden {
  static override readonly code: string = "backup_untrusted";
}

export class Unauthorized extends EsfisError {
  static override readonly code: string = "unauthorized";
  static override readonly status: number = 401;
}

export class Conflict extends EsfisError {
  static override readonly code: string = "conflict";
  static override readonly status: number = 409;
}

export class AlreadySuperseded extends Conflict {
  static override readonly code: string = "superseded";
}

export class SpaceNotEmpty extends Conflict {
  static override readonly code: string = "space_not_empty";
}

export class SpaceExists extends Conflict {
  static override readonly code: string = "space_exists";
}

/** One held call at a time: the run (or its token) already holds one waiting for a person. */
export class ApprovalPending extends Conflict {
  static override readonly code: string = "approval_pending";
}

export class ApprovalDecided extends Conflict {
  static override readonly code: string = "approval_decided";
}

export class FolderNotEmpty extends Conflict {
  static override readonly code: string = "folder_not_empty";
}

export class BackupUnderWay extends Conflict {
  static override readonly code: string = "backup_under_way";
}

export class MethodNotAllowed extends EsfisError {
  static override readonly code: string = "method_not_allowed";
  static override readonly status: number = 405;
}

export class PayloadTooLarge extends EsfisError {
  static override readonly code: string = "too_large";
  static override readonly status: number = 413;
}

export class UnsupportedMediaType extends EsfisError {
  static override readonly code: string = "unsupported_media_type";
  static override readonly status: number = 415;
}

export interface RetryAfterOptions extends EsfisErrorOptions {
  /** Seconds, from the server's Retry-After (1 when it sent none). */
  retryAfter?: number;
}

/** Over a share or a rate limit; `retryAfter` is the server's Retry-After, in seconds. */
export class TooManyRequests extends EsfisError {
  static override readonly code: string = "too_many_requests";
  static override readonly status: number = 429;

  /** Seconds to wait before sending again, as the server's Retry-After says. */
  readonly retryAfter: number;

  constructor(message: string, options: RetryAfterOptions = {}) {
    super(message, options);
    this.retryAfter = options.retryAfter ?? 1;
  }
}

/** The server's disk has no room for a write: it was refused whole; reads go on. */
export class DiskFull extends EsfisError {
  static override readonly code: string = "disk_full";
  static override readonly status: number = 507;

  /** Seconds to wait before writing again, as the server's Retry-After says. */
  readonly retryAfter: number;

  constructor(message: string, options: RetryAfterOptions = {}) {
    super(message, options);
    this.retryAfter = options.retryAfter ?? 1;
  }
}

/** Something the server stands on is down for now; the call changed nothing. */
export class Unavailable extends EsfisError {
  static override readonly code: string = "unavailable";
  static override readonly status: number = 503;

  /** Seconds to wait before trying again, as the server's Retry-After says. */
  readonly retryAfter: number;

  constructor(message: string, options: RetryAfterOptions = {}) {
    super(message, options);
    this.retryAfter = options.retryAfter ?? 1;
  }
}

export class CatalogUnavailable extends Unavailable {
  static override readonly code: string = "catalog_unavailable";
}

export class StorageFailed extends Unavailable {
  static override readonly code: string = "storage_failed";
}

/** A part of the server (`/mcp`, OAuth) failed to load: its install needs repair. */
export class NotInstalled extends Unavailable {
  static override readonly code: string = "not_installed";
}

export class NotServed extends EsfisError {
  static override readonly code: string = "not_served";
  static override readonly status: number = 503;
}

export class StoreUnavailable extends EsfisError {
  static override readonly code: string = "store_error";
  static override readonly status: number = 500;
}

export class InternalError extends EsfisError {
  static override readonly code: string = "internal";
  static override readonly status: number = 500;
}

/**
 * A call held for a person (HTTP 202), thrown only by a client made with `raiseHeld: true`;
 * `held` is the value the call would have returned (wait on it, or withdraw it).
 */
export class HeldForApproval extends EsfisError {
  static override readonly code: string = "held";
  static override readonly status: number = 202;

  readonly held: Held;

  constructor(message: string, held: Held) {
    super(message);
    this.held = held;
  }
}

/** The server could not be reached, or the connection broke (or timed out) before an answer. */
export class ConnectionFailed extends EsfisError {
  static override readonly code: string = "connection_failed";
  static override readonly status: number = 0;
}

/** A class of the tree: its code and status, as the server sends them. */
export interface ErrorClass {
  readonly name: string;
  readonly code: string;
  readonly status: number;
  readonly prototype: EsfisError;
}

/** A class an answer is read into (every one but the client's own). */
type AnswerClass = new (message: string, options?: RetryAfterOptions & { field?: string }) => EsfisError;

/** Every class of the tree, the base first. */
export const ERROR_CLASSES: readonly ErrorClass[] = [
  EsfisError,
  InvalidInput,
  InvalidSpaceName,
  InvalidMemoryId,
  TextTooLong,
  BadImportLine,
  BackupDamaged,
  BadRequest,
  NotFound,
  SpaceNotFound,
  Forbidden,
  PolicyDenied,
  OutOfReach,
  DataBarrier,
  UntrustedSource,
  RunEnded,
  BackupNotTrusted,
  Unauthorized,
  Conflict,
  AlreadySuperseded,
  SpaceNotEmpty,
  SpaceExists,
  ApprovalPending,
  ApprovalDecided,
  FolderNotEmpty,
  BackupUnderWay,
  MethodNotAllowed,
  PayloadTooLarge,
  UnsupportedMediaType,
  TooManyRequests,
  DiskFull,
  Unavailable,
  CatalogUnavailable,
  StorageFailed,
  NotInstalled,
  NotServed,
  StoreUnavailable,
  InternalError,
  HeldForApproval,
  ConnectionFailed,
];

/** The class for each code (the client's own, `held` and `connection_failed`, included). */
export const BY_CODE: ReadonlyMap<string, ErrorClass> = new Map(
  ERROR_CLASSES.filter((kind) => kind !== EsfisError).map((kind) => [kind.code, kind]),
);

/** A code this client does not know (a newer server's) still lands in its family. */
export const BY_STATUS: ReadonlyMap<number, ErrorClass> = new Map<number, ErrorClass>([
  [400, BadRequest],
  [401, Unauthorized],
  [403, Forbidden],
  [404, NotFound],
  [405, MethodNotAllowed],
  [409, Conflict],
  [413, PayloadTooLarge],
  [415, UnsupportedMediaType],
  [422, InvalidInput],
  [429, TooManyRequests],
  [503, Unavailable],
  [507, DiskFull],
]);

/** The Retry-After header in seconds (esfis sends no date form); 1 when absent or unreadable. */
export function retryAfterOf(headers: Headers): number {
  const value = headers.get("Retry-After");
  if (value === null) return 1;
  const seconds = Number(value.trim());
  return Number.isFinite(seconds) && value.trim() !== "" ? Math.max(0, seconds) : 1;
}

/** The classes whose answers carry Retry-After: these, and every class that extends one. */
const COME_BACK_LATER: readonly ErrorClass[] = [TooManyRequests, DiskFull, Unavailable];

function saysRetryAfter(kind: ErrorClass): boolean {
  return COME_BACK_LATER.some((base) => kind === base || base.prototype.isPrototypeOf(kind.prototype));
}

/**
 * The error for an answer that is not a success: by its code, else by its status. `body` is the
 * answer's text (a proxy's HTML page is read by its status); `fields` are the request's field
 * names, so an `InvalidInput` can say which one its message names.
 */
export function errorFrom(status: number, body: string, headers: Headers, fields: readonly string[] = []): EsfisError {
  let code: string | undefined;
  let message = `HTTP ${status}`;
  try {
    const parsed: unknown = JSON.parse(body);
    const error = isObject(parsed) ? parsed["error"] : undefined;
    if (isObject(error)) {
      if (typeof error["code"] === "string") code = error["code"];
      if (error["message"] !== undefined) message = String(error["message"]);
    }
  } catch {
    // not JSON: the status decides
  }
  let kind = (code !== undefined ? BY_CODE.get(code) : undefined) ?? BY_STATUS.get(status);
  if (kind === undefined || kind === HeldForApproval || kind === ConnectionFailed) {
    kind = status >= 500 ? InternalError : EsfisError;
  }
  const options: RetryAfterOptions & { field?: string } = { code: code ?? kind.code, status };
  if (saysRetryAfter(kind)) options.retryAfter = retryAfterOf(headers);
  if (kind === InvalidInput || kind.prototype instanceof InvalidInput) {
    const field = fieldNamedIn(message, fields);
    if (field !== undefined) options.field = field;
  }
  return new (kind as unknown as AnswerClass)(message, options);
}

/**
 * The field an invalid-input message names: `invalid field 'limit': …` (the HTTP layer's
 * validation), else a message that starts with one of the request's field names (`as_of must …`).
 */
export function fieldNamedIn(message: string, fields: readonly string[] = []): string | undefined {
  const quoted = /\bfield '([^']+)'/.exec(message);
  if (quoted?.[1] !== undefined) return quoted[1];
  const first = /^([A-Za-z_][A-Za-z0-9_.]*)\b/.exec(message)?.[1];
  return first !== undefined && fields.includes(first) ? first : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
