// The built client (../dist) on whichever runtime runs this file: Node.js, Deno or Bun. Run by
// tests/client/test_typescript_client.py against a real esfis serve, with ESFIS_URL and
// ESFIS_RUNTIME_TOKENS ({"acme": token, "globex": token}, agent tokens scoped to each) set.
// Prints one JSON line: the runtime it ran on and what it checked.
import { Esfis, TextTooLong } from "../dist/index.js";

const runtime = globalThis.Deno ? "deno" : globalThis.Bun ? "bun" : "node";
const env = (name) => (globalThis.Deno ? globalThis.Deno.env.get(name) : process.env[name]);
const url = env("ESFIS_URL");
const tokens = JSON.parse(env("ESFIS_RUNTIME_TOKENS"));
const mark = `${runtime}-${Date.now().toString(36)}`; // a new fact each run (one fact once)

function check(ok, what) {
  if (!ok) throw new Error(`${runtime}: ${what}`);
}

const acme = new Esfis(url, tokens.acme, { space: "acme" });
const globex = new Esfis(url, tokens.globex, { space: "globex" });
const written = await acme.remember(`Acme authentication uses Auth0 (${mark})`, { data: { runtime } });
await globex.remember(`Globex authentication uses Clerk (${mark})`);

const found = await acme.recall("how does login work?", { limit: 10 });
check(found.some((m) => m.text.includes(`Auth0 (${mark})`)), "Acme's own fact was not recalled");
check(!found.some((m) => m.text.includes("Clerk")), "Globex's fact reached an Acme recall");
check(found.every((m) => m.createdAt instanceof Date), "times are not Dates");

const filtered = await acme.recall({ filter: { runtime } });
check(filtered.some((m) => m.id === written.id) && filtered.every((m) => m.data.runtime === runtime), "the filter");

let refused = null;
try {
  await acme.remember("x".repeat(40_000));
} catch (error) {
  refused = error;
}
check(refused instanceof TextTooLong && refused.status === 422, `TextTooLong, not ${refused?.constructor?.name}`);

console.log(JSON.stringify({ runtime, recalled: found.length, refused: refused.code }));
