// Drives `vault mcp` with the official TypeScript MCP SDK (@modelcontextprotocol/sdk, pinned in
// .ci/node/package.json): Client + StdioClientTransport. Run by tests/mcp_clients.rs; not a test
// on its own.
//
// Usage: node node_client.mjs CI_NODE_DIR VAULT_BIN VAULT_DIR   (CI_NODE_DIR is .ci/node)
//
// Lists the tools, calls list_credentials (the SDK validates structuredContent against the tool's
// outputSchema; we validate again with ajv), http_request with wait_s 0 (pending with an
// action_id), get_action on it, and a call with an unknown argument (an isError result whose text
// starts with "Error:"). stdout gets one JSON line per result the client saw, then a summary
// line; the server's stderr is passed through to ours. Any failed check exits non-zero.
import { createRequire } from "node:module";
import path from "node:path";

const t0 = performance.now();
const [nodeDir, bin, vaultDir] = process.argv.slice(2);
// Resolve packages from .ci/node (this file lives outside it), through their public exports.
const require = createRequire(path.join(path.resolve(nodeDir), "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const Ajv = require("ajv");
const imported = performance.now();
const ms = (a, b) => Math.round((b - a) * 10) / 10;

function emit(kind, value) {
  process.stdout.write(JSON.stringify({ seen: kind, value }) + "\n");
}
function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const timer = setTimeout(() => {
  console.error("node client: timed out after 30 s");
  process.exit(3);
}, 30_000);

const timings = {};
const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp"],
  env: { VAULT_DIR: vaultDir, VAULT_KEYRING: "kernel" },
  stderr: "inherit",
});
const client = new Client({ name: "agent-vault-node-test", version: "1.0.0" });
let protocolVersion = null;
const setVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (v) => {
  protocolVersion = v;
  setVersion?.(v);
};
let t = performance.now();
await client.connect(transport);
timings.connect_ms = ms(t, performance.now());
const version = client.getServerVersion();
emit("initialize", { serverVersion: version, capabilities: client.getServerCapabilities() });
check(version.name === "agent-vault", `server: ${JSON.stringify(version)}`);

t = performance.now();
const listed = await client.listTools();
timings.list_tools_ms = ms(t, performance.now());
emit("tools/list", listed);
const tools = Object.fromEntries(listed.tools.map((x) => [x.name, x]));
check(
  JSON.stringify(Object.keys(tools).sort()) ===
    JSON.stringify(["cancel_action", "get_action", "http_request", "list_credentials", "list_recent_actions", "ssh_exec"]),
  `tool names: ${Object.keys(tools)}`,
);
const ajv = new Ajv({ allErrors: true, strict: true });
const validators = {};
for (const tool of listed.tools) {
  check(tool.outputSchema, `${tool.name} has no outputSchema`);
  validators[tool.name] = ajv.compile(tool.outputSchema);
}
function validate(name, structured) {
  const v = validators[name];
  check(v(structured), `${name} output: ${ajv.errorsText(v.errors)}`);
}

t = performance.now();
const creds = await client.callTool({ name: "list_credentials", arguments: {} });
timings.list_credentials_ms = ms(t, performance.now());
emit("list_credentials", creds);
check(!creds.isError, `list_credentials failed: ${JSON.stringify(creds)}`);
validate("list_credentials", creds.structuredContent);
check(
  JSON.stringify(creds.structuredContent.credentials.map((c) => c.name)) === '["api"]',
  `credentials: ${JSON.stringify(creds.structuredContent)}`,
);
check(
  JSON.stringify(JSON.parse(creds.content[0].text)) === JSON.stringify(creds.structuredContent),
  "the text block carries the same JSON as structuredContent",
);

const pending = await client.callTool({
  name: "http_request",
  arguments: { credential: "api", method: "GET", url: "https://api.example.com/v1/items", wait_s: 0 },
});
emit("http_request", pending);
check(!pending.isError, `http_request failed: ${JSON.stringify(pending)}`);
validate("http_request", pending.structuredContent);
check(pending.structuredContent.state === "pending", `state: ${pending.structuredContent.state}`);
const actionId = pending.structuredContent.action_id;
check(/^act_/.test(actionId), `action_id: ${actionId}`);

const got = await client.callTool({ name: "get_action", arguments: { action_id: actionId } });
emit("get_action", got);
check(!got.isError, `get_action failed: ${JSON.stringify(got)}`);
validate("get_action", got.structuredContent);
check(got.structuredContent.action_id === actionId, "get_action returns the same action");
check(got.structuredContent.state === "pending", `state: ${got.structuredContent.state}`);

const bad = await client.callTool({ name: "list_credentials", arguments: { bogus_argument: 1 } });
emit("unknown_argument", bad);
check(bad.isError === true, `unknown argument must be an isError result: ${JSON.stringify(bad)}`);
check(bad.content[0].text.startsWith("Error:"), `error text: ${bad.content[0].text}`);
check(bad.content[0].text.includes("bogus_argument"), "the error names the argument");
validate("list_credentials", bad.structuredContent);
check(bad.structuredContent.error.code === "invalid_argument", JSON.stringify(bad.structuredContent));

await client.close();
clearTimeout(timer);
const summary = {
  client: "node-sdk",
  protocol_version: protocolVersion,
  action_id: actionId,
  import_ms: ms(t0, imported),
  run_ms: ms(imported, performance.now()),
  ...timings,
};
process.stdout.write(JSON.stringify({ summary }) + "\n");
