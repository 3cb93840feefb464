/**
 * The README's examples, typechecked with the tests (tsc --strict), never run: a change to the
 * client that breaks one fails the build.
 */

import { DataBarrier, Esfis, Held } from "../src/index.js";
import { EsfisStore } from "../src/langgraph.js";

declare const RUNS_ONLY_TOKEN: string;
declare const TOKEN: string;
declare function myAgent(task: string, notes: string[]): Promise<string>;

export async function threeLines(): Promise<void> {
  const esfis = new Esfis("http://127.0.0.1:8765", "esfis_…", { space: "acme" }); // a token from `esfis token create --ai NAME`
  await esfis.remember("Acme deploys go through ArgoCD", { data: { kind: "decision" } });
  console.log((await esfis.recall("how does acme deploy?", { filter: { kind: "decision" } })).map((m) => m.text));
}

const harness = new Esfis("http://127.0.0.1:8765", RUNS_ONLY_TOKEN);

export async function runSession(task: string, space: string, signal?: AbortSignal): Promise<string> {
  const memory = await harness.session({ space, ttl: "2h" }); // POST /v1/runs; holds only the run token
  const notes = await memory.recall(task, { limit: 5, signal });
  const answer = await myAgent(task, notes.map((n) => n.text)); // your loop, your model
  await memory.remember(answer, { data: { task }, signal });
  return answer;
}

export async function errors(session: Esfis, summary: string): Promise<void> {
  try {
    await session.remember(summary, { space: "globex" });
  } catch (refused) {
    if (!(refused instanceof DataBarrier)) throw refused; // this run read Acme: esfis will not carry it into Globex
    console.log(refused.message); // names the rule, the label and the target
  }
}

export async function heldCalls(session: Esfis): Promise<void> {
  const held = await session.remember("the deploy checklist lives in the wiki", { personal: true });
  if (held instanceof Held) {
    const approval = await held.wait({ timeout: 600_000 }); // the decided Approval, or still "pending" when time is up
    if (approval.approved) console.log("written as", approval.memory);
    else if (approval.pending) await held.withdraw(); // take it back
  }
}

export async function store(): Promise<EsfisStore> {
  const store = EsfisStore.connect("http://127.0.0.1:8765", TOKEN, { fields: ["text"] });
  const perSession = new EsfisStore(await harness.session({ space: "acme" }));
  void perSession;
  return store;
}
