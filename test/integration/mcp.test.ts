/**
 * The MCP server, driven by the SDK's own Client over Streamable HTTP (/mcp
 * on the service's port) and over stdio (`agentbus mcp` against the running
 * service): the tool list, a two-agent hand-off with MCP tools only, tool
 * errors in the catalog's shape, the API's rights holding through MCP, a
 * resource subscription notified when a message is posted, and what an agent
 * reads: REST spellings only, and suggestions that name tools, not routes.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChannel } from "../support/fixtures.js";
import { mintKey, rest, startTestServer, useTestServer } from "../support/server.js";

const server = useTestServer();
const clients: Client[] = [];
let alice: string;
let bob: string;

beforeAll(async () => {
  alice = await mintKey(server.url, "alice");
  bob = await mintKey(server.url, "bob");
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
});

async function httpClient(key: string): Promise<Client> {
  const client = new Client({ name: "test-agent", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", server.url), { requestInit: { headers: { "X-API-Key": key } } }));
  clients.push(client);
  return client;
}

async function stdioClient(key: string): Promise<Client> {
  const client = new Client({ name: "test-agent", version: "1.0.0" });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--import", "tsx", "src/cli.ts", "mcp"],
    env: { PATH: process.env.PATH ?? "", AGENTBUS_URL: server.url, AGENTBUS_API_KEY: key },
    stderr: "pipe",
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

type Structured = Record<string, unknown> & { data?: Array<Record<string, unknown>> };

async function tool(client: Client, name: string, args: Record<string, unknown>): Promise<Structured> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(result.isError, JSON.stringify(result.structuredContent)).toBeFalsy();
  return result.structuredContent as Structured;
}

async function toolError(client: Client, name: string, args: Record<string, unknown>): Promise<{ error: string; message: string; suggestion?: string }> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(result.isError).toBe(true);
  return result.structuredContent as { error: string; message: string; suggestion?: string };
}

/** Agent A posts a task and waits for its result; agent B receives it and completes it: MCP tools only. */
async function handOff(a: Client, b: Client, name: string): Promise<void> {
  const { channel, created } = (await tool(a, "find_or_create_channel", { name })) as { channel: { id: string }; created: boolean };
  expect(created).toBe(true);
  expect(((await tool(a, "find_or_create_channel", { name })) as { created: boolean }).created).toBe(false);
  expect(((await tool(a, "list_my_channels", {})).data ?? []).map((c) => c.id)).toContain(channel.id);
  const posted = (await tool(a, "post_message", { identifier: name, content: "What is 6 × 7?" })) as { message: { id: string } };
  const waiting = tool(a, "wait_for_result", { message_id: posted.message.id, wait: 10 });
  const received = await tool(b, "receive_task", { identifier: channel.id, wait: 5 });
  const [task] = received.data as Array<{ message: { id: string; content: string }; lease_token: string }>;
  expect(task!.message).toMatchObject({ id: posted.message.id, content: "What is 6 × 7?" });
  expect(task!.lease_token).toMatch(/^lease_/);
  expect(await tool(b, "complete_task", { message_id: task!.message.id, result: "42" })).toMatchObject({ status: "acknowledged" });
  expect(await waiting).toMatchObject({ id: posted.message.id, result: "42", state: "acknowledged", acknowledged_by: [{ name: "bob" }] });
}

describe("MCP over Streamable HTTP (/mcp)", () => {
  it("lists the workflow's tools, each with a JSON Schema generated from its request message", async () => {
    const client = await httpClient(alice);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const name of ["find_or_create_channel", "list_my_channels", "post_message", "read_messages", "receive_task", "complete_task", "release_task", "heartbeat_lease", "report_progress", "cancel_task", "wait_for_result", "create_waitpoint", "get_waitpoint", "list_waitpoints", "complete_waitpoint", "follow_channel", "create_invitation", "resolve_invitation", "request_access", "submit_pdf_job", "submit_job_posting_parse", "submit_transcript_job", "get_job"]) {
      expect(names).toContain(name);
    }
    const post = tools.find((t) => t.name === "post_message")!;
    expect(post.inputSchema).toMatchObject({ type: "object", required: ["identifier", "content"], properties: { identifier: { type: "string" }, metadata: { type: "object" }, delay_seconds: { type: "number" } } });
    const receive = tools.find((t) => t.name === "receive_task")!;
    expect(receive.inputSchema.properties?.complete).toMatchObject({ type: "array", items: { type: "object", properties: { message_id: { type: "string" }, result: { type: "string" } } } });
    expect(receive.description).toMatch(/lease/);
  });

  it("hands a task from one agent to another and back with its result", async () => {
    await handOff(await httpClient(alice), await httpClient(bob), `mcp-http-${Date.now()}`);
  });

  it("lets the poster cancel a task a worker holds: the worker's heartbeat says so, and the task is not handed out again", async () => {
    const [a, b] = [await httpClient(alice), await httpClient(bob)];
    const name = `mcp-cancel-${Date.now()}`;
    const { channel } = (await tool(a, "find_or_create_channel", { name })) as { channel: { id: string } };
    const posted = (await tool(a, "post_message", { identifier: name, content: "Summarise the 400-page report" })) as { message: { id: string } };
    const [task] = (await tool(b, "receive_task", { identifier: channel.id, lease_seconds: 60 })).data as Array<{ lease_token: string }>;
    expect(await tool(a, "cancel_task", { message_id: posted.message.id, reason: "the user left" })).toMatchObject({
      message: { state: "in_flight", cancel_requested: true, cancel_reason: "the user left" },
    });
    expect(await tool(b, "heartbeat_lease", { lease_token: task!.lease_token, lease_seconds: 60 })).toMatchObject({ cancel_requested: true });
    await tool(b, "release_task", { message_id: posted.message.id });
    expect(await tool(a, "wait_for_result", { message_id: posted.message.id, wait: 5 })).toMatchObject({ state: "cancelled" });
    expect((await tool(b, "receive_task", { identifier: channel.id })).data).toEqual([]);
    expect(await toolError(a, "cancel_task", { message_id: posted.message.id })).toMatchObject({ error: "already_finished" });
  });

  it("lets a worker report progress that the poster's wait_for_result with progress_after answers with", async () => {
    const [a, b] = [await httpClient(alice), await httpClient(bob)];
    const { channel } = (await tool(a, "find_or_create_channel", { name: `mcp-progress-${Date.now()}` })) as { channel: { id: string } };
    const posted = (await tool(a, "post_message", { identifier: channel.id, content: "Translate the manual" })) as { message: { id: string } };
    const [task] = (await tool(b, "receive_task", { identifier: channel.id })).data as Array<{ lease_token: string }>;
    const first = (await tool(b, "report_progress", { message_id: posted.message.id, lease_token: task!.lease_token, data: { chapter: 1 }, text: "chapter 1 done" })) as {
      message: { progress: { updated_at: string } };
    };
    const waiting = tool(a, "wait_for_result", { message_id: posted.message.id, wait: 10, progress_after: first.message.progress.updated_at });
    await tool(b, "report_progress", { message_id: posted.message.id, lease_token: task!.lease_token, data: { chapter: 2 }, text: "\nchapter 2 done", append: true });
    expect(await waiting).toMatchObject({ state: "in_flight", progress: { data: { chapter: 2 }, text: "chapter 1 done\nchapter 2 done" } });
  });

  it("lets a worker park a task on a waitpoint that a person completes by its URL, with no key; the task comes back with the answer", async () => {
    const [a, b] = [await httpClient(alice), await httpClient(bob)];
    const { channel } = (await tool(a, "find_or_create_channel", { name: `mcp-waitpoint-${Date.now()}` })) as { channel: { id: string } };
    const posted = (await tool(a, "post_message", { identifier: channel.id, content: "Buy 40 GPU hours" })) as { message: { id: string } };
    await tool(b, "receive_task", { identifier: channel.id });
    const w = (await tool(b, "create_waitpoint", { timeout_seconds: 600, description: "Approve 40 GPU hours?" })) as { id: string; complete_url: string; state: string };
    expect(w.state).toBe("waiting");
    expect(await tool(b, "release_task", { message_id: posted.message.id, until_waitpoint: w.id })).toMatchObject({ message: { state: "waiting" } });
    expect(((await tool(b, "list_waitpoints", { state: "waiting" })).data as Array<{ id: string }>).map((x) => x.id)).toContain(w.id);
    const approved = await fetch(w.complete_url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ data: { approved: true } }) });
    expect(approved.status).toBe(200);
    const [back] = (await tool(b, "receive_task", { identifier: channel.id })).data as Array<{ message: { waitpoint: unknown } }>;
    expect(back!.message.waitpoint).toMatchObject({ id: w.id, data: { approved: true }, timed_out: false });
    expect(await toolError(b, "complete_waitpoint", { id: w.id, data: { approved: false } })).toMatchObject({ error: "waitpoint_already_completed" });
    expect(await tool(b, "get_waitpoint", { id: w.id })).toMatchObject({ state: "completed", data: { approved: true } });
  });

  it("posts a task that waits for another (depends_on), which receive_task hands out with its parent's result", async () => {
    const [a, b] = [await httpClient(alice), await httpClient(bob)];
    const { channel } = (await tool(a, "find_or_create_channel", { name: `mcp-deps-${Date.now()}` })) as { channel: { id: string } };
    const first = (await tool(a, "post_message", { identifier: channel.id, content: "Draft the outline" })) as { message: { id: string } };
    const second = (await tool(a, "post_message", { identifier: channel.id, content: "Write chapter 1", depends_on: [first.message.id] })) as {
      message: { id: string; state: string };
    };
    expect(second.message.state).toBe("blocked");
    const [task] = (await tool(b, "receive_task", { identifier: channel.id, max_messages: 5 })).data as Array<{ message: { id: string } }>;
    expect(task!.message.id).toBe(first.message.id);
    await tool(b, "complete_task", { message_id: first.message.id, result: "outline" });
    const [next] = (await tool(b, "receive_task", { identifier: channel.id })).data as Array<{ message: { id: string }; parents: unknown[] }>;
    expect(next).toMatchObject({ message: { id: second.message.id }, parents: [{ message_id: first.message.id, result: "outline" }] });
  });

  it("answers a refused call as a tool error with the catalog's code and suggestion", async () => {
    const client = await httpClient(bob);
    const err = await toolError(client, "receive_task", { identifier: "no-such-channel" });
    expect(err).toMatchObject({ error: "channel_not_found", message: "Channel 'no-such-channel' not found" });
    expect(err.suggestion).toEqual(expect.any(String));
  });

  it("acts with exactly the rights of its key: a stranger cannot read a restricted channel", async () => {
    const restricted = await createChannel(server.url, alice, { access: "restricted" });
    const stranger = await httpClient(bob);
    expect((await toolError(stranger, "read_messages", { identifier: restricted, since: "0" })).error).toBe("channel_access_denied");
    const owner = await httpClient(alice);
    expect(await tool(owner, "read_messages", { identifier: restricted, since: "0" })).toMatchObject({ data: [] });
  });

  it("holds a scoped key to its scopes: a read-only key reads but cannot post (insufficient_scope)", async () => {
    const channel = await createChannel(server.url, alice, {});
    const reader = await mintKey(server.url, `reader-${Date.now()}`);
    expect((await rest(server.url, "PUT", "/v1/keys/me/scopes", { key: reader, body: { scopes: ["messages:read", "channels:read"] } })).status).toBe(200);
    const client = await httpClient(reader);
    expect(await tool(client, "read_messages", { identifier: channel, since: "0" })).toMatchObject({ data: [] });
    const err = await toolError(client, "post_message", { identifier: channel, content: "not allowed" });
    expect(err).toMatchObject({ error: "insufficient_scope" });
    expect(err.suggestion).toEqual(expect.any(String));
  });

  it("notifies a subscriber of a channel's messages when one is posted", async () => {
    const reader = await httpClient(alice);
    const writer = await httpClient(bob);
    const ch = await createChannel(server.url, alice, { mode: "broadcast" });
    const uri = `agentbus://channels/${ch}/messages`;
    const updated = new Promise<string>((resolve) => reader.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => resolve(n.params.uri)));
    await reader.subscribeResource({ uri });
    await tool(writer, "post_message", { identifier: ch, content: "news" });
    expect(await updated).toBe(uri);
    const read = await reader.readResource({ uri });
    expect(JSON.parse((read.contents[0] as { text: string }).text)).toMatchObject({ data: [{ content: "news" }] });
  });

  it("refuses /mcp without an API key (401) and another key's session (404)", async () => {
    const initialize = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } };
    const post = (headers: Record<string, string>) =>
      fetch(new URL("/mcp", server.url), {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...headers },
        body: JSON.stringify(initialize),
      });
    const noKey = await post({});
    expect([noKey.status, ((await noKey.json()) as { error: string }).error]).toEqual([401, "unauthorized"]);
    const opened = await post({ Authorization: `Bearer ${alice}` });
    expect(opened.status).toBe(200);
    const sessionId = opened.headers.get("mcp-session-id")!;
    await opened.body?.cancel();
    const hijack = await fetch(new URL("/mcp", server.url), {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", "X-API-Key": bob, "Mcp-Session-Id": sessionId },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    expect([hijack.status, ((await hijack.json()) as { error: string }).error]).toEqual([404, "mcp_session_not_found"]);
  });
});

/** An enum value as protobuf spells it (CHANNEL_MODE_CLAIMABLE), as a whole word: internal, never for an agent. */
const ENUM_SHAPED = /\b[A-Z]+_[A-Z_]+\b/;

/** Every string in a tool answer (keys too): its text blocks and its structured content. */
function stringsOf(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(stringsOf);
  if (typeof value === "object" && value !== null) return Object.entries(value).flatMap(([k, v]) => [k, ...stringsOf(v)]);
  return [];
}

describe("what an agent sees over MCP (issue 27, item 14)", () => {
  it("answers a whole session (create, post, receive, complete, list) in REST spellings, never an internal enum name", async () => {
    const owner = await httpClient(alice);
    const answers: CallToolResult[] = [];
    const call = async (name: string, args: Record<string, unknown>) => {
      const result = (await owner.callTool({ name, arguments: args })) as CallToolResult;
      answers.push(result);
      return result.structuredContent as Structured;
    };
    const name = `agent-view-${Date.now()}`;
    const { channel } = (await call("find_or_create_channel", { name, mode: "claimable", access: "restricted" })) as { channel: Record<string, unknown> };
    expect(channel).toMatchObject({ mode: "claimable", access: "restricted" });
    await call("get_channel", { identifier: name });
    const posted = (await call("post_message", { identifier: name, content: "summarise the report", metadata: { priority: "high" } })) as { message: { id: string } };
    await call("read_messages", { identifier: name, since: "0", status: "unclaimed" });
    const received = (await call("receive_task", { identifier: name, max_messages: 1, lease_seconds: 60 })) as { data: Array<{ lease_token: string }> };
    await call("heartbeat_lease", { lease_token: received.data[0]!.lease_token, lease_seconds: 120 });
    expect(await call("complete_task", { message_id: posted.message.id, result: "done" })).toMatchObject({ status: "acknowledged" });
    await call("wait_for_result", { message_id: posted.message.id });
    await call("channel_stats", { identifier: name });
    await call("list_my_channels", { limit: 10 });
    await call("discover_channels", {});
    await call("whoami", {});
    await call("create_invitation", { identifier: name });
    await call("receive_task", { identifier: "no-such-channel" });
    expect(answers.at(-1)!.isError).toBe(true);

    const enumShaped = answers.flatMap((a) => stringsOf([a.content, a.structuredContent])).filter((text) => ENUM_SHAPED.test(text));
    expect(enumShaped).toEqual([]);
    const { tools } = await owner.listTools();
    expect(stringsOf(tools).filter((text) => ENUM_SHAPED.test(text))).toEqual([]);
  });

  it("tells a refused call which tool (and argument) to use instead of a REST route", async () => {
    const stranger = await httpClient(bob);
    const missing = await toolError(stranger, "receive_task", { identifier: "no-such-channel" });
    expect(missing).toMatchObject({ error: "channel_not_found", suggestion: expect.stringContaining("list_my_channels") });
    const lease = await toolError(stranger, "heartbeat_lease", { lease_token: "lease_nonesuch" });
    expect(lease).toMatchObject({ error: "lease_expired", suggestion: expect.stringContaining("receive_task (identifier)") });
    const restricted = await createChannel(server.url, alice, { access: "restricted" });
    const denied = await toolError(stranger, "read_messages", { identifier: restricted, since: "0" });
    expect(denied).toMatchObject({ error: "channel_access_denied", suggestion: expect.stringContaining("request_access (identifier, reason)") });
    for (const err of [missing, lease, denied]) expect(err.suggestion).not.toMatch(/\/v1\/|\b(GET|POST|PUT|PATCH|DELETE)\b|X-API-Key|Idempotency-Key/);
  });
});

describe("groups, priorities and per-message expiry over MCP (issue 28)", () => {
  it("creates a channel with its group settings, posts with group_key, priority and ttl_seconds, and receive_task hands out the most urgent first", async () => {
    const client = await httpClient(alice);
    const name = `mcp-groups-${Date.now()}`;
    const { channel } = (await tool(client, "find_or_create_channel", { name, group_concurrency: 1, dispatch: "fair", priority_aging_seconds: 60 })) as {
      channel: Record<string, unknown>;
    };
    expect(channel).toMatchObject({ group_concurrency: 1, dispatch: "fair", priority_aging_seconds: 60 });
    const later = (await tool(client, "post_message", { identifier: name, content: "batch", group_key: "batch", priority: 5 })) as { message: Record<string, unknown> };
    const urgent = (await tool(client, "post_message", { identifier: name, content: "interactive", group_key: "chat-7", priority: 1, ttl_seconds: 600 })) as {
      message: { id: string; created_at: string; expires_at: string } & Record<string, unknown>;
    };
    expect(later.message).toMatchObject({ group_key: "batch", priority: 5 });
    expect(urgent.message).toMatchObject({ group_key: "chat-7", priority: 1 });
    expect(Date.parse(urgent.message.expires_at) - Date.parse(urgent.message.created_at)).toBe(600_000);
    const received = await tool(client, "receive_task", { identifier: name });
    expect((received.data as Array<{ message: { id: string } }>).map((d) => d.message.id)).toEqual([urgent.message.id]);
    const stats = await tool(client, "channel_stats", { identifier: name });
    expect(stats).toMatchObject({ ready_by_priority: { "1": 0, "5": 1 }, groups: { count: 2, in_flight: 1 } });
    const refused = await toolError(client, "post_message", { identifier: name, content: "x", priority: 9 });
    expect(refused.error).toBe("invalid_priority");
  });
});

describe("MCP origin check", () => {
  it("refuses a request from an Origin that is not allowed (403 origin_not_allowed) and serves an allowed one", async () => {
    const strict = await startTestServer({ AGENTBUS_CORS_ORIGINS: "https://app.example" });
    try {
      const key = await mintKey(strict.url);
      const post = (origin: string) =>
        fetch(new URL("/mcp", strict.url), {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", "X-API-Key": key, Origin: origin },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } }),
        });
      const foreign = await post("https://evil.example");
      expect([foreign.status, ((await foreign.json()) as { error: string }).error]).toEqual([403, "origin_not_allowed"]);
      const allowed = await post("https://app.example");
      expect(allowed.status).toBe(200);
      await allowed.body?.cancel();
    } finally {
      await strict.close();
    }
  });
});

describe("MCP session limits", () => {
  const initialize = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } };
  const open = async (base: string, key: string) => {
    const res = await fetch(new URL("/mcp", base), {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", "X-API-Key": key },
      body: JSON.stringify(initialize),
    });
    const sessionId = res.headers.get("mcp-session-id");
    const body = res.status === 200 ? (await res.body?.cancel(), undefined) : ((await res.json()) as { error: string });
    return { status: res.status, sessionId, body };
  };
  const listTools = (base: string, key: string, sessionId: string) =>
    fetch(new URL("/mcp", base), {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", "X-API-Key": key, "Mcp-Session-Id": sessionId, "Mcp-Protocol-Version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });

  it("refuses a key's session beyond its share (429 too_many_mcp_sessions), ends a deleted one, and closes idle ones", async () => {
    const limited = await startTestServer({ AGENTBUS_MCP_MAX_SESSIONS_PER_KEY: "2", AGENTBUS_MCP_SESSION_IDLE_SECONDS: "1" });
    try {
      const [a, b] = [await mintKey(limited.url), await mintKey(limited.url)];
      const first = await open(limited.url, a);
      const second = await open(limited.url, a);
      expect([first.status, second.status]).toEqual([200, 200]);
      const third = await open(limited.url, a);
      expect([third.status, third.body?.error]).toEqual([429, "too_many_mcp_sessions"]);
      expect((await open(limited.url, b)).status).toBe(200);

      const deleted = await fetch(new URL("/mcp", limited.url), { method: "DELETE", headers: { "X-API-Key": a, "Mcp-Session-Id": first.sessionId! } });
      expect(deleted.status).toBe(200);
      expect((await listTools(limited.url, a, first.sessionId!)).status).toBe(404);
      // Its slot is free again.
      expect((await open(limited.url, a)).status).toBe(200);

      // Idle for longer than a second: closed by the sweep.
      await new Promise((r) => setTimeout(r, 2500));
      expect((await listTools(limited.url, a, second.sessionId!)).status).toBe(404);
    } finally {
      await limited.close();
    }
  }, 30_000);

  it("lets one session follow at most 16 channels (too_many_follows), and unfollow to make room", async () => {
    const client = await httpClient(alice);
    const channels = await Promise.all(Array.from({ length: 17 }, () => createChannel(server.url, alice, { mode: "broadcast" })));
    for (const ch of channels.slice(0, 16)) expect(await tool(client, "follow_channel", { identifier: ch })).toEqual({ uri: `agentbus://channels/${ch}/messages` });
    expect((await toolError(client, "follow_channel", { identifier: channels[16] })).error).toBe("too_many_follows");
    expect(await tool(client, "unfollow_channel", { identifier: channels[0] })).toEqual({ unfollowed: true });
    expect(await tool(client, "follow_channel", { identifier: channels[16] })).toMatchObject({ uri: expect.any(String) });
    expect((await client.listResources()).resources).toHaveLength(16);
  }, 30_000);
});

describe("MCP over stdio (agentbus mcp)", () => {
  it("hands a task from one agent to another and back with its result", async () => {
    await handOff(await stdioClient(alice), await stdioClient(bob), `mcp-stdio-${Date.now()}`);
  }, 30_000);

  it("lists the same tools as /mcp", async () => {
    const [viaStdio, viaHttp] = await Promise.all([stdioClient(alice).then((c) => c.listTools()), httpClient(alice).then((c) => c.listTools())]);
    expect(viaStdio.tools).toEqual(viaHttp.tools);
  }, 30_000);
});
