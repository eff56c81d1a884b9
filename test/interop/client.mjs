// A third-party MCP client for the tests: the official TypeScript SDK,
// connecting over Streamable HTTP with a bearer token and running steps.
//
// Usage: node client.mjs URL TOKEN STEPS
// STEPS is a JSON array of {"list": true} or {"call": NAME, "arguments": {...}}.
// Prints one JSON object: the server's name and version, the protocol
// version, and each step's result (or its error message).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, steps] = process.argv.slice(2);
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "toolcatalog-ts-interop", version: "1.0.0" });
await client.connect(transport);
const out = { server: client.getServerVersion(), protocolVersion: transport.protocolVersion, results: [] };
for (const step of JSON.parse(steps)) {
  try {
    if (step.list) {
      out.results.push(await client.listTools());
    } else {
      out.results.push(await client.callTool({ name: step.call, arguments: step.arguments ?? {} }));
    }
  } catch (err) {
    out.results.push({ error: String(err?.message ?? err) });
  }
}
await client.close();
console.log(JSON.stringify(out));
