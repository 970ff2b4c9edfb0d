/**
 * /mcp admits before anything exists (issue 26, F1, with F5 and F7 for MCP):
 * a string that is not a key gets 401 and no session, however many are
 * tried; every request is charged to its key's request budget (a tool call
 * once, not again for the REST call it makes); sessions count per key; a
 * revoked key's sessions end; and a tool call whose client went away
 * cancels its wait, so receive_task leases nothing to nobody.
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/eventually.js";
import { createChannel, postMessage, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, startTestServer, untilParked, type TestServer } from "../support/server.js";

const INITIALIZE = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "probe", version: "1" } } };

/** A raw POST /mcp, as an attacker sends it. */
const post = (server: TestServer, headers: Record<string, string>, body: unknown = INITIALIZE) =>
  fetch(new URL("/mcp", server.url), {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify(body),
  });

async function connect(server: TestServer, key: string): Promise<Client> {
  const client = new Client({ name: "hardening", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", server.url), { requestInit: { headers: { "X-API-Key": key } } }));
  return client;
}

describe("a key that is not a valid one", () => {
  let server: TestServer;
  let real: string;
  beforeAll(async () => {
    server = await startTestServer({ AGENTBUS_MCP_MAX_SESSIONS: "5" });
    real = await mintKey(server.url, "mcp-real");
  });
  afterAll(async () => server.close());

  it.each([
    ["a random X-API-Key", () => ({ "X-API-Key": randomBytes(16).toString("hex") })],
    ["a well-formed but unknown key", () => ({ "X-API-Key": `ak_${randomBytes(12).toString("base64url")}.${randomBytes(24).toString("base64url")}` })],
    ["a random Bearer token", () => ({ Authorization: `Bearer ${randomBytes(16).toString("hex")}` })],
  ])("with %s gets 401 unauthorized and no session id", async (_what, headers) => {
    const res = await post(server, headers());
    expect(res.status).toBe(401);
    expect(res.headers.get("mcp-session-id")).toBeNull();
    expect(await res.json()).toMatchObject({ error: "unauthorized" });
  });

  it("cannot fill the process's session cap: after 50 of them a real key still opens a session", async () => {
    const answers = await Promise.all(Array.from({ length: 50 }, () => post(server, { "X-API-Key": randomBytes(20).toString("hex") }).then((r) => r.status)));
    expect(new Set(answers)).toEqual(new Set([401]));
    const client = await connect(server, real);
    try {
      expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    } finally {
      await client.close();
    }
  });
});

describe("the request budget", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ AGENTBUS_RATE_LIMIT: "12" });
  });
  afterAll(async () => server.close());

  it("charges each MCP request to its key: past the limit tools/list is refused with 429", async () => {
    const key = await mintKey(server.url, "mcp-limited");
    const client = await connect(server, key);
    try {
      let refused: unknown;
      for (let i = 0; i < 20 && refused === undefined; i++) await client.listTools().catch((err: unknown) => (refused = err));
      expect(String(refused)).toMatch(/429|rate_limit_exceeded/);
    } finally {
      await client.close().catch(() => undefined);
    }
  });

  it("charges a tool call once, not again for the REST call the tool makes", async () => {
    const key = await mintKey(server.url, "mcp-once");
    const client = await connect(server, key);
    try {
      // initialize + initialized cost 2 of the 12; 8 tool calls are 8 more, 16 if each counted twice.
      for (let i = 0; i < 8; i++) {
        const result = (await client.callTool({ name: "list_my_channels", arguments: {} })) as CallToolResult;
        expect(result.isError, JSON.stringify(result.structuredContent)).toBeFalsy();
      }
    } finally {
      await client.close().catch(() => undefined);
    }
  });
});

describe("sessions", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ AGENTBUS_MCP_MAX_SESSIONS_PER_KEY: "2" });
  });
  afterAll(async () => server.close());

  it("are counted per key, whatever string the key is sent as", async () => {
    const key = await mintKey(server.url, "mcp-per-key");
    const other = await mintKey(server.url, "mcp-other");
    const opened = [await connect(server, key), await connect(server, key)];
    try {
      // The same key as a Bearer token is the same key.
      const third = await post(server, { Authorization: `Bearer ${key}` });
      expect(third.status).toBe(429);
      expect(await third.json()).toMatchObject({ error: "too_many_mcp_sessions" });
      const theirs = await connect(server, other);
      await theirs.close();
    } finally {
      for (const c of opened) await c.close();
    }
  });

  it("end when their key is revoked: the session's event stream closes and the session is gone", async () => {
    const key = await mintKey(server.url, "mcp-revoked");
    const init = await post(server, { "X-API-Key": key });
    expect(init.status).toBe(200);
    const sessionId = init.headers.get("mcp-session-id")!;
    await init.body?.cancel();
    const headers = { "X-API-Key": key, "Mcp-Session-Id": sessionId, "Mcp-Protocol-Version": "2025-06-18" };
    await post(server, headers, { jsonrpc: "2.0", method: "notifications/initialized" });
    // The session's own event stream (GET), held open by the server.
    const stream = await fetch(new URL("/mcp", server.url), { headers: { ...headers, Accept: "text/event-stream" }, signal: AbortSignal.timeout(15_000) });
    expect(stream.status).toBe(200);
    const ended = stream.body!.pipeTo(new WritableStream()).then(
      () => "closed",
      () => "closed",
    );
    const revokedAt = performance.now();
    expect((await rest(server.url, "DELETE", "/v1/keys/me", { key })).status).toBe(200);
    expect(await ended).toBe("closed");
    expect(performance.now() - revokedAt).toBeLessThan(5_000);
  });
});

describe("a tool call whose client goes away", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => server.close());

  it("stops a waiting receive_task: work posted after it is not leased to nobody", async () => {
    const key = await mintKey(server.url, "mcp-gone");
    const ch = await createChannel(server.url, key);
    const init = await post(server, { "X-API-Key": key });
    const sessionId = init.headers.get("mcp-session-id")!;
    await init.body?.cancel();
    const headers = { "X-API-Key": key, "Mcp-Session-Id": sessionId, "Mcp-Protocol-Version": "2025-06-18" };
    await post(server, headers, { jsonrpc: "2.0", method: "notifications/initialized" });
    // The session's own subscription (to its key's changes).
    const before = server.app.bus.subscriptions;

    // The tool call goes out on a connection of its own, which the client then drops.
    const url = new URL("/mcp", server.url);
    const call = http.request({ host: url.hostname, port: url.port, path: "/mcp", method: "POST", headers: { ...headers, "Content-Type": "application/json", Accept: "application/json, text/event-stream" } });
    call.on("error", () => undefined);
    call.end(JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "receive_task", arguments: { identifier: ch, wait: 20 } } }));
    await untilParked(server, before + 1);
    call.destroy();
    await eventually(async () => server.app.bus.subscriptions === before);

    const m = await postMessage(server.url, key, ch, { content: "after the agent left" });
    const got = await rest<{ data: ReceivedJson[] }>(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: {} });
    expect(got.body.data.map((r) => [r.message.id, r.message.delivery_count])).toEqual([[m.id, 1]]);
  });
});
