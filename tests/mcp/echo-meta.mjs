// A minimal MCP server for tooljournal's tests (stdio), on the SDK pinned in package-lock.json:
// its one tool, `echo_meta`, answers with the `_meta` of the `tools/call` request it received,
// as JSON text. server-everything has no tool that shows a request's `_meta`.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const server = new Server(
  { name: "tooljournal-echo-meta", version: "1.0.0" },
  { capabilities: { tools: {} } },
);

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: "echo_meta",
      description: "Answers with the _meta of the tools/call request it received.",
      inputSchema: { type: "object", properties: {} },
    },
  ],
}));

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  if (request.params.name !== "echo_meta") {
    throw new Error(`no tool ${request.params.name}`);
  }
  const meta = request.params._meta ?? null;
  return { content: [{ type: "text", text: JSON.stringify(meta) }] };
});

await server.connect(new StdioServerTransport());
