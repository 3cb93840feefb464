/**
 * esfis's TypeScript client: `Esfis`, typed results, esfis's error codes as classes, held calls
 * as values to wait on. `esfis-client/langgraph` is LangGraph.js's `BaseStore` over it.
 *
 * No dependency beyond the platform's `fetch` (Node 18+, Deno, Bun).
 */

export {
  Esfis,
  Held,
  isHeld,
  VERSION,
  type CallOptions,
  type EsfisOptions,
  type ExportOptions,
  type FetchLike,
  type ImportOptions,
  type ListMemoriesOptions,
  type ListSpacesOptions,
  type MemoriesOptions,
  type PlaceOptions,
  type RecallOptions,
  type RememberOptions,
  type ReplaceOptions,
  type RunOptions,
  type SpacesOptions,
  type WaitOptions,
} from "./client.js";
export type { ImportRow, Place, Selection } from "./calls.js";
export * from "./errors.js";
export * from "./models.js";
export { NO_RETRIES, Retries, type RetryOptions } from "./retrying.js";
