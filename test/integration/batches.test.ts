/**
 * Batches (docs/decisions.md#batches): batchCreate stores all items in order
 * or none, with one cursor; batchAck and batchRelease judge each id on its
 * own. Over REST and gRPC, against the real server and PostgreSQL.
 */
import { randomUUID } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { AckStatus, MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { WebhookReceiver } from "../fakes/webhook-receiver.js";
import { createChannel, listMessages, postMessage, type MessageJson, type PageJson } from "../support/fixtures.js";
import { mintKey, rest, untilParked, useTestServer } from "../support/server.js";

// Workers on and private targets allowed: the webhook test pushes to a local receiver.
const server = useTestServer({ AGENTBUS_MAX_CONTENT_BYTES: "64", AGENTBUS_WORKERS: "true", AGENTBUS_ALLOW_PRIVATE_TARGETS: "true" });
const url = () => server.url;
let owner: string;
let other: string;
beforeAll(async () => {
  owner = await mintKey(server.url, "batch-owner");
  other = await mintKey(server.url, "batch-other");
});

interface BatchJson {
  data: MessageJson[];
  next_cursor: string;
}
interface ResultJson {
  message_id: string;
  status: string | null;
  error: { error: string; message: string } | null;
}

const batchCreate = <T = BatchJson>(key: string, channel: string, messages: unknown[], headers: Record<string, string> = {}) =>
  rest<T>(url(), "POST", `/v1/channels/${channel}/messages:batchCreate`, { key, body: { messages }, headers });
const batchAck = (key: string, ids: string[]) => rest<{ results: ResultJson[] }>(url(), "POST", "/v1/messages:batchAck", { key, body: { message_ids: ids } });
const batchRelease = (key: string, ids: string[]) => rest<{ results: ResultJson[] }>(url(), "POST", "/v1/messages:batchRelease", { key, body: { message_ids: ids } });
const drafts = (n: number, prefix = "item") => Array.from({ length: n }, (_, i) => ({ content: `${prefix} ${i}` }));
const claim = (key: string, id: string) => rest(url(), "POST", `/v1/messages/${id}/claim`, { key, body: {} });

describe("POST /v1/channels/{identifier}/messages:batchCreate", () => {
  it("answers 201 with every message in the order sent and one next_cursor after the last", async () => {
    const ch = await createChannel(url(), owner);
    const res = await batchCreate(owner, ch, [{ content: "first", metadata: { n: 1 } }, { content: "second", actor_label: "bot" }, { content: "third" }]);
    expect(res.status).toBe(201);
    expect(res.body.data.map((m) => m.content)).toEqual(["first", "second", "third"]);
    expect(res.body.data[0]!.metadata).toEqual({ n: 1 });
    expect(res.body.data[1]!.actor_label).toBe("bot");
    expect(res.body.next_cursor).toBe(res.body.data[2]!.created_at);
    const page = await listMessages(url(), owner, ch, "?since=0");
    expect(page.data.map((m) => m.id)).toEqual(res.body.data.map((m) => m.id));
    expect((await listMessages(url(), owner, ch, `?since=${encodeURIComponent(res.body.next_cursor)}`)).data).toEqual([]);
  });

  it("refuses a batch with an invalid item with that item's error and index, and stores none of it", async () => {
    const ch = await createChannel(url(), owner, { metadata_schema: { type: "object", properties: { n: { type: "integer" } } } });
    const tooLong = await batchCreate<Record<string, unknown>>(owner, ch, [{ content: "fine" }, { content: "x".repeat(65) }]);
    expect(tooLong.status).toBe(422);
    expect(tooLong.body).toMatchObject({ error: "content_too_large", index: 1, max_content_bytes: 64 });
    const badMetadata = await batchCreate<Record<string, unknown>>(owner, ch, [{ content: "a" }, { content: "b" }, { content: "c", metadata: { n: "three" } }]);
    expect(badMetadata.status).toBe(422);
    expect(badMetadata.body).toMatchObject({ error: "metadata_validation_failed", index: 2 });
    const missing = await batchCreate<Record<string, unknown>>(owner, ch, [{}]);
    expect(missing.body).toMatchObject({ error: "missing_field", index: 0, field: "content" });
    expect((await listMessages(url(), owner, ch, "?since=0")).data).toEqual([]);
  });

  it("refuses 0 and 101 items with 422 invalid_batch_size and takes 100", async () => {
    const ch = await createChannel(url(), owner);
    expect((await batchCreate<Record<string, unknown>>(owner, ch, [])).body).toMatchObject({ error: "invalid_batch_size", received_items: 0 });
    expect((await batchCreate<Record<string, unknown>>(owner, ch, drafts(101))).body).toMatchObject({ error: "invalid_batch_size", max_items: 100 });
    const hundred = await batchCreate(owner, ch, drafts(100));
    expect(hundred.status).toBe(201);
    expect(hundred.body.data).toHaveLength(100);
  });

  it("answers 413 payload_too_large for a batch over the body limit, storing nothing", async () => {
    const ch = await createChannel(url(), owner);
    // 100 items of 15 KiB metadata each: every item is within its own limits, the body (1.5 MiB) is not.
    const res = await batchCreate<Record<string, unknown>>(owner, ch, drafts(100).map((d) => ({ ...d, metadata: { blob: "x".repeat(15_000) } })));
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ error: "payload_too_large" });
    expect((await listMessages(url(), owner, ch, "?since=0")).data).toEqual([]);
  });

  it("refuses the whole batch on a paused channel with 503 channel_paused", async () => {
    const ch = await createChannel(url(), owner);
    await server.app.pool.query("UPDATE channels SET paused = true WHERE id = $1", [ch]);
    const res = await batchCreate<Record<string, unknown>>(owner, ch, drafts(3));
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ error: "channel_paused" });
    expect(res.headers.get("retry-after")).toBe("30");
    expect((await listMessages(url(), owner, ch, "?since=0")).data).toEqual([]);
  });

  it("rolls the whole batch back when the channel's write limit refuses one of its items", async () => {
    const ch = await createChannel(url(), owner, { max_writes_per_minute: 3 });
    await postMessage(url(), owner, ch, { content: "earlier" });
    const res = await batchCreate<Record<string, unknown>>(owner, ch, drafts(3));
    expect(res.status).toBe(429);
    expect(res.body).toMatchObject({ error: "channel_write_rate_exceeded", index: 2 });
    expect((await listMessages(url(), owner, ch, "?since=0")).data.map((m) => m.content)).toEqual(["earlier"]);
  });

  it("refuses a stranger's batch to a restricted channel with 403 channel_access_denied", async () => {
    const ch = await createChannel(url(), owner, { access: "restricted" });
    const res = await batchCreate<Record<string, unknown>>(other, ch, drafts(2));
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: "channel_access_denied" });
  });

  it("replays the same batch for a repeated Idempotency-Key and stores it once", async () => {
    const ch = await createChannel(url(), owner);
    const headers = { "Idempotency-Key": `batch-${randomUUID()}` };
    const first = await batchCreate(owner, ch, drafts(3), headers);
    const again = await batchCreate(owner, ch, drafts(3), headers);
    expect(again.status).toBe(201);
    expect(again.headers.get("x-idempotent-replay")).toBe("true");
    expect(again.body.data.map((m) => m.id)).toEqual(first.body.data.map((m) => m.id));
    expect(again.body.next_cursor).toBe(first.body.next_cursor);
    expect((await listMessages(url(), owner, ch, "?since=0")).data).toHaveLength(3);
  });

  it("wakes a long-poll, which sees the whole batch at once", async () => {
    const ch = await createChannel(url(), owner);
    const parked = server.app.bus.subscriptions;
    const waiting = rest<PageJson>(url(), "GET", `/v1/channels/${ch}/messages?since=0&wait=10`, { key: owner });
    await untilParked(server, parked + 1);
    const created = await batchCreate(owner, ch, drafts(5));
    expect((await waiting).body.data.map((m) => m.id)).toEqual(created.body.data.map((m) => m.id));
  });

  it("pushes the channel webhook once per message of the batch, as for single posts", async () => {
    const hook = await WebhookReceiver.start();
    try {
      const ch = await createChannel(url(), owner, { webhook_url: hook.url });
      const created = await batchCreate(owner, ch, drafts(3, "pushed"));
      const received = await hook.waitFor(3);
      const pushed = received.map((r) => JSON.parse(r.body) as { message: { id: string } });
      expect(pushed.map((p) => p.message.id).sort()).toEqual(created.body.data.map((m) => m.id).sort());
    } finally {
      await hook.close();
    }
  });

  it("gives a reader following next_cursor every message of concurrent batches exactly once, each batch contiguous", async () => {
    const ch = await createChannel(url(), owner);
    const batches = 12;
    const size = 10;
    const seen: MessageJson[] = [];
    let cursor = "0";
    const reader = (async () => {
      while (seen.length < batches * size) {
        const page = await listMessages(url(), owner, ch, `?since=${encodeURIComponent(cursor)}&limit=7`);
        seen.push(...page.data);
        cursor = page.next_cursor ?? cursor;
      }
    })();
    const written = await Promise.all(Array.from({ length: batches }, (_, b) => batchCreate(owner, ch, drafts(size, `batch ${b}`))));
    await reader;
    expect(written.every((w) => w.status === 201)).toBe(true);
    const ids = seen.map((m) => m.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(ids)).toEqual(new Set(written.flatMap((w) => w.body.data.map((m) => m.id))));
    for (const w of written) {
      const start = ids.indexOf(w.body.data[0]!.id);
      expect(ids.slice(start, start + size)).toEqual(w.body.data.map((m) => m.id));
    }
  });
});

describe("POST /v1/messages:batchAck", () => {
  it("answers 200 with a result per id in order: statuses for good ids, errors for unknown and inaccessible ones", async () => {
    const open = await createChannel(url(), owner);
    const restricted = await createChannel(url(), owner, { access: "restricted" });
    const [a, b] = (await batchCreate(owner, open, drafts(2))).body.data;
    const hidden = await postMessage(url(), owner, restricted, { content: "members only" });
    await rest(url(), "POST", `/v1/messages/${b!.id}/ack`, { key: other, body: {} });
    const unknown = randomUUID();
    const res = await batchAck(other, [a!.id, b!.id, unknown, "not-a-uuid", hidden.id, a!.id]);
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([
      { message_id: a!.id, status: "acknowledged", error: null, cancel_requested: false },
      { message_id: b!.id, status: "already_acknowledged", error: null, cancel_requested: false },
      { message_id: unknown, status: null, error: { error: "message_not_found", message: "Message not found" }, cancel_requested: false },
      { message_id: "not-a-uuid", status: null, error: { error: "message_not_found", message: "Message not found" }, cancel_requested: false },
      { message_id: hidden.id, status: null, error: { error: "channel_access_denied", message: "You are not a member of this channel" }, cancel_requested: false },
      { message_id: a!.id, status: "already_acknowledged", error: null, cancel_requested: false },
    ]);
    const page = await listMessages(url(), owner, open, "?since=0");
    expect(page.data.map((m) => m.acknowledged_by.length)).toEqual([1, 1]);
  });

  it("stores the result on each message the caller holds, and refuses it per item where another key holds the claim", async () => {
    const ch = await createChannel(url(), owner, { mode: "claimable" });
    const [mine, theirs] = (await batchCreate(owner, ch, drafts(2))).body.data;
    await claim(owner, mine!.id);
    await claim(other, theirs!.id);
    const res = await rest<{ results: ResultJson[] }>(url(), "POST", "/v1/messages:batchAck", { key: owner, body: { message_ids: [mine!.id, theirs!.id], result: "done" } });
    expect(res.body.results.map((r) => r.status ?? r.error?.error)).toEqual(["acknowledged", "forbidden"]);
    const got = await rest<{ result: string | null }>(url(), "GET", `/v1/messages/${mine!.id}`, { key: owner });
    expect(got.body.result).toBe("done");
  });

  it("refuses a result over 64 KiB for the whole request, before any item is acknowledged", async () => {
    const ch = await createChannel(url(), owner, { mode: "claimable" });
    const [m] = (await batchCreate(owner, ch, drafts(1))).body.data;
    await claim(owner, m!.id);
    const res = await rest(url(), "POST", "/v1/messages:batchAck", { key: owner, body: { message_ids: [m!.id], result: "x".repeat(65_537) } });
    expect([res.status, (res.body as { error: string }).error]).toEqual([422, "result_too_large"]);
    const got = await rest<{ acknowledged_by: unknown[] }>(url(), "GET", `/v1/messages/${m!.id}`, { key: owner });
    expect(got.body.acknowledged_by).toEqual([]);
  });

  it("acknowledges an id given twice at its first place, and an upper-case id like its lower-case form", async () => {
    const ch = await createChannel(url(), owner);
    const [a, b] = (await batchCreate(owner, ch, drafts(2))).body.data;
    const res = await batchAck(other, [a!.id, b!.id.toUpperCase(), a!.id]);
    expect(res.status).toBe(200);
    expect(res.body.results.map((r) => r.status)).toEqual(["acknowledged", "acknowledged", "already_acknowledged"]);
  });

  it("acknowledges the same page from 8 readers in different orders at once: every reader gets each message once, none fails", async () => {
    const ch = await createChannel(url(), owner, { mode: "broadcast" });
    const ids = (await batchCreate(owner, ch, drafts(40))).body.data.map((m) => m.id);
    const readers = await Promise.all(Array.from({ length: 8 }, (_, i) => mintKey(url(), `batch-reader-${i}`)));
    // Each reader sends the page in its own order, so the batches lock rows in clashing orders unless the server orders them.
    const answers = await Promise.all(readers.map((key, i) => batchAck(key, i % 2 === 0 ? ids : [...ids].reverse())));
    for (const res of answers) {
      expect(res.status).toBe(200);
      expect(res.body.results.every((r) => r.status === "acknowledged")).toBe(true);
    }
    const page = await listMessages(url(), owner, ch, "?limit=100");
    expect(page.data.every((m) => (m.acknowledged_by as unknown[]).length === readers.length)).toBe(true);
  });

  it("refuses 0 and 101 ids with 422 invalid_batch_size", async () => {
    expect((await batchAck(owner, [])).body).toMatchObject({ error: "invalid_batch_size", field: "message_ids" });
    expect((await batchAck(owner, Array.from({ length: 101 }, () => randomUUID()))).status).toBe(422);
  });

  it("refuses the whole request for an unknown actor, which applies to every item", async () => {
    const res = await rest(url(), "POST", "/v1/messages:batchAck", { key: owner, body: { message_ids: [randomUUID()], actor: randomUUID() } });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: "actor_not_found" });
  });
});

describe("POST /v1/messages:batchRelease", () => {
  it("answers 200 with released for own claims and the single call's errors for the rest", async () => {
    const ch = await createChannel(url(), owner, { mode: "claimable" });
    const [mine, theirs, open] = (await batchCreate(owner, ch, drafts(3))).body.data;
    await claim(owner, mine!.id);
    await claim(other, theirs!.id);
    const unknown = randomUUID();
    const res = await batchRelease(owner, [mine!.id, theirs!.id, open!.id, unknown, mine!.id]);
    expect(res.status).toBe(200);
    expect(res.body.results.map((r) => [r.message_id, r.status ?? r.error?.error])).toEqual([
      [mine!.id, "released"],
      [theirs!.id, "forbidden"],
      [open!.id, "not_claimed"],
      [unknown, "message_not_found"],
      [mine!.id, "not_claimed"],
    ]);
    const unclaimed = await listMessages(url(), owner, ch, "?since=0&status=unclaimed");
    expect(unclaimed.data.map((m) => m.id)).toEqual([mine!.id, open!.id]);
  });
});

describe("batches over gRPC", () => {
  const client = () => createClient(MessageService, createGrpcTransport({ baseUrl: server.url }));
  const detail = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0];

  it("creates a batch in order with one cursor", async () => {
    const ch = await createChannel(url(), owner);
    const res = await client().batchCreateMessages({ identifier: ch, messages: [{ content: "g1", metadata: { n: 1 } }, { content: "g2" }] }, { headers: { "x-api-key": owner } });
    expect(res.data.map((m) => m.content)).toEqual(["g1", "g2"]);
    const page = await listMessages(url(), owner, ch, "?since=0");
    expect(page.data.map((m) => m.id)).toEqual(res.data.map((m) => m.id));
    expect(res.nextCursor).toBe(page.next_cursor);
  });

  it("refuses an invalid item as InvalidArgument naming its index, storing nothing", async () => {
    const ch = await createChannel(url(), owner);
    const err = await client()
      .batchCreateMessages({ identifier: ch, messages: [{ content: "ok" }, { content: " " }] }, { headers: { "x-api-key": owner } })
      .catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(detail(err)?.error).toBe("invalid_string");
    expect(detail(err)?.details?.index).toBe(1);
    expect((await listMessages(url(), owner, ch, "?since=0")).data).toEqual([]);
  });

  it("acks and releases with a result per id", async () => {
    const ch = await createChannel(url(), owner, { mode: "claimable" });
    const [m1, m2] = (await batchCreate(owner, ch, drafts(2))).body.data;
    await claim(owner, m1!.id);
    const headers = { "x-api-key": owner };
    const released = await client().batchReleaseMessages({ messageIds: [m1!.id, m2!.id] }, { headers });
    expect(released.results.map((r) => [r.messageId, r.status, r.error?.error])).toEqual([
      [m1!.id, "released", undefined],
      [m2!.id, undefined, "not_claimed"],
    ]);
    const unknown = randomUUID();
    const acked = await client().batchAckMessages({ messageIds: [m1!.id, unknown] }, { headers });
    expect(acked.results.map((r) => [r.messageId, r.status, r.error?.error])).toEqual([
      [m1!.id, AckStatus.ACKNOWLEDGED, undefined],
      [unknown, undefined, "message_not_found"],
    ]);
  });
});
