// Validates tool results against the outputSchema the server announces, as a client using the
// official TypeScript MCP SDK (@modelcontextprotocol/sdk, pinned in .ci/node/package.json) would:
// connects to `vault mcp` over stdio with Client + StdioClientTransport, takes each tool's
// outputSchema from tools/list, and holds every given result to it twice: with the validator the
// SDK client runs in callTool (its AjvJsonSchemaValidator, as the Client builds it by default)
// and with Ajv in strict mode, as tests/clients/node_client.mjs does. Run by
// tests/result_shapes.rs; not a test on its own.
//
// Usage: node validate_results.mjs CI_NODE_DIR VAULT_BIN VAULT_DIR [RESULTS_FILE]
//   RESULTS_FILE (or stdin when absent or "-") holds JSON lines {"tool", "structured", "label"?}.
//
// stdout: one line per failure ("FAIL label (tool): what"), then a JSON summary line
// {"summary": {"checked", "failed", "by_tool"}}. Exits 1 if any result fails, 2 on bad input.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [nodeDir, bin, vaultDir, resultsFile] = process.argv.slice(2);
if (!nodeDir || !bin || !vaultDir) {
  console.error("usage: validate_results.mjs CI_NODE_DIR VAULT_BIN VAULT_DIR [RESULTS_FILE]");
  process.exit(2);
}
// Resolve packages from .ci/node (this file lives outside it), through their public exports.
const require = createRequire(path.join(path.resolve(nodeDir), "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { AjvJsonSchemaValidator } = require("@modelcontextprotocol/sdk/validation/ajv");
const Ajv = require("ajv");

const timer = setTimeout(() => {
  console.error("validate_results: timed out after 60 s");
  process.exit(3);
}, 60_000);

const input = fs.readFileSync(resultsFile && resultsFile !== "-" ? resultsFile : 0, "utf8");
const results = [];
for (const [n, line] of input.split("\n").entries()) {
  if (line.trim() === "") continue;
  let r;
  try {
    r = JSON.parse(line);
  } catch (e) {
    console.error(`validate_results: line ${n + 1} is not JSON (${e.message}): ${line}`);
    process.exit(2);
  }
  if (typeof r.tool !== "string" || typeof r.structured !== "object" || r.structured === null) {
    console.error(`validate_results: line ${n + 1} lacks "tool" or an object "structured": ${line}`);
    process.exit(2);
  }
  results.push({ label: r.label ?? `line ${n + 1}`, tool: r.tool, structured: r.structured });
}

// The SDK's validator, as the Client builds it when given none; the client uses it too.
const sdkValidator = new AjvJsonSchemaValidator();
const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp"],
  env: { VAULT_DIR: vaultDir, VAULT_KEYRING: "kernel" },
  stderr: "inherit",
});
const client = new Client(
  { name: "agent-vault-result-shapes", version: "1.0.0" },
  { jsonSchemaValidator: sdkValidator },
);
await client.connect(transport);
const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  tools.push(...page.tools);
  cursor = page.nextCursor;
} while (cursor);
await client.close();

const strict = new Ajv({ allErrors: true, strict: true });
const validators = {};
for (const tool of tools) {
  if (!tool.outputSchema) continue;
  const compiled = strict.compile(tool.outputSchema);
  validators[tool.name] = {
    sdk: sdkValidator.getValidator(tool.outputSchema),
    strict: (v) => (compiled(v) ? null : strict.errorsText(compiled.errors)),
  };
}

let failed = 0;
const byTool = {};
for (const r of results) {
  byTool[r.tool] = (byTool[r.tool] ?? 0) + 1;
  const v = validators[r.tool];
  const problems = [];
  if (!v) {
    problems.push("the server lists no outputSchema for this tool");
  } else {
    const sdk = v.sdk(r.structured);
    if (!sdk.valid) problems.push(`SDK client validator: ${sdk.errorMessage}`);
    const strictError = v.strict(r.structured);
    if (strictError) problems.push(`strict Ajv: ${strictError}`);
  }
  if (problems.length > 0) {
    failed += 1;
    for (const p of problems) {
      process.stdout.write(`FAIL ${r.label} (${r.tool}): ${p}\n`);
    }
    process.stdout.write(`     structured: ${JSON.stringify(r.structured)}\n`);
  }
}

clearTimeout(timer);
process.stdout.write(
  JSON.stringify({ summary: { checked: results.length, failed, by_tool: byTool } }) + "\n",
);
process.exit(failed > 0 ? 1 : 0);
