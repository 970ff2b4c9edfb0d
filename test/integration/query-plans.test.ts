/**
 * The planner must keep using the indexes as a channel grows: EXPLAIN the
 * exact list and claim statements on a channel holding 100,000 messages.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { CLAIM_SQL, LIST_SQL, NEXT_DUE_SQL, RECEIVE_SQL } from "../../src/store/messages.js";
import { useTestDatabase } from "../support/database.js";
import { analyze, explainPlans, now } from "../support/query-plans.js";

const db = useTestDatabase();
let channelId: string;
let someMessageId: string;

beforeAll(async () => {
  await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ('ak_plan', '\\x00', 'plan', 'plan')");
  const other = await db.pool.query<{ id: string }>(
    `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, created_at, updated_at)
     VALUES ('noise', 'claimable', 'open', true, 'plan', 'ak_plan', 86400, 7, now() - interval '1 second', now()) RETURNING id`,
  );
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, created_at, updated_at)
     VALUES ('big', 'claimable', 'open', true, 'plan', 'ak_plan', 86400, 7, now(), now()) RETURNING id`,
  );
  channelId = rows[0]!.id;
  // 100,000 messages in the hot channel, most of them claimed (a busy work
  // queue), and 20,000 in another channel so the index must discriminate.
  for (const [ch, n] of [
    [channelId, 100_000],
    [other.rows[0]!.id, 20_000],
  ] as const) {
    await db.pool.query(
      `INSERT INTO messages (channel_id, author_key_id, content, created_at, expires_at, claimed_by_key_id, claimed_at)
       SELECT $1, 'ak_plan', 'task ' || i, now() - interval '1 hour' + i * interval '1 millisecond', now() + interval '1 day',
              CASE WHEN i % 10 = 0 THEN NULL ELSE 'ak_plan' END, CASE WHEN i % 10 = 0 THEN NULL ELSE now() END
       FROM generate_series(1, $2::int) AS i`,
      [ch, n],
    );
  }
  someMessageId = (await db.pool.query<{ id: string }>("SELECT id FROM messages WHERE channel_id = $1 LIMIT 1", [channelId])).rows[0]!.id;
  await analyze(db.pool, ["messages", "channels"]);
}, 120_000);

const plans = (sql: string, params: unknown[]) => explainPlans(db.pool, sql, params);

describe("query plans on a channel of 100,000 messages (custom and generic)", () => {
  it("lists with an index range scan on (channel_id, created_at), no sequential scan", async () => {
    for (const text of await plans(LIST_SQL.all, [channelId, "-infinity", 50, now()])) {
    expect(text).toMatch(/Index Scan using messages_channel_order/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
  });

  it("lists open work through the partial index of unclaimed messages", async () => {
    for (const text of await plans(LIST_SQL.unclaimed, [channelId, "-infinity", 50, now()])) {
    expect(text).toMatch(/messages_unclaimed/);
      expect(text).toMatch(/messages_leases/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
  });

  it("lists claimed messages by index", async () => {
    for (const text of await plans(LIST_SQL.claimed, [channelId, "-infinity", 50, now()])) {
    expect(text).toMatch(/Index Scan using messages_channel_order/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
  });

  it("claims through the primary key", async () => {
    for (const text of await plans(CLAIM_SQL, [someMessageId, "ak_plan", someMessageId, "w", now(), null, null, null])) {
    expect(text).toMatch(/Index Scan using messages_pkey/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
  });

  it("finds when the next delayed message falls due through the partial index of delayed messages", async () => {
    for (const text of await plans(NEXT_DUE_SQL, [channelId, now()])) {
      expect(text).toMatch(/messages_delayed/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
  });

  it("receives open work through the partial indexes of unclaimed messages and leases", async () => {
    const tokens = Array.from({ length: 10 }, (_, i) => `lease_plan_${i}`);
    for (const text of await plans(RECEIVE_SQL, [channelId, 10, now(), "ak_plan", someMessageId, "w", tokens, now()])) {
      expect(text).toMatch(/messages_unclaimed/);
      expect(text).toMatch(/messages_leases/);
      expect(text).toMatch(/Index Scan using messages_pkey/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
  });
});
