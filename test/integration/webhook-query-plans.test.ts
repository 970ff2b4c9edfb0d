/**
 * The webhook statements keep to their indexes as the tables grow: the
 * dispatcher's claim on an outbox of 50,000 pending retries of one key and
 * 10,000 due rows of another among 200 keys with a few each, and the
 * owner's log page of one channel among many (custom and generic plans).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { OLD_WEBHOOK_DELIVERIES_SQL } from "../../src/store/purge.js";
import { CLAIM_SCAN_ROWS_PER_OWNER, CLAIM_SQL } from "../../src/store/webhook-claim.js";
import { DELIVERY_LOG_SQL } from "../../src/store/webhooks.js";
import { useTestDatabase } from "../support/database.js";
import { analyze, explainPlans, now } from "../support/query-plans.js";

const db = useTestDatabase();
let channelId: string;

beforeAll(async () => {
  await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ('ak_plan', '\\x00', 'plan', 'plan')");
  const ids: string[] = [];
  for (const name of ["hooked", "noise"]) {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, webhook_url, created_at, updated_at)
       VALUES ($1, 'broadcast', 'open', true, 'plan', 'ak_plan', 86400, 7, 'https://example.com/hook', clock_timestamp(), now()) RETURNING id`,
      [name],
    );
    ids.push(rows[0]!.id);
  }
  channelId = ids[0]!;
  // A receiver that has been down for hours: every row waits for a retry.
  await db.pool.query(
    `INSERT INTO webhook_outbox (channel_id, event, message_id, attempts, next_attempt_at)
     SELECT $1, 'message.created', gen_random_uuid(), 3, now() + (i % 3600) * interval '1 second' FROM generate_series(1, 50000) i`,
    [channelId],
  );
  // A key flooding the outbox with due rows, and 200 keys with three due rows each.
  await db.pool.query(
    `INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id)
     SELECT 'ak_owner_' || i, '\\x00', 'owner ' || i, 'owner ' || i FROM generate_series(0, 200) i`,
  );
  await db.pool.query(
    `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, webhook_url, created_at, updated_at)
     SELECT 'owned ' || i, 'broadcast', 'open', false, 'owner ' || i, 'ak_owner_' || i, 86400, 7, 'https://owner-' || i || '.example/hook', clock_timestamp(), now()
     FROM generate_series(0, 200) i`,
  );
  await db.pool.query(
    `INSERT INTO webhook_outbox (channel_id, event, message_id)
     SELECT c.id, 'message.created', gen_random_uuid() FROM channels c CROSS JOIN generate_series(1, 10000) i WHERE c.name = 'owned 0'`,
  );
  await db.pool.query(
    `INSERT INTO webhook_outbox (channel_id, event, message_id)
     SELECT c.id, 'message.created', gen_random_uuid() FROM channels c CROSS JOIN generate_series(1, 3) i WHERE c.name LIKE 'owned %' AND c.name <> 'owned 0'`,
  );
  // The log of a channel with 2,000 attempts among 50 busier channels' 50,000.
  await db.pool.query(
    `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, created_at, updated_at)
     SELECT 'noise ' || i, 'broadcast', 'open', true, 'plan', 'ak_plan', 86400, 7, now() + i * interval '1 second', now()
     FROM generate_series(1, 50) i`,
  );
  await db.pool.query(
    `INSERT INTO webhook_deliveries (delivery_id, channel_id, event, message_id, attempt, status, response_status, duration_ms, attempted_at)
     SELECT gen_random_uuid(), c.id, 'message.created', gen_random_uuid(), 1, 'failed', 500, 3, now() - i * interval '10 seconds'
     FROM channels c CROSS JOIN generate_series(1, 1000) i WHERE c.name LIKE 'noise %'`,
  );
  await db.pool.query(
    `INSERT INTO webhook_deliveries (delivery_id, channel_id, event, message_id, attempt, status, response_status, duration_ms, attempted_at)
     SELECT gen_random_uuid(), $1, 'message.created', gen_random_uuid(), 1, 'failed', 500, 3, now() - i * interval '10 seconds'
     FROM generate_series(1, 2000) i`,
    [channelId],
  );
  await analyze(db.pool, ["webhook_outbox", "webhook_deliveries"]);
}, 120_000);

const plans = (sql: string, params: unknown[]) => explainPlans(db.pool, sql, params);

describe("webhook query plans", () => {
  it("walks the owners and each owner's first due rows one index step at a time along webhook_outbox_owner_due, never reading an owner's whole backlog", async () => {
    // $4/$5 destinations this dispatcher has in flight and their free slots, $6 per destination, $7 rows looked at per owner,
    // $8/$9/$10 owners it served lately, their requests in flight and when, $11 per owner.
    const params = [now(), 16, now(), ["busy.example:443"], [1], 2, CLAIM_SCAN_ROWS_PER_OWNER, ["ak_owner_1", "ak_plan"], [1, 0], [now(), now()], 4];
    for (const text of await plans(CLAIM_SQL, params)) {
      expect(text).toMatch(/Recursive Union/);
      // The next due row of the same owner, and the first row of the next owner: each one descent of the index, in its order.
      expect(text).toMatch(/Index Scan using webhook_outbox_owner_due on webhook_outbox \w+ .*\n\s+Index Cond: \(\(owner_key_id = \w+\.owner_key_id\) AND \(ROW\(next_attempt_at, created_at, id\) > /);
      expect(text).toMatch(/Index Scan using webhook_outbox_owner_due on webhook_outbox \w+ .*\n\s+Index Cond: \(owner_key_id > \w+\.owner_key_id\)/);
      // Never all of one owner's rows (a bitmap), never the outbox's whole due range, never the table.
      expect(text).not.toMatch(/Bitmap Index Scan on webhook_outbox_owner_due/);
      expect(text).not.toMatch(/webhook_outbox_due/);
      expect(text).not.toMatch(/Seq Scan on webhook_outbox/);
      // The chosen rows are locked and leased by primary key.
      expect(text).toMatch(/Index Cond: \(id = ANY/);
    }
  });

  it("reads a page of the log along the channel's own entries", async () => {
    for (const params of [
      [channelId, null, 50],
      [channelId, "51000", 50],
    ]) {
      for (const text of await plans(DELIVERY_LOG_SQL, params)) {
        expect(text).toMatch(/Index Scan( Backward)? using webhook_deliveries_(channel_log|pkey)/);
        expect(text).not.toMatch(/Seq Scan on webhook_deliveries/);
        expect(text).not.toMatch(/Sort/);
      }
    }
  });

  it("purges old log rows along webhook_deliveries_age", async () => {
    for (const text of await plans(OLD_WEBHOOK_DELIVERIES_SQL, [now(), 1000])) {
      expect(text).toMatch(/webhook_deliveries_age/);
    }
  });
});
