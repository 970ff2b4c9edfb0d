/**
 * Storage quotas per key (issue 26, F10; docs/decisions.md#quotas): what a
 * key's messages take and how many are live, counted by the database as rows
 * come and go on every path, and its channels; shown on GET /v1/keys/me;
 * posts and channels past a quota refused with 403 quota_exceeded (gRPC
 * RESOURCE_EXHAUSTED); the operator raises a key's quota.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";

const TOKEN = "quota-admin-token";
let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({
    AGENTBUS_ADMIN_TOKEN: TOKEN,
    AGENTBUS_QUOTA_LIVE_MESSAGES: "5",
    AGENTBUS_QUOTA_STORED_BYTES: "20000",
    AGENTBUS_QUOTA_CHANNELS: "3",
  });
});
afterAll(async () => server.close());

interface Quota {
  used: number;
  limit: number | null;
}
type Quotas = Record<"stored_bytes" | "live_messages" | "channels", Quota>;

const quotasOf = async (key: string): Promise<Quotas> => (await rest<{ quotas: Quotas }>(server.url, "GET", "/v1/keys/me", { key })).body.quotas;
const setQuotas = (keyId: string, body: Record<string, unknown>, token = TOKEN) =>
  rest<Quotas>(server.url, "PUT", `/v1/admin/keys/${keyId}/quotas`, { body, headers: { "X-Admin-Token": token } });
const keyIdOf = (key: string) => key.split(".")[0]!;
/** The quota cache on the post path is a second long: the next judgement reads the database afresh. */
const afterCache = () => new Promise((r) => setTimeout(r, 1_100));

describe("GET /v1/keys/me", () => {
  it("shows each quota with what the key uses and its limit", async () => {
    const key = await mintKey(server.url, "quota-show");
    const ch = await createChannel(server.url, key);
    await postMessage(server.url, key, ch, { content: "hello", metadata: { a: 1 } });
    expect(await quotasOf(key)).toEqual({
      stored_bytes: { used: 5 + '{"a": 1}'.length, limit: 20000 },
      live_messages: { used: 1, limit: 5 },
      channels: { used: 1, limit: 3 },
    });
  });

  it("counts what leaves: a retracted message is no longer live but its history still takes its bytes, a deleted channel takes both with it", async () => {
    const key = await mintKey(server.url, "quota-leave");
    const ch = await createChannel(server.url, key);
    const m = await postMessage(server.url, key, ch, { content: "x".repeat(100) });
    await postMessage(server.url, key, ch, { content: "y".repeat(50) });
    expect((await rest(server.url, "DELETE", `/v1/messages/${m.id}`, { key })).status).toBe(200);
    expect(await quotasOf(key)).toMatchObject({ live_messages: { used: 1 }, stored_bytes: { used: 150 + 4 } });
    expect((await rest(server.url, "DELETE", `/v1/channels/${ch}`, { key })).status).toBeLessThan(300);
    expect(await quotasOf(key)).toMatchObject({ live_messages: { used: 0 }, stored_bytes: { used: 0 }, channels: { used: 0 } });
  });

  it("counts a ring buffer's dropped messages out", async () => {
    const key = await mintKey(server.url, "quota-ring");
    const ch = await createChannel(server.url, key, { max_messages: 2 });
    for (const content of ["a", "b", "c"]) await postMessage(server.url, key, ch, { content });
    expect((await quotasOf(key)).live_messages.used).toBe(2);
  });
});

describe("a post past a quota", () => {
  it("past the live-message quota is refused with 403 quota_exceeded, naming the quota, with a suggestion", async () => {
    const key = await mintKey(server.url, "quota-live");
    const ch = await createChannel(server.url, key);
    for (let i = 0; i < 5; i++) await postMessage(server.url, key, ch, { content: `m${i}` });
    const res = await rest(server.url, "POST", `/v1/channels/${ch}/messages`, { key, body: { content: "one too many" } });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: "quota_exceeded", quota: "live_messages", used: 5, limit: 5, requested: 1, suggestion: expect.stringContaining("/v1/keys/me") });
  });

  it("past the stored-bytes quota is refused, a batch judged as a whole", async () => {
    const key = await mintKey(server.url, "quota-bytes");
    const ch = await createChannel(server.url, key);
    await postMessage(server.url, key, ch, { content: "z".repeat(15000) });
    const batch = await rest(server.url, "POST", `/v1/channels/${ch}/messages:batchCreate`, {
      key,
      body: { messages: [{ content: "a".repeat(3000) }, { content: "b".repeat(3000) }] },
    });
    expect(batch.status).toBe(403);
    // Content and metadata ("{}") bytes.
    expect(batch.body).toMatchObject({ error: "quota_exceeded", quota: "stored_bytes", requested: 6004 });
    expect((await quotasOf(key)).live_messages.used).toBe(1);
  });

  it("is RESOURCE_EXHAUSTED over gRPC", async () => {
    const key = await mintKey(server.url, "quota-grpc");
    const ch = await createChannel(server.url, key);
    const messages = createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
    for (let i = 0; i < 5; i++) await messages.createMessage({ identifier: ch, content: `g${i}` }, { headers: { "x-api-key": key } });
    const err = await messages.createMessage({ identifier: ch, content: "past it" }, { headers: { "x-api-key": key } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.ResourceExhausted);
    expect(ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error).toBe("quota_exceeded");
  });

  it("does not stop another key", async () => {
    const full = await mintKey(server.url, "quota-full");
    const other = await mintKey(server.url, "quota-other");
    const ch = await createChannel(server.url, full);
    for (let i = 0; i < 5; i++) await postMessage(server.url, full, ch, { content: `f${i}` });
    expect((await rest(server.url, "POST", `/v1/channels/${ch}/messages`, { key: other, body: { content: "mine" } })).status).toBe(201);
  });
});

describe("the channel quota", () => {
  it("refuses a key's channel past it with 403 quota_exceeded, exactly, when creates race", async () => {
    const key = await mintKey(server.url, "quota-channels");
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => rest(server.url, "POST", "/v1/channels", { key, body: { name: `race-${i}`, mode: "broadcast" } })),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(3);
    const refused = results.filter((r) => r.status === 403);
    expect(refused).toHaveLength(5);
    expect(refused[0]!.body).toMatchObject({ error: "quota_exceeded", quota: "channels", limit: 3 });
  });
});

describe("PUT /v1/admin/keys/{key_id}/quotas", () => {
  it("raises a key's quota: posts go on, and GET /v1/keys/me shows the new limit", async () => {
    const key = await mintKey(server.url, "quota-raised");
    const ch = await createChannel(server.url, key);
    for (let i = 0; i < 5; i++) await postMessage(server.url, key, ch, { content: `r${i}` });
    const set = await setQuotas(keyIdOf(key), { live_messages: 100 });
    expect(set.status).toBe(200);
    expect(set.body.live_messages).toEqual({ used: 5, limit: 100 });
    await afterCache();
    expect((await rest(server.url, "POST", `/v1/channels/${ch}/messages`, { key, body: { content: "room now" } })).status).toBe(201);
    expect((await quotasOf(key)).live_messages.limit).toBe(100);
  });

  it("takes 0 as unlimited, and puts a quota left out back to the service's default", async () => {
    const key = await mintKey(server.url, "quota-unlimited");
    expect((await setQuotas(keyIdOf(key), { channels: 0, stored_bytes: 1 })).body).toMatchObject({ channels: { limit: null }, stored_bytes: { limit: 1 } });
    expect((await setQuotas(keyIdOf(key), {})).body).toMatchObject({ channels: { limit: 3 }, stored_bytes: { limit: 20000 } });
  });

  it("answers 404 key_not_found for an unknown key, 422 invalid_quota for a negative limit, 401 without the token", async () => {
    expect((await setQuotas("ak_nosuchkeynosuch", { channels: 5 })).body).toMatchObject({ error: "key_not_found" });
    const key = await mintKey(server.url, "quota-invalid");
    const bad = await setQuotas(keyIdOf(key), { channels: -1 });
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({ error: "invalid_quota", field: "channels" });
    expect((await setQuotas(keyIdOf(key), { channels: 5 }, "wrong")).status).toBe(401);
  });
});
