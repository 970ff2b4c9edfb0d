/**
 * Planner statistics (docs/decisions.md#planner-statistics): on a freshly
 * written table that nobody analysed (autovacuum is off for it here, as a
 * burst outruns it in production), the service's own check analyses the hot
 * tables once they changed enough, and from then on the list, receive,
 * claim and history statements run their intended index plans, custom and
 * generic. The check is bounded: nothing changed, nothing analysed; two
 * replicas never analyse at once.
 */
import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { HISTORY_PAGE_SQL } from "../../src/store/history.js";
import { CLAIM_SQL } from "../../src/store/claim-sql.js";
import { LIST_SQL } from "../../src/store/message-reads-sql.js";
import { RECEIVE_SQL } from "../../src/store/receive-sql.js";
import { Db } from "../../src/store/db.js";
import { MIN_CHANGES, PgStatistics } from "../../src/store/statistics.js";
import { useTestDatabase } from "../support/database.js";
import { eventually } from "../support/eventually.js";
import { createChannel } from "../support/fixtures.js";
import { mintKey, rest, startTestServer } from "../support/server.js";
import { explainPlans, now } from "../support/query-plans.js";

const db = useTestDatabase();
const statistics = () => new PgStatistics(new Db(db.pool));
const MESSAGES = 9_227;
let channelId: string;
let someMessageId: string;

const analysed = async (table: string) =>
  (await db.pool.query<{ n: number }>("SELECT (analyze_count + autoanalyze_count)::int AS n FROM pg_stat_user_tables WHERE relname = $1", [table])).rows[0]!.n;

/** Runs fn on a connection of its own, then makes its statistics visible (backends report them when idle). */
async function withWriter(fn: (writer: pg.Client) => Promise<unknown>): Promise<void> {
  const writer = new pg.Client({ connectionString: db.url });
  await writer.connect();
  try {
    await fn(writer);
    await writer.query("SELECT pg_stat_force_next_flush()");
    await writer.query("SELECT 1");
  } finally {
    await writer.end();
  }
}

/** n messages through the write path. */
const write = (writer: pg.Client, ch: string, n: number) =>
  writer.query("SELECT * FROM agentbus_create_messages($1, $2, $3, $4, $5, $6, $7::jsonb[], $8::jsonb[])", [
    ch,
    ...["ak_stats", null, null, null, "task", "{}", "[]"].map((v) => Array.from({ length: n }, () => v)),
  ]);

beforeAll(async () => {
  await db.pool.query("ALTER TABLE messages SET (autovacuum_enabled = off)");
  await db.pool.query("ALTER TABLE message_history SET (autovacuum_enabled = off)");
  await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ('ak_stats', '\\x00', 'stats', 'stats')");
  const insertChannel = (name: string) =>
    db.pool.query<{ id: string }>(
      `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, created_at, updated_at)
       VALUES ($1, 'claimable', 'open', true, 'stats', 'ak_stats', 86400, 7, now(), now()) RETURNING id`,
      [name],
    );
  channelId = (await insertChannel("burst")).rows[0]!.id;
  const quiet = (await insertChannel("quiet")).rows[0]!.id;
  await withWriter(async (writer) => {
    for (let written = 0; written < MESSAGES; written += 1_000) await write(writer, channelId, Math.min(1_000, MESSAGES - written));
    await write(writer, quiet, 200);
    // Most of the burst claimed, as in a busy queue; a history of the same size.
    await writer.query("UPDATE messages SET claimed_by_key_id = 'ak_stats', claimed_at = now() WHERE channel_id = $1 AND random() < 0.9", [channelId]);
    await writer.query(
      `INSERT INTO message_history (id, channel_id, author_key_id, content, created_at, expires_at, reason)
       SELECT gen_random_uuid(), $1, 'ak_stats', 'old', now() - interval '2 days' + i * interval '1 millisecond', now() - interval '1 day', 'expired'
       FROM generate_series(1, $2::int) AS i`,
      [channelId, MESSAGES],
    );
  });
  someMessageId = (await db.pool.query<{ id: string }>("SELECT id FROM messages WHERE channel_id = $1 LIMIT 1", [channelId])).rows[0]!.id;
}, 120_000);

describe("the service's planner statistics", () => {
  it("finds the freshly written tables never analysed, and analyses both", async () => {
    expect(await analysed("messages")).toBe(0);
    expect(await analysed("message_history")).toBe(0);
    expect((await statistics().analyzeStale()).sort()).toEqual(["message_history", "messages"]);
    expect(await analysed("messages")).toBe(1);
    expect(await analysed("message_history")).toBe(1);
  });

  it("analyses nothing while the tables' sizes are where the planner believes them", async () => {
    expect(await statistics().analyzeStale()).toEqual([]);
  });

  it("ignores churn: rewriting every row of a queue changes nothing the plans depend on", async () => {
    await withWriter((writer) => writer.query("UPDATE messages SET content = content WHERE channel_id = $1", [channelId]));
    expect(await statistics().analyzeStale()).toEqual([]);
  });

  it("lets one replica analyse at a time: racing checks analyse a grown table once", async () => {
    // Well over MIN_CHANGES plus a tenth of the table's ~9,600 rows.
    await withWriter((writer) => write(writer, channelId, MIN_CHANGES + 2_000));
    const before = await analysed("messages");
    let results: string[][] = [];
    for (let attempt = 0; attempt < 100 && results.flat().length === 0; attempt++) {
      results = await Promise.all([statistics().analyzeStale(), statistics().analyzeStale(), statistics().analyzeStale()]);
      if (results.flat().length === 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(results.flat()).toEqual(["messages"]);
    expect(await analysed("messages")).toBe(before + 1);
  });
});

describe("plans once the service analysed the burst (custom and generic)", () => {
  // Without this check the list and history plans read and sort the whole channel (see the module's comment).
  beforeAll(() => statistics().analyzeStale());
  const plans = (sql: string, params: unknown[]) => explainPlans(db.pool, sql, params);

  it("pages a channel along messages_channel_order, with no sort", async () => {
    for (const filter of ["all", "claimed"] as const) {
      for (const text of await plans(LIST_SQL[filter], [channelId, "-infinity", 50, now()])) {
        expect(text).toMatch(/Index Scan using messages_channel_order/);
        expect(text).not.toMatch(/Sort Key: m\./);
      }
    }
  });

  it("lists and receives open work through the partial indexes", async () => {
    for (const text of await plans(LIST_SQL.unclaimed, [channelId, "-infinity", 50, now()])) {
      expect(text).toMatch(/messages_unclaimed/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
    const tokens = Array.from({ length: 10 }, (_, i) => `lease_stats_${i}`);
    for (const text of await plans(RECEIVE_SQL, [channelId, now(), ["ak_stats"], [someMessageId], ["w"], [10], [now()], tokens, [null]])) {
      expect(text).toMatch(/messages_open_by_priority/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
  });

  it("claims through the primary key", async () => {
    for (const text of await plans(CLAIM_SQL, [someMessageId, "ak_stats", someMessageId, "w", now(), null, null, null])) {
      expect(text).toMatch(/Index Scan using messages_pkey/);
    }
  });

  it("pages history along message_history_page, with no sort", async () => {
    for (const text of await plans(HISTORY_PAGE_SQL, [channelId, "infinity", 50])) {
      expect(text).toMatch(/message_history_page/);
      expect(text).not.toMatch(/Sort Key: m\./);
    }
  });
});

describe("a running service", () => {
  // Its job workers run the check every few seconds (src/jobs/analyze.ts); here every second.
  it("analyses messages on its own after a burst of posts, autovacuum aside (the analyze job)", async () => {
    const quiet = { purge: "1 hour", "webhook-sweep": "1 hour", "job-sweep": "1 hour" };
    const server = await startTestServer({ AGENTBUS_WORKERS: "true" }, { jobs: { processEveryMs: 250, intervals: { ...quiet, analyze: "1 second" } } });
    const sql = new pg.Client({ connectionString: server.databaseUrl });
    await sql.connect();
    try {
      await sql.query("ALTER TABLE messages SET (autovacuum_enabled = off)");
      const key = await mintKey(server.url);
      const ch = await createChannel(server.url, key);
      for (let i = 0; i * 100 < MIN_CHANGES + 100; i++) {
        const messages = Array.from({ length: 100 }, (_, j) => ({ content: `burst ${i}.${j}` }));
        expect((await rest(server.url, "POST", `/v1/channels/${ch}/messages:batchCreate`, { key, body: { messages } })).status).toBe(201);
      }
      // Backends report their counts when idle, within seconds: real time here, bounded.
      await eventually(async () => {
        const { rows } = await sql.query<{ n: number }>("SELECT analyze_count::int AS n FROM pg_stat_user_tables WHERE relname = 'messages'");
        return rows[0]!.n > 0;
      }, 30_000, 200);
    } finally {
      await sql.end();
      await server.close();
    }
  }, 60_000);
});
