/**
 * Expiry, the purge job and channel history (docs/decisions.md#expiry-and-history), over the real
 * server. Time moves with an AdjustableClock: nothing here sleeps.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { formatTimestamp } from "../../src/model/time.js";
import { Db } from "../../src/store/db.js";
import { purge } from "../../src/store/purge.js";
import { AdjustableClock } from "../support/clock.js";
import { createChannel, listMessages, postMessage, type MessageJson } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const DAY = 86_400;

interface HistoryItem extends MessageJson {
  archived_at: string;
}

interface HistoryPage {
  data: HistoryItem[];
  limit: number;
  next_cursor: string | null;
}

const clock = new AdjustableClock();
const server = useTestServer({}, { clock });
let db: Db;

beforeAll(async () => {
  db = new Db(server.app.pool);
});
// Counts below are exact: every test starts with nothing left to purge
// (channels of earlier tests included), at real time, which is what
// PostgreSQL stamps created_at with.
beforeEach(async () => {
  await purge(db, clock.now() + 400 * DAY * 1_000_000);
});
afterEach(() => clock.reset());

async function history(key: string, channel: string, query = ""): Promise<HistoryPage> {
  const res = await rest<HistoryPage>(server.url, "GET", `/v1/channels/${channel}/history${query}`, { key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

async function count(sql: string, params: unknown[]): Promise<number> {
  const { rows } = await server.app.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, params);
  return rows[0]!.n;
}

async function storedCounter(channel: string): Promise<{ counter: number; rows: number }> {
  const { rows } = await server.app.pool.query<{ counter: number; rows: number }>(
    "SELECT c.stored_messages AS counter, (SELECT count(*)::int FROM messages m WHERE m.channel_id = c.id) AS rows FROM channels c WHERE c.id = $1",
    [channel],
  );
  return rows[0]!;
}

/** A short-lived channel (ttl 300 s, the minimum) and its owner's key. */
async function shortLivedChannel(body: Record<string, unknown> = {}): Promise<{ key: string; ch: string }> {
  const key = await mintKey(server.url);
  const ch = await createChannel(server.url, key, { ttl_seconds: 300, ...body });
  return { key, ch };
}

describe("expiry", () => {
  it("hides a message past its TTL from listings at once, before any purge", async () => {
    const { key, ch } = await shortLivedChannel();
    const message = await postMessage(server.url, key, ch, { content: "short-lived" });
    expect((await listMessages(server.url, key, ch)).data.map((m) => m.id)).toEqual([message.id]);
    clock.advanceSeconds(301);
    expect((await listMessages(server.url, key, ch)).data).toEqual([]);
    // Still stored, and not yet in history: only the purge archives it.
    expect(await count("messages WHERE id = $1", [message.id])).toBe(1);
    expect((await history(key, ch)).data).toEqual([]);
  });

  it("keeps messages of a longer-lived channel when another channel's expire", async () => {
    const short = await shortLivedChannel();
    const long = await shortLivedChannel({ ttl_seconds: 3600 });
    const gone = await postMessage(server.url, short.key, short.ch, { content: "expires" });
    const kept = await postMessage(server.url, long.key, long.ch, { content: "stays" });
    clock.advanceSeconds(301);
    await purge(db, clock.now());
    expect((await history(short.key, short.ch)).data.map((m) => m.id)).toEqual([gone.id]);
    expect((await listMessages(server.url, long.key, long.ch)).data.map((m) => m.id)).toEqual([kept.id]);
    expect((await history(long.key, long.ch)).data).toEqual([]);
  });
});

describe("purge", () => {
  it("archives an expired message to history: every Message field, active false, archived_at", async () => {
    const { key, ch } = await shortLivedChannel();
    const message = await postMessage(server.url, key, ch, { content: "to archive", metadata: { n: 1 }, actor_label: "bot" });
    await rest(server.url, "POST", `/v1/messages/${message.id}/claim`, { key });
    await rest(server.url, "POST", `/v1/messages/${message.id}/ack`, { key });
    clock.advanceSeconds(301);
    const now = clock.now();
    const counts = await purge(db, now);
    expect(counts.archivedMessages).toBe(1);
    expect(await count("messages WHERE id = $1", [message.id])).toBe(0);

    const page = await history(key, ch);
    expect(page.data).toHaveLength(1);
    const item = page.data[0]!;
    expect(item).toMatchObject({
      id: message.id,
      channel_id: ch,
      content: "to archive",
      metadata: { n: 1 },
      actor_label: "bot",
      actor: null,
      created_at: message.created_at,
      expires_at: message.expires_at,
      claimed_by_key_id: expect.any(String),
      mentions: [],
      active: false,
      archived_at: formatTimestamp(now),
      delivery_count: 1,
    });
    expect(item.claimed_by).not.toBeNull();
    expect(item.acknowledged_by).toHaveLength(1);
  });

  it("deletes history retention_days after archiving, not before", async () => {
    const { key, ch } = await shortLivedChannel({ retention_days: 1 });
    const message = await postMessage(server.url, key, ch, { content: "kept one day" });
    clock.advanceSeconds(301);
    await purge(db, clock.now());
    expect((await history(key, ch)).data.map((m) => m.id)).toEqual([message.id]);
    clock.advanceSeconds(DAY - 10);
    expect((await purge(db, clock.now())).deletedHistory).toBe(0);
    expect((await history(key, ch)).data.map((m) => m.id)).toEqual([message.id]);
    clock.advanceSeconds(10);
    expect((await purge(db, clock.now())).deletedHistory).toBe(1);
    expect((await history(key, ch)).data).toEqual([]);
  });

  it("changes nothing when it runs a second time", async () => {
    const { key, ch } = await shortLivedChannel({ max_messages: 10 });
    for (const content of ["a", "b", "c"]) await postMessage(server.url, key, ch, { content });
    await rest(server.url, "POST", `/v1/channels/${ch}/messages`, { key, body: { content: "d" }, headers: { "Idempotency-Key": "twice" } });
    clock.advanceSeconds(2 * DAY);
    const now = clock.now();
    const snapshot = async () =>
      (
        await server.app.pool.query(
          `SELECT (SELECT json_agg(h ORDER BY h.id) FROM message_history h WHERE h.channel_id = $1) AS history,
                  (SELECT count(*) FROM messages m WHERE m.channel_id = $1) AS live,
                  (SELECT stored_messages FROM channels WHERE id = $1) AS counter,
                  (SELECT count(*) FROM idempotency_records) AS records`,
          [ch],
        )
      ).rows[0];
    const first = await purge(db, now);
    expect(first.archivedMessages).toBeGreaterThanOrEqual(4);
    const after = await snapshot();
    const second = await purge(db, now);
    expect(second).toEqual({
      archivedMessages: 0,
      deletedHistory: 0,
      deletedIdempotencyRecords: 0,
      deletedChannelEvents: 0,
      deletedInvitations: 0,
      deletedAccessRequests: 0,
      deletedWebhookDeliveries: 0,
      deletedMentionWindows: 0,
      deletedWebhookDestinations: 0,
      expiredJobResults: 0,
      deletedJobs: 0,
      deletedSessions: 0,
      deletedAuditEvents: 0,
      deletedIdleGroups: 0,
      deletedWaitpoints: 0,
      deletedScheduleRuns: 0,
      deletedPushConfigs: 0,
    });
    expect(await snapshot()).toEqual(after);
  });

  it("keeps stored_messages exact, so the ring buffer still keeps the newest max_messages", async () => {
    const { key, ch } = await shortLivedChannel({ max_messages: 3 });
    await postMessage(server.url, key, ch, { content: "old 1" });
    await postMessage(server.url, key, ch, { content: "old 2" });
    clock.advanceSeconds(301);
    expect((await purge(db, clock.now())).archivedMessages).toBe(2);
    expect(await storedCounter(ch)).toEqual({ counter: 0, rows: 0 });
    clock.reset();
    for (const n of [1, 2, 3, 4, 5]) await postMessage(server.url, key, ch, { content: `new ${n}` });
    // A counter left at 2 would make the next writes drop two messages too many.
    expect(await storedCounter(ch)).toEqual({ counter: 3, rows: 3 });
    expect((await listMessages(server.url, key, ch)).data.map((m) => m.content)).toEqual(["new 3", "new 4", "new 5"]);
  });

  it("works through a backlog in bounded batches", async () => {
    const { key, ch } = await shortLivedChannel();
    for (let i = 0; i < 25; i++) await postMessage(server.url, key, ch, { content: `m${i}` });
    clock.advanceSeconds(301);
    let batches = 0;
    const counts = await purge(db, clock.now(), { batchSize: 10, onBatch: async () => void batches++ });
    expect(counts.archivedMessages).toBe(25);
    expect(batches).toBeGreaterThanOrEqual(3);
    expect(await storedCounter(ch)).toEqual({ counter: 0, rows: 0 });
    expect(await count("message_history WHERE channel_id = $1", [ch])).toBe(25);
  });

  it("stops between batches when its signal is aborted", async () => {
    const { key, ch } = await shortLivedChannel();
    for (let i = 0; i < 5; i++) await postMessage(server.url, key, ch, { content: `m${i}` });
    clock.advanceSeconds(301);
    const stop = new AbortController();
    const counts = await purge(db, clock.now(), { batchSize: 2, signal: stop.signal, onBatch: async () => stop.abort() });
    expect(counts.archivedMessages).toBe(2);
    expect(await storedCounter(ch)).toEqual({ counter: 3, rows: 3 });
  });

  it("deletes idempotency records once their 24-hour window has passed", async () => {
    const { key, ch } = await shortLivedChannel();
    const res = await rest(server.url, "POST", `/v1/channels/${ch}/messages`, {
      key,
      body: { content: "once" },
      headers: { "Idempotency-Key": "expiring-record" },
    });
    expect(res.status).toBe(201);
    const records = () => count("idempotency_records WHERE idempotency_key = $1", ["expiring-record"]);
    await purge(db, clock.now());
    expect(await records()).toBe(1);
    clock.advanceSeconds(DAY + 60);
    expect((await purge(db, clock.now())).deletedIdempotencyRecords).toBeGreaterThanOrEqual(1);
    expect(await records()).toBe(0);
  });

  it("deletes expired channel events and expired or revoked invitations", async () => {
    const { key, ch } = await shortLivedChannel();
    const keyId = key.split(".")[0]!;
    const pool = server.app.pool;
    await pool.query(
      `INSERT INTO channel_invitations (id, channel_id, owner_id, created_by_key_id, created_at, expires_at, revoked_at) VALUES
         ('inv-live', $1, 'o', $2, now(), now() + interval '1 day', NULL),
         ('inv-revoked', $1, 'o', $2, now(), now() + interval '1 day', now()),
         ('inv-expired', $1, 'o', $2, now() - interval '2 days', now() - interval '1 day', NULL)`,
      [ch, keyId],
    );
    await pool.query(
      `INSERT INTO channel_events (channel_id, event_type, actor_key_id, created_at, expires_at) VALUES
         ($1, 'member_added', $2, now() - interval '2 days', now() - interval '1 day'),
         ($1, 'member_removed', $2, now(), now() + interval '1 day')`,
      [ch, keyId],
    );
    const counts = await purge(db, clock.now());
    expect(counts.deletedInvitations).toBe(2);
    expect(counts.deletedChannelEvents).toBe(1);
    const { rows } = await pool.query<{ id: string }>("SELECT id FROM channel_invitations WHERE channel_id = $1", [ch]);
    expect(rows.map((r) => r.id)).toEqual(["inv-live"]);
    expect(await count("channel_events WHERE channel_id = $1", [ch])).toBe(1);
  });
});

describe("the purge of access requests", () => {
  it("deletes requests decided more than 7 days ago, and never a pending one however old", async () => {
    const { key, ch } = await shortLivedChannel();
    const keyId = key.split(".")[0]!;
    const pool = server.app.pool;
    const { rows } = await pool.query<{ id: string; label: string }>(
      `INSERT INTO access_requests (channel_id, requester_key_id, status, created_at, resolved_at, resolved_by_key_id) VALUES
         ($1, 'old-approved', 'approved', $2::timestamptz - interval '9 days', $2::timestamptz - interval '8 days', $3),
         ($1, 'old-denied',   'denied',   $2::timestamptz - interval '9 days', $2::timestamptz - interval '7 days 1 minute', $3),
         ($1, 'recent',       'approved', $2::timestamptz - interval '2 days', $2::timestamptz - interval '6 days', $3),
         ($1, 'ancient-pending', 'pending', $2::timestamptz - interval '90 days', NULL, NULL)
       RETURNING id, requester_key_id AS label`,
      [ch, formatTimestamp(clock.now()), keyId],
    );
    expect(rows).toHaveLength(4);
    const counts = await purge(db, clock.now());
    expect(counts.deletedAccessRequests).toBe(2);
    const left = await pool.query<{ requester_key_id: string }>("SELECT requester_key_id FROM access_requests WHERE channel_id = $1 ORDER BY requester_key_id", [ch]);
    expect(left.rows.map((r) => r.requester_key_id)).toEqual(["ancient-pending", "recent"]);
  });
});

describe("the purge of webhook destinations", () => {
  it("deletes circuit-breaker rows idle for more than 7 days, and never a breaker still open", async () => {
    const pool = server.app.pool;
    const tag = `purge-${clock.now()}`;
    await pool.query(
      `INSERT INTO webhook_destinations (destination, consecutive_failures, trips, open_until, updated_at) VALUES
         ($2 || '-idle-closed:80',  0, 0, NULL,                                   $1::timestamptz - interval '8 days'),
         ($2 || '-idle-expired:80', 5, 2, $1::timestamptz - interval '7 days',    $1::timestamptz - interval '7 days 1 minute'),
         ($2 || '-idle-open:80',    9, 6, $1::timestamptz + interval '1 hour',    $1::timestamptz - interval '30 days'),
         ($2 || '-recent:80',       3, 1, $1::timestamptz - interval '1 hour',    $1::timestamptz - interval '6 days')`,
      [formatTimestamp(clock.now()), tag],
    );
    const counts = await purge(db, clock.now());
    expect(counts.deletedWebhookDestinations).toBe(2);
    const left = await pool.query<{ destination: string }>(
      "SELECT destination FROM webhook_destinations WHERE destination LIKE $1 || '%' ORDER BY destination",
      [tag],
    );
    expect(left.rows.map((r) => r.destination)).toEqual([`${tag}-idle-open:80`, `${tag}-recent:80`]);
  });
});

describe("GET /v1/channels/{identifier}/history", () => {
  it("shows a retracted message at once", async () => {
    const { key, ch } = await shortLivedChannel();
    const message = await postMessage(server.url, key, ch, { content: "take it back" });
    const res = await rest(server.url, "DELETE", `/v1/messages/${message.id}`, { key });
    expect(res.status).toBe(200);
    const page = await history(key, ch);
    expect(page.data.map((m) => [m.id, m.active])).toEqual([[message.id, false]]);
    expect(page.data[0]!.archived_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
  });

  it("pages newest first without duplicates or gaps, retracted and expired alike", async () => {
    const { key, ch } = await shortLivedChannel();
    const posted: MessageJson[] = [];
    for (let i = 0; i < 7; i++) posted.push(await postMessage(server.url, key, ch, { content: `m${i}` }));
    for (const m of [posted[1]!, posted[4]!]) expect((await rest(server.url, "DELETE", `/v1/messages/${m.id}`, { key })).status).toBe(200);
    clock.advanceSeconds(301);
    await purge(db, clock.now());

    const seen: string[] = [];
    const pages: number[] = [];
    let cursor: string | null = "0";
    while (cursor !== null) {
      const page = await history(key, ch, `?limit=3&cursor=${encodeURIComponent(cursor)}`);
      expect(page.limit).toBe(3);
      seen.push(...page.data.map((m) => m.id));
      pages.push(page.data.length);
      cursor = page.next_cursor;
      if (page.data.length === 3) expect(cursor).toBe(page.data[2]!.created_at);
    }
    expect(pages).toEqual([3, 3, 1]);
    expect(seen).toEqual(posted.map((m) => m.id).reverse());
  });

  it("answers a full last page with a cursor whose next page is empty", async () => {
    const { key, ch } = await shortLivedChannel();
    for (let i = 0; i < 4; i++) await postMessage(server.url, key, ch, { content: `m${i}` });
    clock.advanceSeconds(301);
    await purge(db, clock.now());
    const first = await history(key, ch, "?limit=2");
    const second = await history(key, ch, `?limit=2&cursor=${encodeURIComponent(first.next_cursor!)}`);
    expect(second.data).toHaveLength(2);
    expect(second.next_cursor).not.toBeNull();
    const third = await history(key, ch, `?limit=2&cursor=${encodeURIComponent(second.next_cursor!)}`);
    expect(third).toEqual({ data: [], limit: 2, next_cursor: null });
  });

  it("defaults to 50 items from the newest", async () => {
    const { key, ch } = await shortLivedChannel();
    const page = await history(key, ch);
    expect(page).toEqual({ data: [], limit: 50, next_cursor: null });
  });

  it("refuses a malformed cursor with 422 invalid_cursor", async () => {
    const { key, ch } = await shortLivedChannel();
    const res = await rest(server.url, "GET", `/v1/channels/${ch}/history?cursor=yesterday`, { key });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("invalid_cursor");
  });

  it("refuses a limit outside 1..100 with 422 invalid_limit", async () => {
    const { key, ch } = await shortLivedChannel();
    for (const limit of ["0", "101", "ten"]) {
      const res = await rest(server.url, "GET", `/v1/channels/${ch}/history?limit=${limit}`, { key });
      expect(res.status, limit).toBe(422);
      expect(res.body.error).toBe("invalid_limit");
    }
  });

  it("answers 404 channel_not_found for an unknown channel", async () => {
    const key = await mintKey(server.url);
    const res = await rest(server.url, "GET", "/v1/channels/no-such-channel/history", { key });
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("channel_not_found");
  });

  it("answers 403 channel_access_denied to a stranger of a restricted channel, and serves its owner", async () => {
    const { key, ch } = await shortLivedChannel({ access: "restricted" });
    const stranger = await mintKey(server.url);
    const res = await rest(server.url, "GET", `/v1/channels/${ch}/history`, { key: stranger });
    expect(res.status).toBe(403);
    expect(res.body.error).toBe("channel_access_denied");
    expect((await rest(server.url, "GET", `/v1/channels/${ch}/history`, { key })).status).toBe(200);
  });

  it("lets any key read the history of an open channel", async () => {
    const { key, ch } = await shortLivedChannel();
    const message = await postMessage(server.url, key, ch, { content: "public" });
    await rest(server.url, "DELETE", `/v1/messages/${message.id}`, { key });
    const reader = await mintKey(server.url);
    expect((await history(reader, ch)).data.map((m) => m.id)).toEqual([message.id]);
  });
});

describe("ListChannelHistory over gRPC", () => {
  it("returns the same page as REST", async () => {
    const { key, ch } = await shortLivedChannel();
    const a = await postMessage(server.url, key, ch, { content: "first" });
    const b = await postMessage(server.url, key, ch, { content: "second" });
    clock.advanceSeconds(301);
    await purge(db, clock.now());
    const client = createClient(ChannelService, createGrpcTransport({ baseUrl: server.url }));
    const page = await client.listChannelHistory({ identifier: ch, limit: 1 }, { headers: { "x-api-key": key } });
    expect(page.data.map((m) => m.id)).toEqual([b.id]);
    expect(page.data[0]!.active).toBe(false);
    expect(page.data[0]!.archivedAt).toBeDefined();
    expect(page.nextCursor).toBe(b.created_at);
    const next = await client.listChannelHistory({ identifier: ch, cursor: page.nextCursor, limit: 1 }, { headers: { "x-api-key": key } });
    expect(next.data.map((m) => m.id)).toEqual([a.id]);
  });

  it("reports a stranger of a restricted channel as PermissionDenied", async () => {
    const { ch } = await shortLivedChannel({ access: "restricted" });
    const stranger = await mintKey(server.url);
    const client = createClient(ChannelService, createGrpcTransport({ baseUrl: server.url }));
    const err = await client.listChannelHistory({ identifier: ch }, { headers: { "x-api-key": stranger } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.PermissionDenied);
    expect(ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error).toBe("channel_access_denied");
  });
});
