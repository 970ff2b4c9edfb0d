/**
 * Idempotency-Key on state-changing operations (docs/decisions.md#idempotency), through the
 * real server and handlers, over REST (`Idempotency-Key` header) and gRPC
 * (`idempotency-key` metadata), with CreateChannel and CreateMessage as the
 * operations under test. Timing-controlled cases (a duplicate waiting for a
 * slow first request, the lock timeout) are in idempotency-pipeline.test.ts.
 */
import { Code, ConnectError, createClient, type CallOptions } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { ChannelMode } from "../../gen/agentbus/v1/channel_pb.js";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer();
let key: string;
let otherKey: string;

beforeAll(async () => {
  key = await mintKey(server.url);
  otherKey = await mintKey(server.url);
});

const newKey = () => `idem-${randomUUID()}`;

interface RawResponse {
  status: number;
  headers: Headers;
  text: string;
  body: Record<string, unknown>;
}

/** A REST POST that keeps the raw body text, so replays can be compared byte for byte. */
async function post(path: string, body: unknown, options: { key?: string; idempotencyKey?: string } = {}): Promise<RawResponse> {
  const headers: Record<string, string> = { "Content-Type": "application/json", "X-API-Key": options.key ?? key };
  if (options.idempotencyKey !== undefined) headers["Idempotency-Key"] = options.idempotencyKey;
  const res = await fetch(`${server.url}${path}`, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, body: (text === "" ? {} : JSON.parse(text)) as Record<string, unknown> };
}

async function restChannel(apiKey = key): Promise<string> {
  const res = await post("/v1/channels", { name: `idem-${randomUUID().slice(0, 8)}`, mode: "broadcast" }, { key: apiKey });
  if (res.status !== 201) throw new Error(`creating a channel failed: ${res.status} ${res.text}`);
  return res.body.id as string;
}

async function messageCount(channelId: string): Promise<number> {
  const { rows } = await server.app.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM messages WHERE channel_id = $1", [channelId]);
  return rows[0]?.n ?? 0;
}

async function channelCount(name: string): Promise<number> {
  const { rows } = await server.app.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM channels WHERE name = $1", [name]);
  return rows[0]?.n ?? 0;
}

const messageIdOf = (body: Record<string, unknown>) => (body.message as { id: string }).id;

describe("Idempotency-Key over REST", () => {
  it("replays a retried CreateChannel with the first status and body, and creates the channel once", async () => {
    const name = `idem-${randomUUID().slice(0, 8)}`;
    const idempotencyKey = newKey();
    const first = await post("/v1/channels", { name, mode: "broadcast" }, { idempotencyKey });
    const retry = await post("/v1/channels", { name, mode: "broadcast" }, { idempotencyKey });
    expect(first.status).toBe(201);
    expect(retry.status).toBe(201);
    expect(retry.text).toBe(first.text);
    expect(retry.headers.get("x-idempotent-replay")).toBe("true");
    expect(first.headers.get("x-idempotent-replay")).toBeNull();
    expect(await channelCount(name)).toBe(1);
  });

  it("replays a retried CreateMessage and posts the message once", async () => {
    const channelId = await restChannel();
    const idempotencyKey = newKey();
    const first = await post(`/v1/channels/${channelId}/messages`, { content: "once" }, { idempotencyKey });
    const retry = await post(`/v1/channels/${channelId}/messages`, { content: "once" }, { idempotencyKey });
    expect(first.status).toBe(201);
    expect(retry.status).toBe(201);
    expect(retry.text).toBe(first.text);
    expect(retry.headers.get("x-idempotent-replay")).toBe("true");
    expect(await messageCount(channelId)).toBe(1);
  });

  it("echoes Idempotency-Key on the first response and on the replay", async () => {
    const channelId = await restChannel();
    const idempotencyKey = newKey();
    const first = await post(`/v1/channels/${channelId}/messages`, { content: "echo" }, { idempotencyKey });
    const retry = await post(`/v1/channels/${channelId}/messages`, { content: "echo" }, { idempotencyKey });
    expect(first.headers.get("idempotency-key")).toBe(idempotencyKey);
    expect(retry.headers.get("idempotency-key")).toBe(idempotencyKey);
  });

  it("answers 422 idempotency_key_reused to the same key with another body, and does not apply it", async () => {
    const channelId = await restChannel();
    const idempotencyKey = newKey();
    await post(`/v1/channels/${channelId}/messages`, { content: "first" }, { idempotencyKey });
    const other = await post(`/v1/channels/${channelId}/messages`, { content: "second" }, { idempotencyKey });
    expect(other.status).toBe(422);
    expect(other.body.error).toBe("idempotency_key_reused");
    expect(other.body.suggestion).toEqual(expect.any(String));
    expect(await messageCount(channelId)).toBe(1);
  });

  it("keeps the same key of another API key independent", async () => {
    const channelId = await restChannel();
    const idempotencyKey = newKey();
    const mine = await post(`/v1/channels/${channelId}/messages`, { content: "same" }, { idempotencyKey });
    const theirs = await post(`/v1/channels/${channelId}/messages`, { content: "same" }, { idempotencyKey, key: otherKey });
    expect(theirs.status).toBe(201);
    expect(theirs.headers.get("x-idempotent-replay")).toBeNull();
    expect(messageIdOf(theirs.body)).not.toBe(messageIdOf(mine.body));
    expect(await messageCount(channelId)).toBe(2);
  });

  it("does not store a failed request: a corrected retry with the same key succeeds", async () => {
    const channelId = await restChannel();
    const idempotencyKey = newKey();
    const failed = await post(`/v1/channels/${channelId}/messages`, { content: "   " }, { idempotencyKey });
    expect(failed.status).toBe(422);
    const corrected = await post(`/v1/channels/${channelId}/messages`, { content: "fixed" }, { idempotencyKey });
    expect(corrected.status).toBe(201);
    expect(corrected.headers.get("x-idempotent-replay")).toBeNull();
    expect(await messageCount(channelId)).toBe(1);
  });

  it.each([
    ["empty", ""],
    ["longer than 255 characters", "k".repeat(256)],
  ])("answers 422 invalid_idempotency_key to a key that is %s", async (_what, idempotencyKey) => {
    const channelId = await restChannel();
    const res = await post(`/v1/channels/${channelId}/messages`, { content: "x" }, { idempotencyKey });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("invalid_idempotency_key");
    expect(await messageCount(channelId)).toBe(0);
  });

  it("creates exactly one message from 50 concurrent creates with one key; the others replay it", async () => {
    const channelId = await restChannel();
    const idempotencyKey = newKey();
    const responses = await Promise.all(
      Array.from({ length: 50 }, () => post(`/v1/channels/${channelId}/messages`, { content: "race" }, { idempotencyKey })),
    );
    expect(await messageCount(channelId)).toBe(1);
    const created = responses.filter((r) => r.status === 201 && r.headers.get("x-idempotent-replay") === null);
    const replays = responses.filter((r) => r.status === 201 && r.headers.get("x-idempotent-replay") === "true");
    const inProgress = responses.filter((r) => r.status === 409 && r.body.error === "idempotency_in_progress");
    expect(created).toHaveLength(1);
    expect(replays.length + inProgress.length).toBe(49);
    for (const replay of replays) expect(replay.text).toBe(created[0]?.text);
  });

  it("ignores the header on reads", async () => {
    const channelId = await restChannel();
    const headers = { "Idempotency-Key": newKey() };
    const before = await rest<{ data: unknown[] }>(server.url, "GET", `/v1/channels/${channelId}/messages?since=0`, { key, headers });
    await post(`/v1/channels/${channelId}/messages`, { content: "between" });
    const after = await rest<{ data: unknown[] }>(server.url, "GET", `/v1/channels/${channelId}/messages?since=0`, { key, headers });
    expect(before.status).toBe(200);
    expect(after.status).toBe(200);
    expect(before.body.data).toHaveLength(0);
    expect(after.body.data).toHaveLength(1);
    expect(after.headers.get("x-idempotent-replay")).toBeNull();
    expect(after.headers.get("idempotency-key")).toBeNull();
  });

  it("ignores the header on operations without an API key (minting keys)", async () => {
    const headers = { "Idempotency-Key": newKey() };
    const first = await rest(server.url, "POST", "/v1/keys", { body: { agent_label: `idem-${randomUUID()}` }, headers });
    const second = await rest(server.url, "POST", "/v1/keys", { body: { agent_label: `idem-${randomUUID()}` }, headers });
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.body.key_id).not.toBe(first.body.key_id);
    expect(second.headers.get("x-idempotent-replay")).toBeNull();
  });
});

describe("Idempotency-Key over gRPC", () => {
  const transport = () => createGrpcTransport({ baseUrl: server.url });
  const messages = () => createClient(MessageService, transport());
  const channels = () => createClient(ChannelService, transport());

  /** Call options with the key metadata, recording the response headers. */
  function withKey(idempotencyKey: string | undefined, apiKey = key): CallOptions & { received: Headers } {
    const received = new Headers();
    const headers: Record<string, string> = { "x-api-key": apiKey };
    if (idempotencyKey !== undefined) headers["idempotency-key"] = idempotencyKey;
    return { headers, received, onHeader: (h) => h.forEach((v, k) => received.set(k, v)) };
  }

  async function grpcChannel(): Promise<string> {
    const channel = await channels().createChannel({ name: `idem-${randomUUID().slice(0, 8)}`, mode: ChannelMode.BROADCAST }, withKey(undefined));
    return channel.id;
  }

  const errorCode = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error;

  it("replays a retried CreateChannel and creates the channel once", async () => {
    const name = `idem-${randomUUID().slice(0, 8)}`;
    const idempotencyKey = newKey();
    const firstCall = withKey(idempotencyKey);
    const first = await channels().createChannel({ name, mode: ChannelMode.BROADCAST }, firstCall);
    const retryCall = withKey(idempotencyKey);
    const retry = await channels().createChannel({ name, mode: ChannelMode.BROADCAST }, retryCall);
    expect(retry).toEqual(first);
    expect(retryCall.received.get("x-idempotent-replay")).toBe("true");
    expect(firstCall.received.get("x-idempotent-replay")).toBeNull();
    expect(await channelCount(name)).toBe(1);
  });

  it("replays a retried CreateMessage and posts the message once", async () => {
    const channelId = await grpcChannel();
    const idempotencyKey = newKey();
    const firstCall = withKey(idempotencyKey);
    const first = await messages().createMessage({ identifier: channelId, content: "once" }, firstCall);
    const retryCall = withKey(idempotencyKey);
    const retry = await messages().createMessage({ identifier: channelId, content: "once" }, retryCall);
    expect(retry).toEqual(first);
    expect(retryCall.received.get("x-idempotent-replay")).toBe("true");
    expect(firstCall.received.get("idempotency-key")).toBe(idempotencyKey);
    expect(retryCall.received.get("idempotency-key")).toBe(idempotencyKey);
    expect(await messageCount(channelId)).toBe(1);
  });

  it("replays over gRPC what was first created over REST", async () => {
    const channelId = await restChannel();
    const idempotencyKey = newKey();
    const first = await post(`/v1/channels/${channelId}/messages`, { content: "cross" }, { idempotencyKey });
    const retryCall = withKey(idempotencyKey);
    const retry = await messages().createMessage({ identifier: channelId, content: "cross" }, retryCall);
    expect(retry.message?.id).toBe(messageIdOf(first.body));
    expect(retryCall.received.get("x-idempotent-replay")).toBe("true");
    expect(await messageCount(channelId)).toBe(1);
  });

  it("answers InvalidArgument idempotency_key_reused to the same key with another request", async () => {
    const channelId = await grpcChannel();
    const idempotencyKey = newKey();
    await messages().createMessage({ identifier: channelId, content: "first" }, withKey(idempotencyKey));
    const err = await messages()
      .createMessage({ identifier: channelId, content: "second" }, withKey(idempotencyKey))
      .catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(errorCode(err)).toBe("idempotency_key_reused");
    expect(await messageCount(channelId)).toBe(1);
  });

  it("keeps the same key of another API key independent", async () => {
    const channelId = await grpcChannel();
    const idempotencyKey = newKey();
    const mine = await messages().createMessage({ identifier: channelId, content: "same" }, withKey(idempotencyKey));
    const theirsCall = withKey(idempotencyKey, otherKey);
    const theirs = await messages().createMessage({ identifier: channelId, content: "same" }, theirsCall);
    expect(theirs.message?.id).not.toBe(mine.message?.id);
    expect(theirsCall.received.get("x-idempotent-replay")).toBeNull();
    expect(await messageCount(channelId)).toBe(2);
  });

  it("does not store a failed request: a corrected retry with the same key succeeds", async () => {
    const channelId = await grpcChannel();
    const idempotencyKey = newKey();
    const err = await messages()
      .createMessage({ identifier: channelId, content: "   " }, withKey(idempotencyKey))
      .catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    const correctedCall = withKey(idempotencyKey);
    await messages().createMessage({ identifier: channelId, content: "fixed" }, correctedCall);
    expect(correctedCall.received.get("x-idempotent-replay")).toBeNull();
    expect(await messageCount(channelId)).toBe(1);
  });

  it("answers InvalidArgument invalid_idempotency_key to a key longer than 255 characters", async () => {
    const channelId = await grpcChannel();
    const err = await messages()
      .createMessage({ identifier: channelId, content: "x" }, withKey("k".repeat(256)))
      .catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(errorCode(err)).toBe("invalid_idempotency_key");
    expect(await messageCount(channelId)).toBe(0);
  });

  it("creates exactly one message from 50 concurrent creates with one key; the others replay it", async () => {
    const channelId = await grpcChannel();
    const idempotencyKey = newKey();
    const client = messages();
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, async () => {
        const options = withKey(idempotencyKey);
        try {
          const response = await client.createMessage({ identifier: channelId, content: "race" }, options);
          return { id: response.message?.id, replay: options.received.get("x-idempotent-replay") === "true" };
        } catch (err) {
          return { error: errorCode(err) };
        }
      }),
    );
    expect(await messageCount(channelId)).toBe(1);
    const created = outcomes.filter((o) => o.id !== undefined && !o.replay);
    const replays = outcomes.filter((o) => o.id !== undefined && o.replay);
    const inProgress = outcomes.filter((o) => o.error === "idempotency_in_progress");
    expect(created).toHaveLength(1);
    expect(replays.length + inProgress.length).toBe(49);
    for (const replay of replays) expect(replay.id).toBe(created[0]?.id);
  });

  it("ignores the metadata on reads", async () => {
    const channelId = await grpcChannel();
    const idempotencyKey = newKey();
    const before = await messages().listMessages({ identifier: channelId, since: "0" }, withKey(idempotencyKey));
    await messages().createMessage({ identifier: channelId, content: "between" }, withKey(undefined));
    const afterCall = withKey(idempotencyKey);
    const after = await messages().listMessages({ identifier: channelId, since: "0" }, afterCall);
    expect(before.data).toHaveLength(0);
    expect(after.data).toHaveLength(1);
    expect(afterCall.received.get("x-idempotent-replay")).toBeNull();
  });
});
