/**
 * When a call is sent again, and how long a held call's poll waits between looks.
 *
 * - A **safe** call (a read: get, recall, openContext, an approval's check, an export page) is
 *   sent again after a 429 (when the server's Retry-After is at most `maxWait`), a 503, or a
 *   connection that broke or timed out, up to `attempts` sends in all, waiting Retry-After or a
 *   growing backoff in between.
 * - Any call, a write included, is sent again when its connection was never made (refused, or
 *   the name did not resolve: nothing reached the server).
 * - Nothing else is repeated: a write whose answer was lost might have been applied, and esfis
 *   has no idempotency key to make a second send harmless. The error goes to the caller, with
 *   `retryAfter` on `TooManyRequests`, `DiskFull` and `Unavailable`.
 *
 * Durations here are milliseconds, as JavaScript's timers count; `retryAfter` on an error is
 * seconds, as the Retry-After header says.
 */

import { retryAfterOf } from "./errors.js";

export interface RetryOptions {
  /** Sends in all, the first included (default 3). */
  attempts?: number;
  /** Milliseconds before the second send; doubled each time (default 250). */
  backoff?: number;
  /** The longest Retry-After honoured, in milliseconds (default 30 000); a longer one is thrown at once. */
  maxWait?: number;
}

export class Retries {
  readonly attempts: number;
  readonly backoff: number;
  readonly maxWait: number;

  constructor(options: RetryOptions = {}) {
    this.attempts = Math.max(1, options.attempts ?? 3);
    this.backoff = options.backoff ?? 250;
    this.maxWait = options.maxWait ?? 30_000;
  }

  /** Milliseconds to wait before sending again, or null: the answer stands. */
  afterAnswer(safe: boolean, attempt: number, status: number, headers: Headers): number | null {
    if (!safe || attempt >= this.attempts) return null;
    if (status === 429) {
      const wait = retryAfterOf(headers) * 1000;
      return wait <= this.maxWait ? wait : null;
    }
    if (status === 503) {
      const told = headers.has("Retry-After") ? retryAfterOf(headers) * 1000 : 0;
      return Math.min(this.maxWait, Math.max(told, this.backoffAfter(attempt)));
    }
    return null;
  }

  /** Milliseconds to wait before sending again after a failed connection, or null: throw. */
  afterError(safe: boolean, attempt: number, neverSent: boolean): number | null {
    if (attempt >= this.attempts) return null;
    return neverSent || safe ? this.backoffAfter(attempt) : null;
  }

  private backoffAfter(attempt: number): number {
    return this.backoff * 2 ** (attempt - 1);
  }
}

/** Every call sent once. */
export const NO_RETRIES = new Retries({ attempts: 1 });

/** A held call's poll: 100 ms, then doubling to one look every 5 s. */
export function* pollDelays(first = 100, longest = 5_000): Generator<number, never> {
  let delay = first;
  for (;;) {
    yield delay;
    delay = Math.min(longest, delay * 2);
  }
}

/** Wait `ms`, or reject with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
