/**
 * The MCP server as a client sees it, in process (the SDK's in-memory
 * transport) against a stand-in for the REST API: every tool input is
 * described and every number bounded by the service's own rule, no internal
 * enum name is shown, and a finished PDF comes back as an embedded resource
 * or, past the embedding bound, as a link (issue 27, item 14).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LEASE_SECONDS, RECEIVE_MAX_MESSAGES } from "../../src/domain/message-rules.js";
import { TTL_SECONDS } from "../../src/domain/channels.js";
import { GROUP_CONCURRENCY, PRIORITY, PRIORITY_AGING_SECONDS } from "../../src/domain/dispatch-rules.js";
import { AgentbusApi } from "../../src/server/mcp/api.js";
import { createMcpServer, type McpServerOptions } from "../../src/server/mcp/server.js";
import { MCP_SERVICES } from "../../src/server/mcp/services.js";

/** An enum value as protobuf spells it (CHANNEL_MODE_CLAIMABLE), as a whole word. */
const ENUM_SHAPED = /\b[A-Z]+_[A-Z_]+\b/;

/** A tiny PDF-looking body: the server only passes the bytes on. */
const SMALL_PDF = Buffer.from("%PDF-1.4\n% a stand-in\n%%EOF\n");

let api: Server;
let apiUrl: string;
/** The requests the stand-in received with a JSON body: what a tool sent. */
const sent: Array<{ method: string; url: string; body: unknown }> = [];
beforeAll(async () => {
  // The REST routes get_job and the download call, as the service answers them.
  api = createServer(async (req, res) => {
    if (req.method === "POST") {
      let text = "";
      for await (const chunk of req) text += String(chunk);
      const body = JSON.parse(text) as Record<string, unknown>;
      sent.push({ method: req.method, url: req.url ?? "", body });
      const stored = /^\/v1\/channels\/[^/]+\/messages$/.test(req.url ?? "") ? { message: { id: "m1", ...body }, next_cursor: "c" } : { id: "ch1", ...body };
      res.writeHead(201, { "Content-Type": "application/json" });
      res.end(JSON.stringify(stored));
      return;
    }
    if (req.method === "GET" && /^\/v1\/channels\/[^/]+$/.test(req.url ?? "")) {
      res.writeHead(404, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ error: "channel_not_found", message: "No such channel" }));
      return;
    }
    const job = /^\/(?:v1\/)?jobs\/(\d+)$/.exec(req.url ?? "");
    if (job) {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ job_id: Number(job[1]), kind: "pdf", status: "completed", result: { url: `/v1/pdf/${job[1]}` }, error: null }));
      return;
    }
    const pdf = /^\/(?:api\/)?v1\/pdf\/(\d+)$/.exec(req.url ?? "");
    if (pdf) {
      // Job 9's file comes chunked, without a declared length.
      res.writeHead(200, { "Content-Type": "application/pdf", ...(pdf[1] === "9" ? {} : { "Content-Length": SMALL_PDF.byteLength }) });
      res.end(SMALL_PDF);
      return;
    }
    res.writeHead(404, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ error: "not_found", message: "No such route" }));
  });
  await new Promise<void>((resolve) => api.listen(0, "127.0.0.1", resolve));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => api.close(() => resolve())));

async function connect(options: McpServerOptions = {}): Promise<Client> {
  const { server } = createMcpServer(new AgentbusApi(MCP_SERVICES, () => apiUrl, "ak_test.secret"), options);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "unit", version: "1" });
  await client.connect(clientSide);
  return client;
}

/** Every property schema of a tool's input, nested ones (a receive's complete items) included, by path. */
function properties(schema: Record<string, unknown>, prefix = ""): Array<[string, Record<string, unknown>]> {
  const out: Array<[string, Record<string, unknown>]> = [];
  const props = (schema.properties ?? {}) as Record<string, Record<string, unknown>>;
  for (const [name, prop] of Object.entries(props)) {
    out.push([`${prefix}${name}`, prop]);
    const inner = prop.type === "array" ? (prop.items as Record<string, unknown> | undefined) : prop;
    if (inner?.type === "object") out.push(...properties(inner, `${prefix}${name}.`));
  }
  return out;
}

describe("tools/list", () => {
  let tools: Tool[];
  beforeAll(async () => {
    tools = (await (await connect()).listTools()).tools;
  });

  it("describes every input property of every tool, nested ones included", () => {
    const undescribed = tools.flatMap((tool) =>
      properties(tool.inputSchema).filter(([, prop]) => typeof prop.description !== "string" || prop.description.length < 10).map(([path]) => `${tool.name}.${path}`),
    );
    expect(undescribed).toEqual([]);
  });

  it("bounds every number with a range narrower than its protobuf type's", () => {
    const typeRange = (n: unknown) => typeof n !== "number" || Math.abs(n) >= 2 ** 31 - 1;
    const unbounded = tools.flatMap((tool) =>
      properties(tool.inputSchema)
        .map(([path, prop]) => [path, prop.type === "array" ? (prop.items as Record<string, unknown>) : prop] as const)
        .filter(([, prop]) => prop.type === "integer" || prop.type === "number")
        .filter(([path, prop]) => typeRange(prop.minimum) || (typeRange(prop.maximum) && !(path === "job_id" && prop.maximum === Number.MAX_SAFE_INTEGER)))
        .map(([path, prop]) => `${tool.name}.${path}: ${String(prop.minimum)}..${String(prop.maximum)}`),
    );
    expect(unbounded).toEqual([]);
  });

  it("takes each bound from the domain's rule", () => {
    const input = (tool: string, field: string) => tools.find((t) => t.name === tool)!.inputSchema.properties![field] as Record<string, unknown>;
    expect(input("receive_task", "max_messages")).toMatchObject({ minimum: RECEIVE_MAX_MESSAGES.min, maximum: RECEIVE_MAX_MESSAGES.max });
    expect(input("receive_task", "lease_seconds")).toMatchObject({ minimum: LEASE_SECONDS.min, maximum: LEASE_SECONDS.max });
    expect(input("heartbeat_lease", "lease_seconds")).toMatchObject({ minimum: LEASE_SECONDS.min, maximum: LEASE_SECONDS.max });
    expect(input("find_or_create_channel", "ttl_seconds")).toMatchObject({ minimum: TTL_SECONDS.min, maximum: TTL_SECONDS.max });
    expect(input("post_message", "delay_seconds")).toMatchObject({ minimum: 0, maximum: TTL_SECONDS.max });
    expect(input("read_messages", "wait")).toMatchObject({ minimum: 0, maximum: 300 });
    expect(input("read_messages", "limit")).toMatchObject({ minimum: 1, maximum: 100 });
    expect(input("post_message", "priority")).toMatchObject({ type: "integer", minimum: PRIORITY.min, maximum: PRIORITY.max });
    expect(input("post_message", "ttl_seconds")).toMatchObject({ type: "integer", minimum: 1, maximum: TTL_SECONDS.max });
    expect(input("post_message", "group_key")).toMatchObject({ type: "string" });
    expect(input("find_or_create_channel", "group_concurrency")).toMatchObject({ minimum: GROUP_CONCURRENCY.min, maximum: GROUP_CONCURRENCY.max });
    expect(input("find_or_create_channel", "priority_aging_seconds")).toMatchObject({ minimum: PRIORITY_AGING_SECONDS.min, maximum: PRIORITY_AGING_SECONDS.max });
    expect(input("find_or_create_channel", "dispatch")).toMatchObject({ enum: ["fifo", "fair"] });
    expect(input("find_or_create_channel", "limits")).toMatchObject({ type: "array", items: { type: "string" } });
  });

  it("describes post_message's ttl_seconds as the message's own expiry, not the channel's", () => {
    const ttl = tools.find((t) => t.name === "post_message")!.inputSchema.properties!.ttl_seconds as { description: string };
    expect(ttl.description).toMatch(/this message expires/);
    expect(ttl.description).not.toMatch(/used only when creating/);
  });

  it("shows enums by their REST names only, and no internal enum name anywhere", () => {
    const find = tools.find((t) => t.name === "find_or_create_channel")!;
    expect(find.inputSchema.properties!.mode).toMatchObject({ enum: ["broadcast", "claimable"] });
    expect(find.inputSchema.properties!.access).toMatchObject({ enum: ["open", "restricted"] });
    const shown = JSON.stringify(tools);
    expect(shown.match(new RegExp(ENUM_SHAPED, "g")) ?? []).toEqual([]);
  });
});

describe("a finished PDF job (get_job)", () => {
  const call = async (client: Client, name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult;

  it("embeds a PDF within the bound as an application/pdf resource, and makes result.url absolute", async () => {
    const client = await connect({ publicUrl: () => "https://bus.example" });
    const result = await call(client, "get_job", { job_id: 7 });
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    expect(result.structuredContent).toMatchObject({
      status: "completed",
      result: { url: "https://bus.example/v1/pdf/7" },
      pdf: { embedded: true, uri: "agentbus://jobs/7/pdf", size_bytes: SMALL_PDF.byteLength },
    });
    const embedded = result.content.find((c) => c.type === "resource");
    expect(embedded).toEqual({ type: "resource", resource: { uri: "agentbus://jobs/7/pdf", mimeType: "application/pdf", blob: SMALL_PDF.toString("base64") } });
    // The same file by its URI.
    const read = await client.readResource({ uri: "agentbus://jobs/7/pdf" });
    expect(read.contents).toEqual([{ uri: "agentbus://jobs/7/pdf", mimeType: "application/pdf", blob: SMALL_PDF.toString("base64") }]);
  });

  it("links a PDF past the bound with the absolute download URL instead of embedding it", async () => {
    const client = await connect({ publicUrl: () => "https://bus.example", maxEmbeddedBytes: SMALL_PDF.byteLength - 1 });
    const result = await call(client, "get_job", { job_id: 8 });
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    expect(result.content.some((c) => c.type === "resource")).toBe(false);
    expect(result.content.find((c) => c.type === "resource_link")).toMatchObject({
      type: "resource_link",
      uri: "https://bus.example/v1/pdf/8",
      name: "job-8.pdf",
      mimeType: "application/pdf",
      size: SMALL_PDF.byteLength,
    });
    expect(result.structuredContent).toMatchObject({ pdf: { embedded: false, download_url: "https://bus.example/v1/pdf/8", size_bytes: SMALL_PDF.byteLength } });
    await expect(client.readResource({ uri: "agentbus://jobs/8/pdf" })).rejects.toThrow(/https:\/\/bus\.example\/v1\/pdf\/8/);
  });

  it("stops reading a PDF of undeclared length at the bound and links it", async () => {
    const client = await connect({ publicUrl: () => "https://bus.example", maxEmbeddedBytes: SMALL_PDF.byteLength - 1 });
    const result = await call(client, "get_job", { job_id: 9 });
    expect(result.content.some((c) => c.type === "resource")).toBe(false);
    expect(result.structuredContent).toMatchObject({ pdf: { embedded: false, download_url: "https://bus.example/v1/pdf/9" } });
  });
});

describe("posting with a group, a priority and an expiry (post_message)", () => {
  const call = async (client: Client, name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult;

  it("sends group_key, priority and ttl_seconds to the create call as given", async () => {
    const client = await connect();
    sent.length = 0;
    const result = await call(client, "post_message", { identifier: "jobs", content: "review PR 7", group_key: "repo:agentbus", priority: 1, ttl_seconds: 600 });
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    expect(sent).toEqual([{ method: "POST", url: "/v1/channels/jobs/messages", body: { content: "review PR 7", group_key: "repo:agentbus", priority: 1, ttl_seconds: 600 } }]);
  });

  it("creates a channel with its group, dispatch, aging and limit settings (find_or_create_channel)", async () => {
    const client = await connect();
    sent.length = 0;
    const result = await call(client, "find_or_create_channel", { name: "repos", group_concurrency: 1, dispatch: "fair", priority_aging_seconds: 30, limits: ["openai"] });
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    expect(sent).toEqual([
      { method: "POST", url: "/v1/channels", body: { mode: "claimable", name: "repos", group_concurrency: 1, dispatch: "fair", priority_aging_seconds: 30, limits: ["openai"] } },
    ]);
  });
});
