/**
 * MCP tasks (the 2025-11-25 revision, as the official SDK implements them;
 * docs/decisions.md#mcp): the long-running tools may be called as tasks with
 * the SDK's own client: answered at once with a task, worked until done,
 * polled with tasks/get, read with tasks/result, listed, cancelled; called
 * without `task` they answer as before.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.js";
import { createChannel, postMessage, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer();
let key: string;
const clients: Client[] = [];
beforeAll(async () => {
  key = await mintKey(server.url, "mcp-tasks");
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
});

async function connect(): Promise<Client> {
  const client = new Client({ name: "task-agent", version: "1.0.0" }, { capabilities: { tasks: {} } });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", server.url), { requestInit: { headers: { "X-API-Key": key } } }));
  clients.push(client);
  return client;
}

async function callAsTask(client: Client, name: string, args: Record<string, unknown>): Promise<string> {
  for await (const m of client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, { task: { ttl: 60_000 } })) {
    if (m.type === "taskCreated") return m.task.taskId;
    if (m.type === "error") throw m.error;
  }
  throw new Error("no task was created");
}

describe("MCP tasks", () => {
  it("marks the long-running tools as optional tasks and the rest not", async () => {
    const client = await connect();
    const { tools } = await client.listTools();
    const taskTools = tools.filter((t) => t.execution?.taskSupport === "optional").map((t) => t.name).sort();
    expect(taskTools).toEqual(["receive_task", "submit_job_posting_parse", "submit_pdf_job", "submit_transcript_job", "wait_for_result"]);
  });

  it("runs wait_for_result as a task that completes once a worker acknowledges, however long after", async () => {
    const client = await connect();
    const ch = await createChannel(server.url, key);
    const m = await postMessage(server.url, key, ch, { content: "long job" });
    const taskId = await callAsTask(client, "wait_for_result", { message_id: m.id });
    expect((await client.experimental.tasks.getTask(taskId)).status).toBe("working");
    const got = await rest<{ data: ReceivedJson[] }>(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { lease_seconds: 60 } });
    await rest(server.url, "POST", `/v1/messages/${m.id}/ack`, { key, body: { lease_token: got.body.data[0]!.lease_token, result: "finished" } });
    await eventually(async () => (await client.experimental.tasks.getTask(taskId)).status === "completed", 10_000);
    const result = (await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)) as CallToolResult;
    expect(result.structuredContent).toMatchObject({ id: m.id, state: "acknowledged", result: "finished" });
  });

  it("runs receive_task as a task that completes when a task arrives", async () => {
    const client = await connect();
    const ch = await createChannel(server.url, key);
    const taskId = await callAsTask(client, "receive_task", { identifier: ch, lease_seconds: 30 });
    await new Promise((r) => setTimeout(r, 300));
    expect((await client.experimental.tasks.getTask(taskId)).status).toBe("working");
    const m = await postMessage(server.url, key, ch, { content: "arrives later" });
    await eventually(async () => (await client.experimental.tasks.getTask(taskId)).status === "completed", 40_000);
    const result = (await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)) as CallToolResult;
    expect((result.structuredContent as { data: ReceivedJson[] }).data[0]?.message.id).toBe(m.id);
  }, 60_000);

  it("lists the session's tasks and cancels one, whose work stops", async () => {
    const client = await connect();
    const ch = await createChannel(server.url, key);
    const m = await postMessage(server.url, key, ch, { content: "never done" });
    const taskId = await callAsTask(client, "wait_for_result", { message_id: m.id });
    expect((await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toContain(taskId);
    await client.experimental.tasks.cancelTask(taskId);
    expect((await client.experimental.tasks.getTask(taskId)).status).toBe("cancelled");
  });

  it("keeps answering a plain call of the same tool at once", async () => {
    const client = await connect();
    const ch = await createChannel(server.url, key);
    const m = await postMessage(server.url, key, ch, { content: "plain" });
    const result = (await client.callTool({ name: "wait_for_result", arguments: { message_id: m.id } })) as CallToolResult;
    expect(result.structuredContent).toMatchObject({ id: m.id, state: "ready" });
  });

  it("refuses a task of a tool that is not one", async () => {
    const client = await connect();
    await expect(callAsTask(client, "whoami", {})).rejects.toThrow(/not run as a task/);
  });
});

describe("MCP without a session", () => {
  const post = (body: unknown, headers: Record<string, string> = {}) =>
    fetch(new URL("/mcp", server.url), {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", "X-API-Key": key, ...headers },
      body: JSON.stringify(body),
    });

  it("answers a single tool call sent with no initialize and no session", async () => {
    const res = await post({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "whoami", arguments: {} } });
    expect(res.status).toBe(200);
    expect(res.headers.get("mcp-session-id")).toBeNull();
    const body = (await res.json()) as { id: number; result: { structuredContent: { agent_label: string } } };
    expect(body).toMatchObject({ id: 1, result: { structuredContent: { agent_label: "mcp-tasks" } } });
  });

  it("lists the tools, without task hints (a task needs a session)", async () => {
    const res = await post({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} });
    const body = (await res.json()) as { result: { tools: Array<{ name: string; execution?: unknown }> } };
    expect(body.result.tools.length).toBeGreaterThan(20);
    expect(body.result.tools.every((t) => t.execution === undefined)).toBe(true);
  });

  it("answers a body that is not JSON with a JSON-RPC parse error", async () => {
    const res = await fetch(new URL("/mcp", server.url), { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", "X-API-Key": key }, body: "{nope" });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32700);
  });

  it("still needs a key", async () => {
    const res = await post({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "whoami", arguments: {} } }, { "X-API-Key": "" });
    expect(res.status).toBe(401);
  });
});
