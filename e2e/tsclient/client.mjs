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
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import * as z from "zod/v4";
import readline from "node:readline";

const [url, token, ...flags] = process.argv.slice(2);
if (!url || !token) {
  console.error("usage: node client.mjs <mcp-url> <bearer-token> [--cycles=N]");
  process.exit(2);
}
const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const newTransport = () =>
  new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });

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

const transport = newTransport();
const client = new Client({ name: "rollcall-e2e-ts", version: "1.0.0" });
const ChannelNotification = z.object({
  method: z.literal("notifications/claude/channel"),
  params: z.object({ content: z.string(), meta: z.record(z.string(), z.string()) }).passthrough(),
});
client.setNotificationHandler(ChannelNotification, (n) => {
  emit({ event: "notification", method: n.method, params: n.params });
});

try {
  await client.connect(transport);
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
