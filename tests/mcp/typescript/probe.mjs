// A host on another machine, as the official TypeScript SDK's client: connects to esfis's
// /mcp over streamable HTTP with a bearer token, optionally answers elicitation as a person,
// calls the tools it is given, and prints what it got as one JSON line.
// usage: node probe.mjs URL TOKEN ELICIT(accept|none) '[["tool", {args}], ...]'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token, elicit, steps] = process.argv.slice(2);
const capabilities = elicit === "accept" ? { elicitation: {} } : {};
const client = new Client({ name: "ts-probe", version: "1.0.0" }, { capabilities });
const seen = [];
if (elicit === "accept") {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    seen.push(request.params.message);
    return { action: "accept", content: { approve: true } };
  });
}
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const results = [];
for (const [name, args] of JSON.parse(steps)) {
  const answer = await client.callTool({ name, arguments: args });
  results.push({
    isError: answer.isError ?? false,
    structured: answer.structuredContent ?? null,
    text: (answer.content ?? []).map((c) => c.text ?? "").join(" "),
  });
}
console.log(JSON.stringify({ results, seen, session: Boolean(transport.sessionId) }));
await client.close();
