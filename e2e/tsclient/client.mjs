// A real MCP client for Rollcall's end-to-end tests: the official MCP
// TypeScript SDK (@modelcontextprotocol/sdk, Streamable HTTP transport),
// driven by the Go test over stdin/stdout with one JSON object per line.
//
//   node client.mjs <mcp-url> <bearer-token> [--cycles=N]
//
// With --cycles=N it first opens and ends N sessions, each a fresh client:
// connect (initialize), terminateSession (DELETE), close; one
// {"event":"cycle","n":i,"session":...} each, then {"event":"cycles","count":N}.
//
// Output events: {"event":"ready",...} after initialize (server info,
// capabilities, instructions, tool names, session id); {"event":"notification",
// "method":..., "params":...} for every notifications/claude/channel;
// {"event":"result","id":...,"result":...} / {"event":"error","id":...,
// "message":...} for each command; {"event":"closed"} on exit.
// Input commands: {"id":1,"cmd":"call","name":"claim","args":{...}},
// {"id":2,"cmd":"list_tools"}, {"cmd":"close"}.
//
// With --oauth (the token argument is then ignored) the client signs in by
// itself, as the SDK's OAuth client does for any MCP server: it reads the
// 401's resource metadata, registers (RFC 7591) with a loopback redirect URI
// it serves, and prints {"event":"authorize","url":...}; whoever drives the
// test opens that URL in a browser and approves. The loopback callback then
// prints {"event":"callback","iss":...,"state_ok":...}, the code is
// exchanged (PKCE, resource) and the session opens on the token it got.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import http from "node:http";
import crypto from "node:crypto";
import * as z from "zod/v4";
import readline from "node:readline";

const [url, token, ...flags] = process.argv.slice(2);
if (!url || !token) {
  console.error("usage: node client.mjs <mcp-url> <bearer-token> [--cycles=N]");
  process.exit(2);
}
const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const provider = flags.includes("--oauth") ? await oauthProvider() : null;
const newTransport = () =>
  new StreamableHTTPClientTransport(
    new URL(url),
    provider ? { authProvider: provider } : { requestInit: { headers: { Authorization: `Bearer ${token}` } } },
  );

// oauthProvider is an in-memory OAuthClientProvider with a loopback
// redirect URI (RFC 8252) served here; callback resolves with the answer.
async function oauthProvider() {
  const srv = http.createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const redirectUrl = `http://127.0.0.1:${srv.address().port}/callback`;
  const state = crypto.randomBytes(16).toString("hex");
  let info, tokens, verifier, done;
  const callback = new Promise((r) => (done = r));
  srv.on("request", (req, res) => {
    const u = new URL(req.url, redirectUrl);
    if (u.pathname !== "/callback") {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" }).end("Signed in to Rollcall; you can close this window.");
    done(Object.fromEntries(u.searchParams));
    srv.close();
  });
  return {
    callback,
    expectedState: state,
    get redirectUrl() {
      return redirectUrl;
    },
    get clientMetadata() {
      return {
        client_name: "Rollcall e2e (MCP TypeScript SDK)",
        redirect_uris: [redirectUrl],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      };
    },
    state: () => state,
    clientInformation: () => info,
    saveClientInformation: (i) => (info = i),
    tokens: () => tokens,
    saveTokens: (t) => (tokens = t),
    redirectToAuthorization: (u) => emit({ event: "authorize", url: u.href }),
    saveCodeVerifier: (v) => (verifier = v),
    codeVerifier: () => verifier,
  };
}

const cycles = Number((flags.find((f) => f.startsWith("--cycles=")) ?? "--cycles=0").slice("--cycles=".length));
for (let i = 1; i <= cycles; i++) {
  const t = newTransport();
  const c = new Client({ name: "rollcall-e2e-ts-cycle", version: "1.0.0" });
  try {
    await c.connect(t);
    const session = t.sessionId;
    await t.terminateSession();
    await c.close();
    emit({ event: "cycle", n: i, session });
  } catch (e) {
    emit({ event: "error", id: 0, message: `cycle ${i}: ${String(e?.message ?? e)}` });
    process.exit(1);
  }
}
if (cycles > 0) emit({ event: "cycles", count: cycles });

const ChannelNotification = z.object({
  method: z.literal("notifications/claude/channel"),
  params: z.object({ content: z.string(), meta: z.record(z.string(), z.string()) }).passthrough(),
});
const newClient = () => {
  const c = new Client({ name: "rollcall-e2e-ts", version: "1.0.0" });
  c.setNotificationHandler(ChannelNotification, (n) => {
    emit({ event: "notification", method: n.method, params: n.params });
  });
  return c;
};
let transport = newTransport();
let client = newClient();

try {
  try {
    await client.connect(transport);
  } catch (e) {
    if (!provider || !(e instanceof UnauthorizedError)) throw e;
    // Signing in: the browser approves, the loopback callback brings the code.
    const answer = await provider.callback;
    emit({ event: "callback", iss: answer.iss ?? "", state_ok: answer.state === provider.expectedState, message: answer.error ?? "" });
    if (!answer.code) throw new Error(`authorization refused: ${answer.error}`);
    await transport.finishAuth(answer.code);
    transport = newTransport();
    client = newClient();
    await client.connect(transport);
  }
} catch (e) {
  emit({ event: "error", id: 0, message: String(e?.message ?? e) });
  process.exit(1);
}
const tools = await client.listTools();
emit({
  event: "ready",
  session: transport.sessionId,
  protocol: transport.protocolVersion,
  server: client.getServerVersion(),
  capabilities: client.getServerCapabilities(),
  instructions: client.getInstructions(),
  tools: tools.tools.map((t) => t.name),
});

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    emit({ event: "error", id: null, message: "bad command line" });
    continue;
  }
  try {
    if (msg.cmd === "call") {
      const r = await client.callTool({ name: msg.name, arguments: msg.args ?? {} });
      emit({ event: "result", id: msg.id, result: r });
    } else if (msg.cmd === "list_tools") {
      const r = await client.listTools();
      emit({ event: "result", id: msg.id, result: r });
    } else if (msg.cmd === "close") {
      break;
    }
  } catch (e) {
    emit({ event: "error", id: msg.id, message: String(e?.message ?? e) });
  }
}
try {
  await transport.terminateSession();
} catch {}
await client.close();
emit({ event: "closed" });
process.exit(0);
