/**
 * A channel's work forwarded to a remote A2A agent (docs/decisions.md#a2a-forward):
 * the forwarder, in a service with workers, sends each message to a stand-in
 * agent built on @a2a-js/sdk's server (127.0.0.1) and acknowledges it with
 * the agent's answer, or releases it with back-off so that max_deliveries
 * and the dead-letter channel apply.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeA2aAgent, text } from "../fakes/a2a-agent.js";
import { eventually } from "../support/eventually.js";
import { createChannel, type MessageJson } from "../support/fixtures.js";
import { mintKey, rest, startTestServer, testConfig, type TestServer } from "../support/server.js";
import { startWorker } from "../../src/app.js";
import { createLogger } from "../../src/platform/logger.js";

let server: TestServer;
let agent: FakeA2aAgent;
let owner: string;
let stranger: string;
beforeAll(async () => {
  server = await startTestServer({ AGENTBUS_WORKERS: "true", AGENTBUS_ALLOW_PRIVATE_TARGETS: "true" });
  agent = await FakeA2aAgent.start();
  [owner, stranger] = await Promise.all([mintKey(server.url, "fwd-owner"), mintKey(server.url, "fwd-stranger")]);
});
afterAll(async () => {
  await server?.close();
  await agent?.close();
});

type Traced = MessageJson & { state: string; trace: { traceparent: string } };

const forwarding = (extra: Record<string, unknown> = {}) =>
  createChannel(server.url, owner, { a2a_forward: { url: agent.url, auth_header: { name: "X-Agent-Token", value: "s3cret" } }, ...extra });

async function post(ch: string, content: string): Promise<Traced> {
  const res = await rest<{ message: Traced }>(server.url, "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content } });
  expect(res.status).toBe(201);
  return res.body.message;
}

const read = async (id: string) => (await rest<Traced>(server.url, "GET", `/v1/messages/${id}`, { key: owner })).body;

describe("the a2a_forward field", () => {
  it("shows the owner the URL and the header's name, never its value", async () => {
    const ch = await forwarding();
    const mine = await rest<{ a2a_forward: unknown }>(server.url, "GET", `/v1/channels/${ch}`, { key: owner });
    expect(mine.body.a2a_forward).toEqual({ url: agent.url, auth_header: { name: "X-Agent-Token", value: null } });
    expect(JSON.stringify(mine.body)).not.toContain("s3cret");
  });

  it("is not shown to another key", async () => {
    const ch = await forwarding();
    const theirs = await rest<{ a2a_forward: unknown }>(server.url, "GET", `/v1/channels/${ch}`, { key: stranger });
    expect(theirs.body.a2a_forward ?? null).toBeNull();
  });

  it("refuses a reserved header name with 422 invalid_a2a_forward", async () => {
    const res = await rest(server.url, "POST", "/v1/channels", { key: owner, body: { name: "fwd-bad", mode: "claimable", a2a_forward: { url: agent.url, auth_header: { name: "Host", value: "x" } } } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_a2a_forward", field: "a2a_forward.auth_header.name" });
  });

  it("refuses a broadcast channel", async () => {
    const res = await rest(server.url, "POST", "/v1/channels", { key: owner, body: { name: "fwd-b", mode: "broadcast", a2a_forward: { url: agent.url } } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_a2a_forward" });
  });
});

describe("the forwarder", () => {
  it("sends a message to the agent and acknowledges it with the agent's answer", async () => {
    const ch = await forwarding();
    const m = await post(ch, "hello agent");
    const done = await eventually(async () => {
      const now = await read(m.id);
      return now.state === "acknowledged" ? now : undefined;
    }, 15_000);
    expect(done.result).toBe("DONE: hello agent");
    const seen = agent.messages.find((x) => x.messageId === m.id);
    expect(seen?.metadata).toMatchObject({ agentbus: { message_id: m.id, channel_id: ch } });
    // Every request carried the header, and the send carried the message's trace.
    const rpc = agent.requests.filter((r) => r.method === "POST");
    expect(rpc.length).toBeGreaterThan(0);
    expect(rpc.every((r) => r.headers["x-agent-token"] === "s3cret")).toBe(true);
    expect(rpc.some((r) => r.headers.traceparent === m.trace.traceparent)).toBe(true);
  });

  it("acknowledges with an answer of JSON data as its JSON", async () => {
    const ch = await forwarding();
    agent.answer = () => ({ complete: [{ content: { $case: "data", value: { score: 7 } }, metadata: undefined, filename: "", mediaType: "application/json" }] });
    try {
      const m = await post(ch, "score this");
      const done = await eventually(async () => ((await read(m.id)).state === "acknowledged" ? read(m.id) : undefined), 15_000);
      expect(JSON.parse(done.result ?? "null")).toEqual({ score: 7 });
    } finally {
      agent.answer = (msg) => ({ complete: [text(`DONE: ${msg.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("")}`)] });
    }
  });

  it("releases a message the agent fails with back-off, and dead-letters it after max_deliveries", async () => {
    const dead = await createChannel(server.url, owner);
    const ch = await forwarding({ max_deliveries: 1, dead_letter_channel: dead });
    agent.answer = () => ({ fail: "cannot do it" });
    try {
      const m = await post(ch, "impossible");
      // Released with a back-off of 5 s (its available_at), then moved by the next receive after it.
      const letters = await eventually(async () => {
        const page = await rest<{ data: MessageJson[] }>(server.url, "GET", `/v1/channels/${dead}/messages?since=0`, { key: owner });
        return page.body.data.length > 0 ? page.body.data : undefined;
      }, 20_000);
      expect(letters[0]?.content).toBe("impossible");
      const origin = (await read(m.id)) as Traced & { available_at: string };
      expect(origin).toMatchObject({ state: "dead_lettered", delivery_count: 1 });
      expect(Date.parse(origin.available_at) - Date.parse(origin.created_at)).toBeGreaterThanOrEqual(4_500);
    } finally {
      agent.answer = (msg) => ({ complete: [text(`DONE: ${msg.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("")}`)] });
    }
  }, 30_000);

  it("stops forwarding once the owner removes the forward", async () => {
    const ch = await forwarding();
    const off = await rest(server.url, "PATCH", `/v1/channels/${ch}`, { key: owner, body: { a2a_forward: null } });
    expect(off.status, JSON.stringify(off.body)).toBe(200);
    // The forwarder reads its channels every 2 s.
    await new Promise((r) => setTimeout(r, 2_500));
    const m = await post(ch, "stay here");
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await read(m.id)).state).toBe("ready");
    expect(agent.messages.some((x) => x.messageId === m.id)).toBe(false);
  }, 15_000);
});

describe("the forwarder in an agentbus worker process", () => {
  it("forwards when the API processes run no workers", async () => {
    const api = await startTestServer({ AGENTBUS_WORKERS: "false", AGENTBUS_ALLOW_PRIVATE_TARGETS: "true" });
    const worker = await startWorker({ config: testConfig(api.databaseUrl, { AGENTBUS_ALLOW_PRIVATE_TARGETS: "true" }), logger: createLogger("silent") });
    try {
      const key = await mintKey(api.url, "fwd-worker");
      const ch = await createChannel(api.url, key, { a2a_forward: { url: agent.url } });
      const posted = await rest<{ message: Traced }>(api.url, "POST", `/v1/channels/${ch}/messages`, { key, body: { content: "via worker" } });
      const done = await eventually(async () => {
        const now = (await rest<Traced>(api.url, "GET", `/v1/messages/${posted.body.message.id}`, { key })).body;
        return now.state === "acknowledged" ? now : undefined;
      }, 15_000);
      expect(done.result).toBe("DONE: via worker");
    } finally {
      await worker.close();
      await api.close();
    }
  }, 30_000);
});
