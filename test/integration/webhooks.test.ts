/**
 * Channel webhooks, mention pushes and member_added pushes
 * (docs/decisions.md#pushes-and-outbound-requests) against real local
 * receivers: what is sent, retries, a receiver that is down for a while, the
 * private-address rule, the delivery log over REST and gRPC and who may read
 * it, and the outbox's transactional edges.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { WebhookDeliveryStatus } from "../../gen/agentbus/v1/channel_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { systemClock } from "../../src/model/time.js";
import type { Env } from "../../src/platform/config.js";
import { createLogger } from "../../src/platform/logger.js";
import { createOutboundClient, type OutboundClient } from "../../src/outbound/guarded-fetch.js";
import { Db } from "../../src/store/db.js";
import { PgMessageStore } from "../../src/store/messages.js";
import { PgWebhookStore } from "../../src/store/webhooks.js";
import { WebhookDispatcher } from "../../src/webhooks/dispatcher.js";
import { verifySignature, WebhookReceiver } from "../fakes/webhook-receiver.js";
import { AdjustableClock } from "../support/clock.js";
import { createChannel, listMessages, postMessage, type MessageJson } from "../support/fixtures.js";
import { expectError, keyIdOf, TIMESTAMP_6, UUID } from "../support/membership.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";
import { eventually } from "../support/eventually.js";

/** Short retries so a test sees several attempts within a second or two. */
const FAST = {
  AGENTBUS_WORKERS: "true",
  AGENTBUS_ALLOW_PRIVATE_TARGETS: "true",
  AGENTBUS_WEBHOOK_RETRY_SCHEDULE: "150ms,200ms,250ms,300ms",
  AGENTBUS_WEBHOOK_TIMEOUT_MS: "2000",
};

interface DeliveryJson {
  id: string;
  delivery_id: string;
  channel_id: string;
  event: string;
  message_id: string | null;
  attempt: number;
  status: "delivered" | "failed";
  response_status: number | null;
  error: string | null;
  duration_ms: number;
  attempted_at: string;
  next_attempt_at: string | null;
}

interface LogPage {
  data: DeliveryJson[];
  limit: number;
  next_cursor: string | null;
}

const silent = createLogger("silent");
const errorCode = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error;

async function deliveryLog(base: string, key: string, channel: string, query = ""): Promise<LogPage> {
  const res = await rest<LogPage>(base, "GET", `/v1/channels/${channel}/webhook-deliveries${query}`, { key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** Waits until the channel's log holds a delivered row for every given message id. */
async function deliveredAll(base: string, key: string, channel: string, messageIds: string[]): Promise<DeliveryJson[]> {
  return eventually(async () => {
    const log = await deliveryLog(base, key, channel, "?limit=100");
    const delivered = new Set(log.data.filter((d) => d.status === "delivered").map((d) => d.message_id));
    return messageIds.every((id) => delivered.has(id)) && log.data;
  });
}

/**
 * A server with no workers, so its rows wait in the outbox until a dispatcher
 * the test starts runs, and an outbound client for that dispatcher. Each test
 * gets its own (with its own database) because a dispatcher claims every due
 * row there, whoever posted it.
 */
async function withIdleServer(env: Env, test: (idle: TestServer, http: OutboundClient) => Promise<void>): Promise<void> {
  const idle = await startTestServer({ AGENTBUS_WORKERS: "false", AGENTBUS_ALLOW_PRIVATE_TARGETS: "true", ...env });
  const http = createOutboundClient({ allowPrivateTargets: true });
  try {
    await test(idle, http);
  } finally {
    http.close();
    await idle.close();
  }
}

let server: TestServer;
let receivers: WebhookReceiver[] = [];
async function receiver(): Promise<WebhookReceiver> {
  const r = await WebhookReceiver.start();
  receivers.push(r);
  return r;
}

beforeAll(async () => {
  server = await startTestServer(FAST);
});
afterAll(async () => {
  await server?.close();
  await Promise.all(receivers.map((r) => r.close()));
  receivers = [];
});

describe("channel webhooks", () => {
  it("POSTs {message} as GET renders it, signed, with the event headers, and logs the delivery", async () => {
    const hook = await receiver();
    const key = await mintKey(server.url);
    const secret = "whsec-0123456789abcdef";
    const ch = await createChannel(server.url, key, { webhook_url: hook.url, webhook_secret: secret, mode: "broadcast" });
    const before = Math.floor(Date.now() / 1000);
    const message = await postMessage(server.url, key, ch, { content: "hello hooks", metadata: { n: 1 } });

    const [req] = await hook.waitFor(1);
    expect(req!.method).toBe("POST");
    expect(req!.headers["content-type"]).toBe("application/json");
    expect(req!.headers["user-agent"]).toBe("agentbus-webhook/1");
    expect(req!.headers["x-service-event"]).toBe("message.created");
    expect(req!.headers["x-service-delivery"]).toMatch(UUID);
    const stamp = Number(req!.headers["x-service-timestamp"]);
    expect(stamp).toBeGreaterThanOrEqual(before);
    expect(stamp).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
    // The receiver can check the signature over the raw body; a wrong secret cannot.
    expect(req!.headers["x-service-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(verifySignature(secret, req!.body, req!.headers["x-service-signature"])).toBe(true);
    expect(verifySignature("another-secret", req!.body, req!.headers["x-service-signature"])).toBe(false);

    const sent = JSON.parse(req!.body) as { message: MessageJson };
    expect(Object.keys(sent)).toEqual(["message"]);
    const page = await listMessages(server.url, key, ch, "?since=0");
    expect(sent.message).toEqual(page.data[0]);
    expect(sent.message.id).toBe(message.id);

    const [logged] = await deliveredAll(server.url, key, ch, [message.id]);
    expect(logged).toEqual({
      id: expect.stringMatching(/^\d+$/),
      delivery_id: req!.headers["x-service-delivery"],
      channel_id: ch,
      event: "message.created",
      message_id: message.id,
      attempt: 1,
      status: "delivered",
      response_status: 200,
      error: null,
      duration_ms: expect.any(Number),
      attempted_at: expect.stringMatching(TIMESTAMP_6),
      next_attempt_at: null,
    });
    // Nothing is left in the outbox once delivered.
    const { rows } = await server.app.pool.query("SELECT 1 FROM webhook_outbox WHERE id = $1", [logged!.delivery_id]);
    expect(rows).toHaveLength(0);
  });

  it("sends no signature header without a secret, and nothing for channels without a webhook", async () => {
    const hook = await receiver();
    const key = await mintKey(server.url);
    const plain = await createChannel(server.url, key);
    await postMessage(server.url, key, plain, { content: "nobody listens" });
    const ch = await createChannel(server.url, key, { webhook_url: hook.url });
    await postMessage(server.url, key, ch, { content: "unsigned" });
    const [req] = await hook.waitFor(1);
    expect(req!.headers["x-service-signature"]).toBeUndefined();
    expect(JSON.parse(req!.body).message.content).toBe("unsigned");
    // Real time: an absence (no second request over real HTTP) shows only over a while.
    await new Promise((r) => setTimeout(r, 200));
    expect(hook.requests).toHaveLength(1);
  });

  it("retries a receiver that fails twice: delivered on the third attempt, with the same delivery id and body", async () => {
    const hook = await receiver();
    hook.failNext(2, 503);
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key, { webhook_url: hook.url, webhook_secret: "s3cret-s3cret" });
    const message = await postMessage(server.url, key, ch, { content: "third time lucky" });

    const reqs = await hook.waitFor(3);
    expect(reqs.map((r) => r.status)).toEqual([503, 503, 200]);
    expect(new Set(reqs.map((r) => r.headers["x-service-delivery"])).size).toBe(1);
    expect(new Set(reqs.map((r) => r.body)).size).toBe(1);
    expect(new Set(reqs.map((r) => r.headers["x-service-signature"])).size).toBe(1);

    await deliveredAll(server.url, key, ch, [message.id]);
    const log = await deliveryLog(server.url, key, ch);
    // Newest first: the delivered third attempt, then the two failures, each announcing the next.
    expect(log.data.map((d) => [d.attempt, d.status, d.response_status])).toEqual([
      [3, "delivered", 200],
      [2, "failed", 503],
      [1, "failed", 503],
    ]);
    expect(log.data[1]!.error).toBe("http_status");
    expect(log.data[1]!.next_attempt_at).toMatch(TIMESTAMP_6);
    expect(log.data[2]!.next_attempt_at).toMatch(TIMESTAMP_6);
    expect(log.data[0]!.next_attempt_at).toBeNull();
    expect(new Set(log.data.map((d) => d.delivery_id))).toEqual(new Set([reqs[0]!.headers["x-service-delivery"]]));
  });

  it("gives up after the last attempt of the schedule, and stops at once on 410 Gone", async () => {
    const hook = await receiver();
    hook.answer(500);
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key, { webhook_url: hook.url });
    const message = await postMessage(server.url, key, ch, { content: "never" });
    // FAST has four delays: five attempts, then nothing.
    const log = await eventually(async () => {
      const page = await deliveryLog(server.url, key, ch);
      return page.data.length === 5 && page.data[0]!.next_attempt_at === null && page.data;
    });
    expect(log.map((d) => d.attempt)).toEqual([5, 4, 3, 2, 1]);
    expect(log.every((d) => d.status === "failed" && d.message_id === message.id)).toBe(true);
    // Real time: an absence (no sixth attempt over real HTTP) shows only over a while.
    await new Promise((r) => setTimeout(r, 500));
    expect(hook.requests).toHaveLength(5);

    const gone = await receiver();
    gone.answer(410);
    const ch2 = await createChannel(server.url, key, { webhook_url: gone.url });
    await postMessage(server.url, key, ch2, { content: "go away" });
    const [only] = await eventually(async () => {
      const page = await deliveryLog(server.url, key, ch2);
      return page.data.length > 0 && page.data;
    });
    expect(only).toMatchObject({ attempt: 1, status: "failed", response_status: 410, next_attempt_at: null });
    expect(only!.error).toBe("http_status");
    expect(only!.response_status).toBe(410);
    // Real time: an absence (no retry over real HTTP) shows only over a while.
    await new Promise((r) => setTimeout(r, 500));
    expect(gone.requests).toHaveLength(1);
  });

  it("delivers everything to a receiver that was down for a while once it is back", async () => {
    const hook = await receiver();
    await hook.down();
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key, { webhook_url: hook.url });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await postMessage(server.url, key, ch, { content: `while down ${i}` })).id);
    // Every message has failed at least once (connection refused) before the receiver returns.
    await eventually(async () => {
      const log = await deliveryLog(server.url, key, ch);
      const failed = new Set(log.data.filter((d) => d.status === "failed").map((d) => d.message_id));
      return ids.every((id) => failed.has(id));
    });
    const log = await deliveryLog(server.url, key, ch);
    expect(log.data[0]!.response_status).toBeNull();
    expect(log.data[0]!.error).toBe("connection_refused");
    await hook.up();
    await deliveredAll(server.url, key, ch, ids);
    const got = new Set(hook.requests.map((r) => (JSON.parse(r.body) as { message: MessageJson }).message.id));
    expect(got).toEqual(new Set(ids));
  });

  it("times out a receiver that answers too slowly, and retries it", async () => {
    const slowServer = await startTestServer({ ...FAST, AGENTBUS_WEBHOOK_TIMEOUT_MS: "300" });
    try {
      const hook = await receiver();
      hook.slow(1_000);
      const key = await mintKey(slowServer.url);
      const ch = await createChannel(slowServer.url, key, { webhook_url: hook.url });
      await postMessage(slowServer.url, key, ch, { content: "slowly" });
      const [first] = await eventually(async () => {
        const page = await deliveryLog(slowServer.url, key, ch);
        return page.data.length > 0 && page.data.slice(-1);
      });
      expect(first).toMatchObject({ attempt: 1, status: "failed", response_status: null });
      expect(first!.error).toBe("timeout");
      expect(first!.duration_ms).toBeGreaterThanOrEqual(250);
      expect(first!.duration_ms).toBeLessThan(1_000);
      expect(first!.next_attempt_at).toMatch(TIMESTAMP_6);
    } finally {
      await slowServer.close();
    }
  });
});

describe("the private-address rule (outbound-addresses)", () => {
  let strict: TestServer;
  beforeAll(async () => {
    strict = await startTestServer({ ...FAST, AGENTBUS_ALLOW_PRIVATE_TARGETS: "false" });
  });
  afterAll(async () => {
    await strict?.close();
  });

  it("refuses to save a channel webhook_url on a loopback or private address, on create and on update, with 422 invalid_webhook_url", async () => {
    const key = await mintKey(strict.url);
    for (const url of ["http://127.0.0.1:9/hook", "http://localhost:9/hook", "http://[::1]:9/hook", "http://10.0.0.7/hook", "http://169.254.169.254/"]) {
      const created = await rest(strict.url, "POST", "/v1/channels", { key, body: { name: "hooked", mode: "broadcast", webhook_url: url } });
      const body = expectError(created, 422, "invalid_webhook_url");
      expect(body.message, url).toMatch(/^'webhook_url' points at .+, a non-public address that webhooks are never delivered to$/);
    }
    const ch = await createChannel(strict.url, key);
    expectError(await rest(strict.url, "PATCH", `/v1/channels/${ch}`, { key, body: { webhook_url: "http://127.0.0.1:9/hook" } }), 422, "invalid_webhook_url");
    const sql = new pg.Client({ connectionString: strict.databaseUrl });
    await sql.connect();
    try {
      const { rows } = await sql.query<{ webhook_url: string | null }>("SELECT webhook_url FROM channels WHERE id = $1", [ch]);
      expect(rows[0]!.webhook_url).toBeNull();
    } finally {
      await sql.end();
    }
  });

  it("refuses to save an actor's webhook on a loopback address with 422 invalid_webhook_url", async () => {
    const key = await mintKey(strict.url);
    const actor = await rest<{ id: string }>(strict.url, "POST", "/v1/actors", { key, body: { name: "local" } });
    expectError(await rest(strict.url, "POST", `/v1/actors/${actor.body.id}/webhook`, { key, body: { url: "http://127.0.0.1:9/hook" } }), 422, "invalid_webhook_url");
  });

  it("refuses a loopback webhook_url over gRPC with INVALID_ARGUMENT and invalid_webhook_url", async () => {
    const key = await mintKey(strict.url);
    const ch = await createChannel(strict.url, key);
    const client = createClient(ChannelService, createGrpcTransport({ baseUrl: strict.url }));
    const err = await client
      .updateChannel({ identifier: ch, channel: { webhookUrl: "http://127.0.0.1:9/hook" }, updateMask: { paths: ["webhook_url"] } }, { headers: { "x-api-key": key } })
      .catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(errorCode(err)).toBe("invalid_webhook_url");
  });

  it("still refuses at delivery a loopback target saved before the save-time rule, and logs why", async () => {
    const hook = await receiver();
    const key = await mintKey(strict.url);
    const literal = await createChannel(strict.url, key);
    const named = await createChannel(strict.url, key);
    // Written past the API, as a row from before the rule (or a name that resolves to loopback) would be.
    const sql = new pg.Client({ connectionString: strict.databaseUrl });
    await sql.connect();
    try {
      await sql.query("UPDATE channels SET webhook_url = $2 WHERE id = $1", [literal, hook.url]);
      await sql.query("UPDATE channels SET webhook_url = $2 WHERE id = $1", [named, hook.url.replace("127.0.0.1", "localhost")]);
    } finally {
      await sql.end();
    }
    await postMessage(strict.url, key, literal, { content: "to 127.0.0.1" });
    await postMessage(strict.url, key, named, { content: "to localhost" });
    for (const ch of [literal, named]) {
      const [row] = await eventually(async () => {
        const page = await deliveryLog(strict.url, key, ch);
        return page.data.length > 0 && page.data.slice(-1);
      });
      expect(row).toMatchObject({ attempt: 1, status: "failed", response_status: null });
      // The class only: what localhost resolves to is not the owner's business (docs/decisions.md#failure-classes).
      expect(row!.error).toBe("private_address_refused");
    }
    expect(hook.requests).toHaveLength(0);
  });

  it("saves a loopback webhook_url when AGENTBUS_ALLOW_PRIVATE_TARGETS=true, as delivery then reaches it", async () => {
    const key = await mintKey(server.url);
    const created = await rest(server.url, "POST", "/v1/channels", { key, body: { name: "local", mode: "broadcast", webhook_url: "http://127.0.0.1:9/hook" } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
  });
});

describe("member_added pushes", () => {
  it("POSTs {channel_id, member_key_id, approved_by} to the channel webhook when an access request is approved", async () => {
    const hook = await receiver();
    const owner = await mintKey(server.url);
    const requester = await mintKey(server.url);
    const ch = await createChannel(server.url, owner, { access: "restricted", webhook_url: hook.url, webhook_secret: "member-secret" });
    const asked = await rest<{ request_id: string }>(server.url, "POST", `/v1/channels/${ch}/access-requests`, { key: requester, body: { reason: "let me in" } });
    expect(asked.status).toBe(202);
    const denied = await mintKey(server.url);
    const other = await rest<{ request_id: string }>(server.url, "POST", `/v1/channels/${ch}/access-requests`, { key: denied, body: {} });
    expect((await rest(server.url, "POST", `/v1/channels/${ch}/access-requests/${other.body.request_id}/deny`, { key: owner })).status).toBe(200);
    const approved = await rest(server.url, "POST", `/v1/channels/${ch}/access-requests/${asked.body.request_id}/approve`, { key: owner });
    expect(approved.status).toBe(200);

    const [req] = await hook.waitFor(1);
    expect(req!.headers["x-service-event"]).toBe("member_added");
    expect(JSON.parse(req!.body)).toEqual({ channel_id: ch, member_key_id: keyIdOf(requester), approved_by: keyIdOf(owner) });
    expect(verifySignature("member-secret", req!.body, req!.headers["x-service-signature"])).toBe(true);
    const log = await eventually(async () => {
      const page = await deliveryLog(server.url, owner, ch);
      return page.data.length > 0 && page.data;
    });
    expect(log[0]).toMatchObject({ event: "member_added", message_id: null, status: "delivered", attempt: 1 });
    // Real time: an absence (no second request over real HTTP) shows only over a while.
    await new Promise((r) => setTimeout(r, 200));
    expect(hook.requests).toHaveLength(1);
  });
});

describe("mention pushes (mention-pushes)", () => {
  async function actorWithWebhook(key: string, url: string, secret?: string): Promise<string> {
    const actor = await rest<{ id: string }>(server.url, "POST", "/v1/actors", { key, body: { name: `mentionable-${Math.random()}` } });
    expect(actor.status).toBe(201);
    const set = await rest(server.url, "POST", `/v1/actors/${actor.body.id}/webhook`, { key, body: { url, ...(secret ? { secret } : {}) } });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    return actor.body.id;
  }

  it("pushes {message, mentioned_actor_id} to a mentioned actor's webhook, at most once a minute per channel and actor", async () => {
    const hook = await receiver();
    const key = await mintKey(server.url);
    const other = await mintKey(server.url);
    const actorId = await actorWithWebhook(other, hook.url, "mention-secret");
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    const first = await postMessage(server.url, key, ch, { content: "ping", mentions: [actorId] });
    expect(first.mentions.map((m) => m.id)).toEqual([actorId]);

    const [req] = await hook.waitFor(1);
    expect(req!.headers["x-service-event"]).toBe("mention");
    expect(verifySignature("mention-secret", req!.body, req!.headers["x-service-signature"])).toBe(true);
    const body = JSON.parse(req!.body) as { message: MessageJson; mentioned_actor_id: string };
    expect(Object.keys(body)).toEqual(["message", "mentioned_actor_id"]);
    expect(body.mentioned_actor_id).toBe(actorId);
    expect(body.message).toEqual((await listMessages(server.url, key, ch, "?since=0")).data[0]);

    // Within the minute: recorded as rate-limited, not sent; the message still records the mention.
    const second = await postMessage(server.url, key, ch, { content: "ping again", mentions: [actorId] });
    expect(second.mentions.map((m) => m.id)).toEqual([actorId]);
    const limited = await server.app.pool.query<{ attempt: number; status: string; error: string; event: string }>(
      "SELECT attempt, status, error, event FROM webhook_deliveries WHERE message_id = $1",
      [second.id],
    );
    expect(limited.rows).toEqual([{ attempt: 0, status: "failed", error: "rate_limited", event: "mention" }]);
    // Another channel has its own window.
    const ch2 = await createChannel(server.url, key, { mode: "broadcast" });
    await postMessage(server.url, key, ch2, { content: "elsewhere", mentions: [actorId] });
    await hook.waitFor(2);
    // Real time: an absence (no third request over real HTTP) shows only over a while.
    await new Promise((r) => setTimeout(r, 300));
    expect(hook.requests).toHaveLength(2);
    // Mention pushes are the actor owner's business: not in the channel owner's log.
    expect((await deliveryLog(server.url, key, ch)).data).toEqual([]);

    // Once the minute has passed, the next mention is pushed again.
    await server.app.pool.query("UPDATE mention_push_windows SET pushed_at = pushed_at - interval '61 seconds' WHERE actor_id = $1", [actorId]);
    const third = await postMessage(server.url, key, ch, { content: "a minute later", mentions: [actorId] });
    const reqs = await hook.waitFor(3);
    expect((JSON.parse(reqs[2]!.body) as { message: MessageJson }).message.id).toBe(third.id);
  });

  it("pushes both the channel webhook and the mention, and nothing for actors without a webhook", async () => {
    const channelHook = await receiver();
    const actorHook = await receiver();
    const key = await mintKey(server.url);
    const actorId = await actorWithWebhook(key, actorHook.url);
    const silentActor = await rest<{ id: string }>(server.url, "POST", "/v1/actors", { key, body: { name: "no-hook" } });
    const ch = await createChannel(server.url, key, { webhook_url: channelHook.url });
    await postMessage(server.url, key, ch, { content: "both", mentions: [actorId, silentActor.body.id] });
    const [toChannel] = await channelHook.waitFor(1);
    const [toActor] = await actorHook.waitFor(1);
    expect(toChannel!.headers["x-service-event"]).toBe("message.created");
    expect(toActor!.headers["x-service-event"]).toBe("mention");
    expect(toActor!.headers["x-service-delivery"]).not.toBe(toChannel!.headers["x-service-delivery"]);
    expect(JSON.parse(toActor!.body).mentioned_actor_id).toBe(actorId);
  });
});

describe("actor webhooks: POST/GET/DELETE /v1/actors/{actor_id}/webhook", () => {
  it("registers, reads and deletes, never returning the secret; owner only", async () => {
    const key = await mintKey(server.url);
    const actor = await rest<{ id: string }>(server.url, "POST", "/v1/actors", { key, body: { name: "hooked" } });
    const path = `/v1/actors/${actor.body.id}/webhook`;
    expectError(await rest(server.url, "GET", path, { key }), 404, "webhook_not_found");
    expectError(await rest(server.url, "DELETE", path, { key }), 404, "webhook_not_found");

    const set = await rest(server.url, "POST", path, { key, body: { url: "https://example.com/hook", secret: "top-secret" } });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({ actor_id: actor.body.id, url: "https://example.com/hook", has_secret: true, updated_at: expect.stringMatching(TIMESTAMP_6) });
    expect(JSON.stringify(set.body)).not.toContain("top-secret");
    const got = await rest(server.url, "GET", path, { key });
    expect(got.status).toBe(200);
    expect(got.body).toEqual(set.body);

    // Re-registering replaces: no secret now.
    const replaced = await rest(server.url, "POST", path, { key, body: { url: "http://example.org/other" } });
    expect(replaced.body).toMatchObject({ url: "http://example.org/other", has_secret: false });

    const stranger = await mintKey(server.url);
    expectError(await rest(server.url, "GET", path, { key: stranger }), 403, "actor_forbidden");
    expectError(await rest(server.url, "POST", path, { key: stranger, body: { url: "https://evil.example/" } }), 403, "actor_forbidden");
    expectError(await rest(server.url, "DELETE", path, { key: stranger }), 403, "actor_forbidden");

    const deleted = await rest(server.url, "DELETE", path, { key });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ deleted: true });
    expectError(await rest(server.url, "GET", path, { key }), 404, "webhook_not_found");
  });

  it("validates the URL and the secret, and knows actors by id only", async () => {
    const key = await mintKey(server.url);
    const actor = await rest<{ id: string }>(server.url, "POST", "/v1/actors", { key, body: { name: "strict" } });
    const path = `/v1/actors/${actor.body.id}/webhook`;
    for (const url of ["/relative", "ftp://example.com/x", "not a url", "javascript:alert(1)"]) {
      expectError(await rest(server.url, "POST", path, { key, body: { url } }), 422, "invalid_webhook_url");
    }
    expectError(await rest(server.url, "POST", path, { key, body: {} }), 422, "missing_field");
    expectError(await rest(server.url, "POST", path, { key, body: { url: "https://example.com", secret: "" } }), 422, "invalid_string");
    expectError(await rest(server.url, "GET", "/v1/actors/00000000-0000-4000-8000-000000000000/webhook", { key }), 404, "actor_not_found");
    const alias = `alias-${Math.random().toString(36).slice(2)}`;
    expect((await rest(server.url, "POST", `/v1/actors/${actor.body.id}/aliases`, { key, body: { alias } })).status).toBe(201);
    expectError(await rest(server.url, "GET", `/v1/actors/${alias}/webhook`, { key }), 404, "actor_not_found");
  });
});

describe("GET /v1/channels/{identifier}/webhook-deliveries", () => {
  it("pages newest first; owner only; channel_access_denied for strangers to restricted channels; 404; 422", async () => {
    const hook = await receiver();
    const owner = await mintKey(server.url);
    const ch = await createChannel(server.url, owner, { webhook_url: hook.url });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await postMessage(server.url, owner, ch, { content: `m${i}` })).id);
    await deliveredAll(server.url, owner, ch, ids);

    const first = await deliveryLog(server.url, owner, ch, "?limit=2");
    expect(first.limit).toBe(2);
    expect(first.data).toHaveLength(2);
    expect(first.next_cursor).toBe(first.data[1]!.id);
    const second = await deliveryLog(server.url, owner, ch, `?limit=2&cursor=${first.next_cursor}`);
    expect(second.data).toHaveLength(1);
    expect(second.next_cursor).toBeNull();
    const all = [...first.data, ...second.data];
    expect(all.map((d) => Number(d.id))).toEqual([...all.map((d) => Number(d.id))].sort((a, b) => b - a));
    expect(new Set(all.map((d) => d.message_id))).toEqual(new Set(ids));

    const member = await mintKey(server.url);
    expectError(await rest(server.url, "GET", `/v1/channels/${ch}/webhook-deliveries`, { key: member }), 403, "forbidden");
    const restricted = await createChannel(server.url, owner, { access: "restricted", webhook_url: hook.url });
    expectError(await rest(server.url, "GET", `/v1/channels/${restricted}/webhook-deliveries`, { key: member }), 403, "channel_access_denied");
    expectError(await rest(server.url, "GET", "/v1/channels/no-such-channel/webhook-deliveries", { key: owner }), 404, "channel_not_found");
    expectError(await rest(server.url, "GET", `/v1/channels/${ch}/webhook-deliveries?limit=0`, { key: owner }), 422, "invalid_limit");
    expectError(await rest(server.url, "GET", `/v1/channels/${ch}/webhook-deliveries?cursor=yesterday`, { key: owner }), 422, "invalid_cursor");
    expectError(await rest(server.url, "GET", `/v1/channels/${ch}/webhook-deliveries`, {}), 401, "unauthorized");
  });

  it("is served over gRPC with the same rows and errors", async () => {
    const hook = await receiver();
    hook.failNext(1);
    const owner = await mintKey(server.url);
    const ch = await createChannel(server.url, owner, { webhook_url: hook.url });
    const message = await postMessage(server.url, owner, ch, { content: "over grpc" });
    const restLog = await deliveredAll(server.url, owner, ch, [message.id]);

    const client = createClient(ChannelService, createGrpcTransport({ baseUrl: server.url }));
    const page = await client.listWebhookDeliveries({ identifier: ch }, { headers: { "x-api-key": owner } });
    expect(page.data.map((d) => [d.id, d.attempt, d.status, d.responseStatus])).toEqual([
      [restLog[0]!.id, 2, WebhookDeliveryStatus.DELIVERED, 200],
      [restLog[1]!.id, 1, WebhookDeliveryStatus.FAILED, 500],
    ]);
    expect(page.data[1]!.nextAttemptAt).toBeDefined();
    expect(page.data[0]!.nextAttemptAt).toBeUndefined();
    expect(page.data[0]!.messageId).toBe(message.id);

    const stranger = await mintKey(server.url);
    const err = await client.listWebhookDeliveries({ identifier: ch }, { headers: { "x-api-key": stranger } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.PermissionDenied);
    expect(errorCode(err)).toBe("forbidden");
  });
});

describe("the outbox", () => {
  it("wakes dispatchers by NOTIFY on commit, only when something was queued", async () => {
    const listener = new pg.Client({ connectionString: server.databaseUrl });
    await listener.connect();
    try {
      let notified = 0;
      listener.on("notification", (n) => {
        if (n.channel === "agentbus_webhooks") notified++;
      });
      await listener.query("LISTEN agentbus_webhooks");
      const key = await mintKey(server.url);
      const actor = await rest<{ id: string }>(server.url, "POST", "/v1/actors", { key, body: { name: "no webhook" } });
      const quiet = await createChannel(server.url, key);
      await postMessage(server.url, key, quiet, { content: "no hooks anywhere", mentions: [actor.body.id] });
      // Real time: an absence (no NOTIFY from a real PostgreSQL) shows only over a while.
      await new Promise((r) => setTimeout(r, 300));
      expect(notified).toBe(0);
      const hooked = await createChannel(server.url, key, { webhook_url: (await receiver()).url });
      await postMessage(server.url, key, hooked, { content: "queued" });
      await eventually(async () => notified === 1);
    } finally {
      await listener.end();
    }
  });

  it("reconnects a dispatcher whose LISTEN connection was killed, and keeps delivering", async () => {
    const admin = new pg.Client({ connectionString: server.databaseUrl });
    await admin.connect();
    try {
      const listeners = async () =>
        (await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = 'agentbus-webhooks' AND datname = current_database()")).rows.map(
          (r) => r.pid,
        );
      const before = await listeners();
      expect(before.length).toBeGreaterThan(0);
      await admin.query("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", [before]);
      await eventually(async () => {
        const now = await listeners();
        return now.length === before.length && now.every((pid) => !before.includes(pid));
      });
      const key = await mintKey(server.url);
      const hook = await receiver();
      const ch = await createChannel(server.url, key, { webhook_url: hook.url });
      await postMessage(server.url, key, ch, { content: "after the reconnect" });
      const [request] = await hook.waitFor(1);
      expect(JSON.parse(request!.body).message.content).toBe("after the reconnect");
    } finally {
      await admin.end();
    }
  });

  it("enqueues nothing when the message's transaction rolls back", async () => {
    const key = await mintKey(server.url);
    const ch = await createChannel(server.url, key, { webhook_url: "https://example.com/never" });
    const db = new Db(server.app.pool);
    const store = new PgMessageStore(db);
    const keyId = keyIdOf(key);
    await expect(
      db.transaction(async () => {
        const outcome = await store.create({ channelId: ch, authorKeyId: keyId, authorLabel: "webhooks", actor: null, actorLabel: null, content: "undone", metadata: {}, mentions: [] });
        expect(outcome.outcome).toBe("created");
        const { rows } = await db.query("SELECT 1 FROM webhook_outbox WHERE channel_id = $1", [ch]);
        expect(rows).toHaveLength(1);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    const { rows } = await server.app.pool.query("SELECT 1 FROM webhook_outbox WHERE channel_id = $1 UNION ALL SELECT 1 FROM webhook_deliveries WHERE channel_id = $1", [ch]);
    expect(rows).toHaveLength(0);
  });

  it("does not send a message retracted or dropped by the ring buffer before its first attempt; sends an expired one as archived", async () => {
    await withIdleServer({}, async (idle, http) => {
      const clock = new AdjustableClock();
      const hook = await receiver();
      const key = await mintKey(idle.url);
      const ch = await createChannel(idle.url, key, { webhook_url: hook.url, max_messages: 2 });
      const retracted = await postMessage(idle.url, key, ch, { content: "taken back" });
      expect((await rest(idle.url, "DELETE", `/v1/messages/${retracted.id}`, { key })).status).toBe(200);
      const dropped = await postMessage(idle.url, key, ch, { content: "pushed out" });
      const kept = await postMessage(idle.url, key, ch, { content: "kept" });
      await postMessage(idle.url, key, ch, { content: "newest" });
      const short = await createChannel(idle.url, key, { webhook_url: hook.url, ttl_seconds: 300 });
      const expired = await postMessage(idle.url, key, short, { content: "expires first" });
      // The purge archives it before any dispatcher runs.
      clock.advanceSeconds(400);
      const { purge } = await import("../../src/store/purge.js");
      await purge(new Db(idle.app.pool), clock.now());

      const dispatcher = new WebhookDispatcher({ store: new PgWebhookStore(new Db(idle.app.pool)), clock, logger: silent, http });
      await dispatcher.start();
      const rows = await eventually(async () => {
        const { rows } = await idle.app.pool.query<{ message_id: string; status: string; error: string | null }>(
          "SELECT message_id, status, error FROM webhook_deliveries WHERE channel_id = ANY($1::uuid[])",
          [[ch, short]],
        );
        return rows.length === 5 && rows;
      });
      await dispatcher.stop();
      const byMessage = new Map(rows.map((r) => [r.message_id, r]));
      expect(byMessage.get(retracted.id)).toMatchObject({ status: "failed", error: expect.stringMatching(/^message_retracted/) });
      expect(byMessage.get(dropped.id)).toMatchObject({ status: "failed", error: expect.stringMatching(/^message_gone/) });
      expect(byMessage.get(kept.id)).toMatchObject({ status: "delivered" });
      expect(byMessage.get(expired.id)).toMatchObject({ status: "delivered" });
      const sent = hook.requests.map((r) => (JSON.parse(r.body) as { message: MessageJson }).message);
      expect(sent.map((m) => m.id).sort()).toEqual([kept.id, expired.id, sent.find((m) => m.content === "newest")!.id].sort());
      expect(sent.find((m) => m.id === expired.id)!.active).toBe(false);
      const { rows: left } = await idle.app.pool.query("SELECT 1 FROM webhook_outbox");
      expect(left).toHaveLength(0);
    });
  });

  it("retries a delivery whose sender died mid-attempt once its lease ends", async () => {
    await withIdleServer({}, async (idle, http) => {
      const clock = new AdjustableClock();
      const hook = await receiver();
      const key = await mintKey(idle.url);
      const ch = await createChannel(idle.url, key, { webhook_url: hook.url });
      const message = await postMessage(idle.url, key, ch, { content: "orphaned" });
      const db = new Db(idle.app.pool);
      // A worker claims the row and dies before sending or recording anything.
      const [claimed] = await new PgWebhookStore(db).claimDue(clock.now(), 10, clock.now() + 40_000_000, { busy: new Map(), perDestination: 2, owners: new Map(), perOwner: 4 });
      expect(claimed).toMatchObject({ event: "message.created", attempt: 1, messageId: message.id, url: hook.url });

      const dispatcher = new WebhookDispatcher({ store: new PgWebhookStore(db), clock, logger: silent, http, leaseMs: 40_000 });
      await dispatcher.start();
      // Real time: an absence (no request over real HTTP while the row is leased) shows only over a while.
      await new Promise((r) => setTimeout(r, 300));
      expect(hook.requests).toHaveLength(0); // still leased
      clock.advanceSeconds(41);
      await dispatcher.sweep();
      const [req] = await hook.waitFor(1);
      expect(req!.headers["x-service-delivery"]).toBe(claimed!.id);
      const log = await deliveredAll(idle.url, key, ch, [message.id]);
      expect(log[0]).toMatchObject({ attempt: 2, status: "delivered" });
      await dispatcher.stop();
    });
  });

  it("sends every delivery exactly once with several dispatchers on one database", async () => {
    await withIdleServer({ AGENTBUS_DB_POOL_SIZE: "30" }, async (idle, http) => {
      const hook = await receiver();
      const key = await mintKey(idle.url);
      const ch = await createChannel(idle.url, key, { webhook_url: hook.url });
      const total = 60;
      await Promise.all(Array.from({ length: total }, (_, i) => postMessage(idle.url, key, ch, { content: `fan ${i}` })));
      const dispatchers = Array.from(
        { length: 3 },
        () => new WebhookDispatcher({ store: new PgWebhookStore(new Db(idle.app.pool)), clock: systemClock, logger: silent, http, concurrency: 4 }),
      );
      await Promise.all(dispatchers.map((d) => d.start()));
      await hook.waitFor(total);
      // Real time: an absence (no duplicate request over real HTTP) shows only over a while.
      await new Promise((r) => setTimeout(r, 300));
      await Promise.all(dispatchers.map((d) => d.stop()));
      const deliveryIds = hook.requests.map((r) => r.headers["x-service-delivery"]);
      expect(deliveryIds).toHaveLength(total);
      expect(new Set(deliveryIds).size).toBe(total);
    });
  });
});
