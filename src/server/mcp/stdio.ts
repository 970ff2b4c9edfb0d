/**
 * `agentbus mcp`: the MCP server on stdin/stdout for a local MCP client,
 * talking to a running service (AGENTBUS_URL, default http://127.0.0.1:8080)
 * with AGENTBUS_API_KEY. Nothing but protocol goes to stdout.
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { AgentbusApi } from "./api.js";
import { createMcpServer } from "./server.js";
import { MCP_SERVICES } from "./services.js";

export const DEFAULT_SERVICE_URL = "http://127.0.0.1:8080";

export async function serveMcpStdio(env: NodeJS.ProcessEnv): Promise<void> {
  const url = env.AGENTBUS_URL?.trim() || DEFAULT_SERVICE_URL;
  const key = env.AGENTBUS_API_KEY?.trim() || undefined;
  if (key === undefined) process.stderr.write("agentbus mcp: AGENTBUS_API_KEY is not set; every tool but the public ones will answer unauthenticated\n");
  const { server, stop } = createMcpServer(new AgentbusApi(MCP_SERVICES, () => url, key));
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = resolve;
  });
  await server.connect(transport);
  // The client closing stdin ends the session.
  process.stdin.once("end", () => void server.close());
  await closed;
  stop();
}
