// A host on the same machine, as the official TypeScript SDK's client with its OAuth client
// (an OAuthClientProvider kept in memory): connects to esfis's /mcp with no token, follows the
// 401 to the server's metadata, registers itself (RFC 7591), and prints the authorization URL
// as one JSON line, {"authorize": URL}. Whoever drives it does the operator's consent and writes
// the code on stdin (one line); the probe exchanges it (PKCE), connects again, lists the tools,
// calls recall, and prints {"tools": [...], "recalled": [...], "tokens": {...}} as its last line.
// usage: node oauth_probe.mjs MCP_URL REDIRECT_URL QUERY
import { createInterface } from "node:readline";

import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, redirectUrl, query] = process.argv.slice(2);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");

class MemoryProvider {
  constructor() {
    this.redirects = 0;
  }
  get redirectUrl() {
    return redirectUrl;
  }
  get clientMetadata() {
    return {
      client_name: "TypeScript host",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(information) {
    this.client = information;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(authorizationUrl) {
    this.redirects += 1;
    say({ authorize: authorizationUrl.toString() });
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    if (!this.verifier) throw new Error("no code verifier saved");
    return this.verifier;
  }
}

const provider = new MemoryProvider();
const newClient = () => new Client({ name: "ts-oauth-probe", version: "1.0.0" }, { capabilities: {} });

let client = newClient();
let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
let unauthorized = false;
try {
  await client.connect(transport);
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
  unauthorized = true;
}
if (!unauthorized) throw new Error("connected without authorizing: the server asked for no token");
const code = (await lines.next()).value?.trim();
if (!code) throw new Error("no authorization code on stdin");
await transport.finishAuth(code);
await transport.close().catch(() => {});

client = newClient();
transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
await client.connect(transport);
const listed = await client.listTools();
const answer = await client.callTool({ name: "recall", arguments: { query } });
say({
  tools: listed.tools.map((tool) => tool.name),
  isError: answer.isError ?? false,
  recalled: (answer.structuredContent?.memories ?? []).map((memory) => memory.text),
  text: (answer.content ?? []).map((c) => c.text ?? "").join(" "),
  redirects: provider.redirects,
  client_id: provider.client?.client_id ?? null,
  tokens: {
    token_type: provider.saved?.token_type ?? null,
    expires_in: provider.saved?.expires_in ?? null,
    refresh: Boolean(provider.saved?.refresh_token),
  },
  session: Boolean(transport.sessionId),
});
await client.close();
process.exit(0);
