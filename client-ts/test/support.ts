/**
 * What the tests against a real `esfis serve` share. tests/client/test_typescript_client.py
 * starts the server (spaces acme, acme/platform, globex) and passes it in the environment:
 * ESFIS_URL, ESFIS_OPERATOR_TOKEN, ESFIS_HARNESS_TOKEN (a runs-only token of the AI ts-agent: each
 * test opens run tokens, so each session is a run of its own that carries nothing yet; a run is
 * sealed in the space of its first step), ESFIS_AGENT_TOKENS (`{space: [tokens]}`: agent tokens
 * of the AI langgraph-agent scoped to a space, each a standing run that may step anywhere in its
 * subtree, for the store) and ESFIS_SERVER_CODES (every error code the server sends, with its
 * status).
 */

import { Esfis, type EsfisOptions } from "../src/index.js";

export const ACME_AUTH = "Acme authentication uses Auth0";
export const GLOBEX_AUTH = "Globex authentication uses Clerk";
export const SECRET = "the staging database password is in vault path secret/acme-stg";
export const QUESTION = "how does login work?";

/** This run of the tests, so a fact written again on the same server is a new fact (no dedupe). */
export const RUN = Date.now().toString(36);

function needed(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(
      `${name} is not set: these tests run against a real esfis serve, which ` +
        "tests/client/test_typescript_client.py starts (.venv/bin/python -m pytest tests/client/test_typescript_client.py)",
    );
  }
  return value;
}

export const SERVER_URL = needed("ESFIS_URL");
export const OPERATOR_TOKEN = needed("ESFIS_OPERATOR_TOKEN");
const HARNESS_TOKEN = needed("ESFIS_HARNESS_TOKEN");

/** The harness: a runs-only token, which only opens run tokens. */
export function harness(options: EsfisOptions = {}): Esfis {
  return new Esfis(SERVER_URL, HARNESS_TOKEN, options);
}

/** A new agent session: a client holding a run token of its own, standing in `space`. */
export function session(space?: string, options: EsfisOptions = {}): Promise<Esfis> {
  return harness(options).session(space === undefined ? {} : { space });
}

const agentTokens = JSON.parse(needed("ESFIS_AGENT_TOKENS")) as Record<string, string[]>;

/** A new agent token scoped to `space` (one of a pool made for these tests; each used once). */
export function agentToken(space: string): string {
  const token = agentTokens[space]?.shift();
  if (token === undefined) throw new Error(`no agent token left for ${space}: make more in test_typescript_client.py`);
  return token;
}

export function operator(): Esfis {
  return new Esfis(SERVER_URL, OPERATOR_TOKEN);
}

/** The server's error codes and their statuses, as server/errors.py says. */
export function serverCodes(): Record<string, number> {
  return JSON.parse(needed("ESFIS_SERVER_CODES")) as Record<string, number>;
}

/** The operator approves (or declines) a held call: the operator's route, not a client verb. */
export async function decide(approvalId: string, how: "approve" | "decline" = "approve"): Promise<void> {
  const answer = await fetch(`${SERVER_URL}/v1/approvals/${approvalId}/${how}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${OPERATOR_TOKEN}` },
  });
  if (answer.status !== 200) throw new Error(`${how} ${approvalId}: ${answer.status} ${await answer.text()}`);
}

export function texts(found: readonly { text: string | null }[]): (string | null)[] {
  return found.map((m) => m.text);
}
