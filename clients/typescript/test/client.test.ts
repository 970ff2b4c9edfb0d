/** createClient over every transport: round trips, API key and idempotency keys, errors. */
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/server.js";
import { ChannelMode, createClient, idempotent, isAgentbusError, type AgentbusError, type TransportKind } from "../src/index.js";
import { clientWithNewKey, wireSpy } from "./helpers.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.close();
});

const transports: TransportKind[] = ["grpc", "connect", "grpc-web"];

/** The rejection of `promise`, which must reject. */
async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.unreachable("the call succeeded"),
    (err: unknown) => err,
  );
}

async function agentbusFailure(promise: Promise<unknown>): Promise<AgentbusError> {
  const err = await failure(promise);
  if (!isAgentbusError(err)) throw new Error(`expected an AgentbusError, got ${String(err)}`);
  return err;
}

describe.each(transports)("over %s", (transport) => {
  it("mints a key, creates a channel, posts, lists and streams a message", async () => {
    const label = `round-trip-${transport}`;
    const { key } = await createClient({ baseUrl: server.url, transport }).keys.createKey({ agentLabel: label });
    const client = createClient({ baseUrl: server.url, apiKey: key, transport });
    expect((await client.keys.getCurrentKey({})).agentLabel).toBe(label);
    const channel = await client.channels.createChannel({ name: "round trip", mode: ChannelMode.BROADCAST, metadataSchema: {} });
    const posted = await client.messages.createMessage({ identifier: channel.id, content: "hello", metadata: { n: 1 } });
    const page = await client.messages.listMessages({ identifier: channel.id, since: "0" });
    expect(page.data.map((m) => [m.id, m.content, m.metadata])).toEqual([[posted.message?.id, "hello", { n: 1 }]]);
    const abort = new AbortController();
    const streamed: Array<[string | undefined, string]> = [];
    for await (const item of client.messages.watchMessages({ identifier: channel.id, since: "0" }, { signal: abort.signal })) {
      streamed.push([item.message?.id, item.cursor]);
      if (item.message) break;
    }
    // The opening response (where the stream starts), then the message.
    expect(streamed).toEqual([
      [undefined, "0"],
      [posted.message?.id, posted.nextCursor],
    ]);
  });

  it("speaks the reference's verbs through compat: post creates the channel, claim takes the task, null when none is left", async () => {
    const { key } = await createClient({ baseUrl: server.url, transport }).keys.createKey({ agentLabel: `compat-${transport}` });
    const client = createClient({ baseUrl: server.url, apiKey: key, transport });
    const posted = await client.compat.postTask({ channel: "migrated", content: "resize 1.png" });
    const claimed = await client.compat.claimTask({ channel: "migrated" });
    expect(claimed.claimed?.id).toBe(posted.message?.id);
    expect(claimed.claimed?.channelId).toBe(posted.channel);
    const empty = await client.compat.claimTask({ channel: "migrated" });
    expect(empty.claimed).toBeUndefined();
    expect(empty.note).toBe("no unclaimed messages available");
  });

  it("shares state through a session with compare-and-set, and narrows the key's scopes", async () => {
    const { key } = await createClient({ baseUrl: server.url, transport }).keys.createKey({ agentLabel: `sessions-${transport}` });
    const client = createClient({ baseUrl: server.url, apiKey: key, transport });
    const session = await client.sessions.createSession({ name: "plan", state: { step: 1 } });
    const next = await client.sessions.updateSession({ id: session.id, state: { step: 2 }, expectedVersion: session.version });
    expect([next.version, next.state]).toEqual([2, { step: 2 }]);
    const stale = await agentbusFailure(client.sessions.updateSession({ id: session.id, state: { step: 3 }, expectedVersion: 1 }));
    expect(stale.code).toBe("version_conflict");
    expect((await client.keys.setCurrentKeyScopes({ scopes: ["sessions:read"] })).scopes).toEqual(["sessions:read"]);
    expect((await agentbusFailure(client.sessions.updateSession({ id: session.id, state: {} }))).code).toBe("insufficient_scope");
  });

  it("exposes the service's error code, suggestion and gRPC status", async () => {
    const { client } = await clientWithNewKey(server.url, { transport });
    const err = await agentbusFailure(client.channels.getChannel({ identifier: "no-such-channel" }));
    expect(err).toMatchObject({ name: "AgentbusError", code: "channel_not_found", grpcCode: Code.NotFound, fromService: true });
    expect(err.suggestion).toMatch(/discover channels/);
    expect(isAgentbusError(err, "channel_not_found")).toBe(true);
    expect(isAgentbusError(err, "already_claimed")).toBe(false);
  });
});

describe("API key", () => {
  it("sends the key given to createClient as x-api-key", async () => {
    const spy = wireSpy();
    const { client, key } = await clientWithNewKey(server.url, { interceptors: [spy.interceptor] });
    await client.keys.getCurrentKey({});
    expect(spy.calls).toEqual([{ method: "GetCurrentKey", idempotencyKey: null, apiKey: key }]);
  });

  it("fails with unauthorized and a suggestion when no key is configured", async () => {
    const err = await agentbusFailure(createClient({ baseUrl: server.url }).keys.getCurrentKey({}));
    expect(err).toMatchObject({ code: "unauthorized", grpcCode: Code.Unauthenticated });
    expect(err.suggestion).toMatch(/x-api-key/);
  });
});

describe("idempotency keys", () => {
  it("adds a fresh idempotency-key to every mutation and none to reads", async () => {
    const spy = wireSpy();
    const { client } = await clientWithNewKey(server.url, { interceptors: [spy.interceptor] });
    const channel = await client.channels.createChannel({ name: "idem", mode: ChannelMode.CLAIMABLE });
    await client.channels.getChannel({ identifier: channel.id });
    const posted = await client.messages.createMessage({ identifier: channel.id, content: "task" });
    await client.messages.listMessages({ identifier: channel.id });
    await client.messages.claimMessage({ messageId: posted.message?.id ?? "" });
    await client.messages.ackMessage({ messageId: posted.message?.id ?? "" });
    const uuid = expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(spy.calls.map(({ method, idempotencyKey }) => ({ method, idempotencyKey }))).toEqual([
      { method: "CreateChannel", idempotencyKey: uuid },
      { method: "GetChannel", idempotencyKey: null },
      { method: "CreateMessage", idempotencyKey: uuid },
      { method: "ListMessages", idempotencyKey: null },
      { method: "ClaimMessage", idempotencyKey: uuid },
      { method: "AckMessage", idempotencyKey: uuid },
    ]);
    const keys = spy.calls.flatMap((c) => (c.idempotencyKey === null ? [] : [c.idempotencyKey]));
    expect(new Set(keys).size).toBe(keys.length);
  });

  it("adds none to a mutation that long-polls (the service refuses a keyed wait), and one when it does not wait", async () => {
    const spy = wireSpy();
    const { client } = await clientWithNewKey(server.url, { interceptors: [spy.interceptor] });
    const channel = await client.channels.createChannel({ name: "receive", mode: ChannelMode.CLAIMABLE });
    const waited = await client.messages.receiveMessages({ identifier: channel.id, wait: 0.2 });
    await client.messages.receiveMessages({ identifier: channel.id });
    expect(waited.data).toEqual([]);
    expect(spy.calls.filter((c) => c.method === "ReceiveMessages").map((c) => c.idempotencyKey)).toEqual([null, expect.stringMatching(/.+/)]);
  });

  it("keeps an idempotency-key the caller put in the call headers", async () => {
    const spy = wireSpy();
    const { client } = await clientWithNewKey(server.url, { interceptors: [spy.interceptor] });
    await client.channels.createChannel({ name: "own key", mode: ChannelMode.CLAIMABLE }, { headers: { "Idempotency-Key": "my-own-key" } });
    expect(spy.calls.map((c) => c.idempotencyKey)).toEqual(["my-own-key"]);
  });

  it("replays the first message when the same call is repeated with the same key", async () => {
    const { client } = await clientWithNewKey(server.url);
    const channel = await client.channels.createChannel({ name: "replay", mode: ChannelMode.CLAIMABLE });
    const request = { identifier: channel.id, content: "exactly once" };
    const once = idempotent();
    const first = await client.messages.createMessage(request, once);
    const retry = await client.messages.createMessage(request, once);
    expect(retry.message?.id).toBe(first.message?.id);
    expect(retry.nextCursor).toBe(first.nextCursor);
    expect((await client.messages.listMessages({ identifier: channel.id, since: "0" })).data).toHaveLength(1);
  });

  it("creates two messages for two identical calls without a key of the caller's", async () => {
    const { client } = await clientWithNewKey(server.url);
    const channel = await client.channels.createChannel({ name: "twice", mode: ChannelMode.CLAIMABLE });
    const a = await client.messages.createMessage({ identifier: channel.id, content: "same" });
    const b = await client.messages.createMessage({ identifier: channel.id, content: "same" });
    expect(a.message?.id).not.toBe(b.message?.id);
    expect((await client.messages.listMessages({ identifier: channel.id, since: "0" })).data).toHaveLength(2);
  });

  it("fails with idempotency_key_reused when one key is used for a different request", async () => {
    const { client } = await clientWithNewKey(server.url);
    const channel = await client.channels.createChannel({ name: "reuse", mode: ChannelMode.CLAIMABLE });
    const once = idempotent();
    await client.messages.createMessage({ identifier: channel.id, content: "first" }, once);
    const err = await agentbusFailure(client.messages.createMessage({ identifier: channel.id, content: "second" }, once));
    expect(err).toMatchObject({ code: "idempotency_key_reused", grpcCode: Code.InvalidArgument });
  });
});

describe("errors", () => {
  it("carries retryAfterSeconds when the service asks the caller to wait", async () => {
    const { client } = await clientWithNewKey(server.url);
    const channel = await client.channels.createChannel({ name: "paused", mode: ChannelMode.BROADCAST });
    await client.channels.updateChannel({ identifier: channel.id, channel: { paused: true } });
    const err = await agentbusFailure(client.messages.createMessage({ identifier: channel.id, content: "too early" }));
    expect(err).toMatchObject({ code: "channel_paused", grpcCode: Code.Unavailable, details: { retry_after: 30 } });
    expect(err.retryAfterSeconds).toBe(30);
  });

  it("raises AgentbusError from a failing stream", async () => {
    const { client } = await clientWithNewKey(server.url);
    const read = async () => {
      for await (const _ of client.messages.watchMessages({ identifier: "no-such-channel" })) break;
    };
    expect(await agentbusFailure(read())).toMatchObject({ code: "channel_not_found", grpcCode: Code.NotFound });
  });

  it("reports a service it cannot reach as code unavailable, not from the service", async () => {
    const client = createClient({ baseUrl: "http://127.0.0.1:1", apiKey: "k" });
    const err = await agentbusFailure(client.keys.getCurrentKey({}));
    expect(err).toMatchObject({ code: "unavailable", grpcCode: Code.Unavailable, fromService: false, suggestion: "" });
  });
});
