/**
 * W3C trace context on every way in and out (docs/decisions.md#trace-context):
 * a message keeps the traceparent and tracestate it was posted with, over
 * REST, gRPC, Connect, MCP (_meta) and A2A; one posted without gets a new
 * trace; receives, webhooks (as headers), dead letters and `agentbus work`
 * (TRACEPARENT in the command's environment) pass it on.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { WebhookReceiver } from "../fakes/webhook-receiver.js";
import { createChannel, type MessageJson, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";
import { spawnShell } from "../support/shell.js";

const PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const STATE = "congo=t61rcWkgMzE";

let server: TestServer;
let key: string;
let home: string;
const receivers: WebhookReceiver[] = [];
beforeAll(async () => {
  server = await startTestServer({ AGENTBUS_WORKERS: "true", AGENTBUS_ALLOW_PRIVATE_TARGETS: "true" });
  key = await mintKey(server.url, "tracer");
  home = await mkdtemp(path.join(tmpdir(), "agentbus-cli-trace-"));
});
afterAll(async () => {
  await server?.close();
  await Promise.all(receivers.map((r) => r.close()));
  await rm(home, { recursive: true, force: true });
});

type Traced = MessageJson & { trace: { traceparent: string; tracestate: string | null } | null };

const get = async (id: string) => (await rest<Traced>(server.url, "GET", `/v1/messages/${id}`, { key })).body;

async function postTraced(ch: string, headers: Record<string, string>, body: Record<string, unknown> = { content: "traced" }) {
  const res = await fetch(`${server.url}/v1/channels/${ch}/messages`, { method: "POST", headers: { "Content-Type": "application/json", "X-API-Key": key, ...headers }, body: JSON.stringify(body) });
  expect(res.status).toBe(201);
  return ((await res.json()) as { message: Traced }).message;
}

describe("a message's trace over REST", () => {
  it("keeps the traceparent and tracestate it was posted with", async () => {
    const ch = await createChannel(server.url, key);
    const m = await postTraced(ch, { traceparent: PARENT, tracestate: STATE });
    expect(m.trace).toEqual({ traceparent: PARENT, tracestate: STATE });
    expect((await get(m.id)).trace).toEqual({ traceparent: PARENT, tracestate: STATE });
  });

  it("starts a new trace for a message posted without one", async () => {
    const ch = await createChannel(server.url, key);
    const a = await postTraced(ch, {});
    const b = await postTraced(ch, {});
    expect(a.trace?.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(a.trace?.traceparent.slice(3, 35)).not.toBe(b.trace?.traceparent.slice(3, 35));
  });

  it("starts a new trace, and does not refuse the post, for a malformed traceparent", async () => {
    const ch = await createChannel(server.url, key);
    const m = await postTraced(ch, { traceparent: "garbage", tracestate: STATE });
    expect(m.trace?.traceparent).toMatch(/^00-[0-9a-f]{32}-/);
    expect(m.trace?.tracestate).toBeNull();
  });

  it("puts a batch posted without one in one new trace", async () => {
    const ch = await createChannel(server.url, key);
    const res = await rest<{ data: Traced[] }>(server.url, "POST", `/v1/channels/${ch}/messages:batchCreate`, { key, body: { messages: [{ content: "a" }, { content: "b" }] } });
    expect(res.status).toBe(201);
    expect(new Set(res.body.data.map((m) => m.trace?.traceparent)).size).toBe(1);
  });

  it("hands the trace to the worker that receives the message", async () => {
    const ch = await createChannel(server.url, key);
    await postTraced(ch, { traceparent: PARENT });
    const res = await rest<{ data: Array<ReceivedJson & { message: Traced }> }>(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { lease_seconds: 30 } });
    expect(res.body.data[0]?.message.trace?.traceparent).toBe(PARENT);
  });

  it("keeps it on the dead letter a failing message becomes", async () => {
    const dead = await createChannel(server.url, key);
    const ch = await createChannel(server.url, key, { max_deliveries: 1, dead_letter_channel: dead });
    const m = await postTraced(ch, { traceparent: PARENT });
    const got = await rest<{ data: ReceivedJson[] }>(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { lease_seconds: 30 } });
    expect(got.body.data[0]?.message.id).toBe(m.id);
    await rest(server.url, "POST", `/v1/messages/${m.id}/release`, { key, body: { lease_token: got.body.data[0]!.lease_token } });
    // The next receive moves it (docs/decisions.md#dead-letters).
    await rest(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { lease_seconds: 30 } });
    const letters = await rest<{ data: Traced[] }>(server.url, "GET", `/v1/channels/${dead}/messages?since=0`, { key });
    expect(letters.body.data.map((d) => d.trace?.traceparent)).toEqual([PARENT]);
  });
});

describe("a message's trace over gRPC and Connect", () => {
  it("is taken from gRPC metadata", async () => {
    const ch = await createChannel(server.url, key);
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    const { message } = await client.createMessage({ identifier: ch, content: "over grpc" }, { headers: { "x-api-key": key, traceparent: PARENT, tracestate: STATE } });
    expect(message?.trace).toMatchObject({ traceparent: PARENT, tracestate: STATE });
  });

  it("is taken from Connect's headers", async () => {
    const ch = await createChannel(server.url, key);
    const client = createClient(MessageService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }));
    const { message } = await client.createMessage({ identifier: ch, content: "over connect" }, { headers: { "x-api-key": key, traceparent: PARENT } });
    expect(message?.trace?.traceparent).toBe(PARENT);
  });
});

describe("a message's trace over MCP and A2A", () => {
  it("is taken from a tool call's _meta", async () => {
    const ch = await createChannel(server.url, key);
    const client = new Client({ name: "tracer", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", server.url), { requestInit: { headers: { "X-API-Key": key } } }));
    try {
      const result = (await client.callTool({ name: "post_message", arguments: { identifier: ch, content: "from mcp" }, _meta: { traceparent: PARENT, tracestate: STATE } })) as CallToolResult;
      const { message } = result.structuredContent as { message: Traced };
      expect(message.trace).toEqual({ traceparent: PARENT, tracestate: STATE });
    } finally {
      await client.close();
    }
  });

  it("is taken from an A2A call's headers", async () => {
    const ch = await createChannel(server.url, key, { a2a: { enabled: true } });
    const res = await fetch(`${server.url}/a2a/${ch}`, {
      method: "POST",
      headers: { "X-API-Key": key, "A2A-Version": "1.0", "Content-Type": "application/json", traceparent: PARENT },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { messageId: "t1", role: "ROLE_USER", parts: [{ text: "traced task" }] }, configuration: { returnImmediately: true } } }),
    });
    const { result } = (await res.json()) as { result: { task: { id: string } } };
    expect((await get(result.task.id)).trace?.traceparent).toBe(PARENT);
  });
});

describe("GET /v1/traces/{trace_id}/messages", () => {
  it("lists a trace's messages across channels, oldest first, those the caller may read", async () => {
    const trace = `00-${"ab".repeat(16)}-00f067aa0ba902b7-01`;
    const a = await createChannel(server.url, key);
    const b = await createChannel(server.url, key);
    const other = await mintKey(server.url, "trace-other");
    const hidden = await createChannel(server.url, other, { access: "restricted" });
    const first = await postTraced(a, { traceparent: trace }, { content: "plan" });
    const second = await postTraced(b, { traceparent: trace }, { content: "do" });
    const res = await fetch(`${server.url}/v1/channels/${hidden}/messages`, { method: "POST", headers: { "Content-Type": "application/json", "X-API-Key": other, traceparent: trace }, body: JSON.stringify({ content: "secret" }) });
    expect(res.status).toBe(201);
    const listed = await rest<{ data: Traced[] }>(server.url, "GET", `/v1/traces/${"ab".repeat(16)}/messages`, { key });
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((m) => m.id)).toEqual([first.id, second.id]);
    const theirs = await rest<{ data: Traced[] }>(server.url, "GET", `/v1/traces/${"AB".repeat(16)}/messages`, { key: other });
    expect(theirs.body.data.map((m) => m.content)).toEqual(["plan", "do", "secret"]);
  });

  it("is listed by agentbus trace, from a message's id", async () => {
    const trace = `00-${"cd".repeat(16)}-00f067aa0ba902b7-01`;
    const ch = await createChannel(server.url, key);
    const m = await postTraced(ch, { traceparent: trace }, { content: "from the shell" });
    const env = { HOME: home, AGENTBUS_URL: server.url, AGENTBUS_API_KEY: key, AGENTBUS_PROFILE: path.join(home, "profile.json") };
    const r = await spawnShell(["trace", m.id], { env }).done;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(`${m.id}  ${ch}  ready  from the shell`);
  });

  it("is listed by the MCP tool list_trace", async () => {
    const trace = `00-${"ef".repeat(16)}-00f067aa0ba902b7-01`;
    const ch = await createChannel(server.url, key);
    const m = await postTraced(ch, { traceparent: trace }, { content: "for mcp" });
    const client = new Client({ name: "tracer", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", server.url), { requestInit: { headers: { "X-API-Key": key } } }));
    try {
      const result = (await client.callTool({ name: "list_trace", arguments: { trace_id: "ef".repeat(16) } })) as CallToolResult;
      expect((result.structuredContent as { data: Traced[] }).data.map((x) => x.id)).toEqual([m.id]);
    } finally {
      await client.close();
    }
  });

  it("refuses anything but 32 hex digits with 422 invalid_trace_id", async () => {
    const res = await rest(server.url, "GET", "/v1/traces/not-a-trace/messages", { key });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_trace_id" });
  });
});

describe("a job's trace", () => {
  it("keeps the traceparent its submission carried", async () => {
    const res = await fetch(`${server.url}/v1/pdf/generate`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-API-Key": key, traceparent: PARENT, tracestate: STATE },
      body: JSON.stringify({ content: "<p>traced</p>" }),
    });
    expect(res.status).toBe(202);
    const { job_id } = (await res.json()) as { job_id: string };
    const job = await rest<{ trace: unknown }>(server.url, "GET", `/v1/jobs/${job_id}`, { key });
    expect(job.body.trace).toEqual({ traceparent: PARENT, tracestate: STATE });
  });
});

describe("a message's trace passed on", () => {
  it("reaches a webhook receiver as traceparent and tracestate headers", async () => {
    const hook = await WebhookReceiver.start();
    receivers.push(hook);
    const ch = await createChannel(server.url, key, { webhook_url: hook.url, mode: "broadcast" });
    await postTraced(ch, { traceparent: PARENT, tracestate: STATE });
    const [req] = await hook.waitFor(1);
    expect(req!.headers.traceparent).toBe(PARENT);
    expect(req!.headers.tracestate).toBe(STATE);
  });

  it("reaches `agentbus work`'s command as TRACEPARENT, and what the command posts stays in the trace", async () => {
    const ch = await createChannel(server.url, key);
    const next = await createChannel(server.url, key);
    await postTraced(ch, { traceparent: PARENT, tracestate: STATE });
    const env = { HOME: home, AGENTBUS_URL: server.url, AGENTBUS_API_KEY: key, AGENTBUS_PROFILE: path.join(home, "profile.json") };
    const script = `process.stdout.write(process.env.TRACEPARENT + " " + process.env.TRACESTATE)`;
    const r = await spawnShell(["work", ch, "--once", "--pass-key", "--", "node", "-e", script], { env }).done;
    expect(r.code, r.stderr).toBe(0);
    const [done] = (await rest<{ data: Traced[] }>(server.url, "GET", `/v1/channels/${ch}/messages?since=0`, { key })).body.data;
    expect(done?.result).toBe(`${PARENT} ${STATE}`);
    // A command that posts the next hand-off continues the trace.
    const sent = await spawnShell(["send", next, "follow-up"], { env: { ...env, TRACEPARENT: PARENT } }).done;
    expect(sent.code, sent.stderr).toBe(0);
    expect((await get(sent.stdout.trim())).trace?.traceparent).toBe(PARENT);
  });
});
