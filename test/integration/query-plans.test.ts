/**
 * The planner must keep using the indexes as a channel grows: EXPLAIN the
 * exact list and claim statements on a channel holding 100,000 messages.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { ACK_SQL, CLAIM_SQL } from "../../src/store/claim-sql.js";
import { LIST_SQL, NEXT_DUE_SQL, STATS_SQL } from "../../src/store/message-reads-sql.js";
import { RECEIVE_SQL } from "../../src/store/receive-sql.js";
import { useTestDatabase } from "../support/database.js";
import { analyze, explainPlans, now } from "../support/query-plans.js";

const db = useTestDatabase();
let channelId: string;
let someMessageId: string;
let smallChannelId: string;

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
  const small = await db.pool.query<{ id: string }>(
    `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, created_at, updated_at)
     VALUES ('small', 'claimable', 'open', true, 'plan', 'ak_plan', 86400, 7, now() + interval '1 second', now()) RETURNING id`,
  );
  smallChannelId = small.rows[0]!.id;
  // 100,000 messages in the hot channel, most of them claimed (a busy work
  // queue), 20,000 in another channel so the index must discriminate, and a
  // small queue beside them.
  for (const [ch, n] of [
    [channelId, 100_000],
    [other.rows[0]!.id, 20_000],
    [smallChannelId, 500],
  ] as const) {
    await db.pool.query(
      `INSERT INTO messages (channel_id, author_key_id, content, created_at, expires_at, claimed_by_key_id, claimed_at)
       SELECT $1, 'ak_plan', 'task ' || i, now() - interval '1 hour' + i * interval '1 millisecond', now() + interval '1 day',
              CASE WHEN i % 10 = 0 THEN NULL ELSE 'ak_plan' END, CASE WHEN i % 10 = 0 THEN NULL ELSE now() END
       FROM generate_series(1, $2::int) AS i`,
      [ch, n],
    );
  }
  // Many other small queues, as a shared deployment has: the generic plan
  // then expects a channel to be a small part of the table, as it is.
  await db.pool.query(
    `WITH c AS (
       INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, created_at, updated_at)
       SELECT 'queue ' || i, 'claimable', 'open', false, 'plan', 'ak_plan', 86400, 7, now() - interval '1 minute' + i * interval '1 millisecond', now()
       FROM generate_series(1, 300) AS i RETURNING id
     )
     INSERT INTO messages (channel_id, author_key_id, content, created_at, expires_at)
     SELECT c.id, 'ak_plan', 'small task', now() - interval '2 hours' + j * interval '1 millisecond', now() + interval '1 day'
     FROM c, generate_series(1, 20) AS j`,
  );
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

  it("acknowledges a batch through the primary key, locking the rows in id order", async () => {
    const ids = (await db.pool.query<{ id: string }>("SELECT id FROM messages WHERE channel_id = $1 LIMIT 10", [channelId])).rows.map((r) => r.id);
    const each = <T>(value: T) => ids.map(() => value);
    for (const text of await plans(ACK_SQL, [ids, each("ak_plan"), each(someMessageId), each("w"), each(now()), each(null), each("{}")])) {
      expect(text).toMatch(/LockRows[\s\S]*Sort[\s\S]*Sort Key: l\.id/);
      expect(text).toMatch(/messages_pkey/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
  });

  it("claims through the primary key", async () => {
    for (const text of await plans(CLAIM_SQL, [someMessageId, "ak_plan", someMessageId, "w", now(), null, null, null])) {
    expect(text).toMatch(/Index Scan using messages_pkey/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
  });

  it("finds when the next delayed message falls due or lease runs out through the partial indexes of delayed and leased messages", async () => {
    for (const text of await plans(NEXT_DUE_SQL, [channelId, now()])) {
      expect(text).toMatch(/messages_delayed/);
      expect(text).toMatch(/messages_leases/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
  });

  it("receives open work through the partial indexes of unclaimed messages by priority and leases", async () => {
    const tokens = Array.from({ length: 10 }, (_, i) => `lease_plan_${i}`);
    for (const text of await plans(RECEIVE_SQL, [channelId, now(), ["ak_plan"], [someMessageId], ["w"], [10], [now()], tokens, [null]])) {
      expect(text).toMatch(/messages_open_by_priority/);
      expect(text).toMatch(/messages_leases/);
      expect(text).toMatch(/Index Scan using messages_pkey/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
  });

  // The big channel is most of the table, where reading it whole is the better plan.
  it("counts a small channel's queue state over its own rows only, and its dead letters through the history index", async () => {
    for (const text of await plans(STATS_SQL, [smallChannelId, now()])) {
      expect(text).toMatch(/messages_channel_order/);
      expect(text).toMatch(/message_history_(by_channel|page|retention)/);
      expect(text).not.toMatch(/Seq Scan on messages/);
      expect(text).not.toMatch(/Seq Scan on message_history/);
    }
  });
});
