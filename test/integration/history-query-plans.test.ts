/**
 * The history page and the purge must stay index-driven as history grows:
 * EXPLAIN the exact statements (custom and generic plans) over a channel
 * with 100,000 archived messages and another with 20,000.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { formatTimestamp, systemClock } from "../../src/model/time.js";
import { HISTORY_PAGE_SQL } from "../../src/store/history.js";
import { EXPIRED_CANDIDATES_SQL, EXPIRED_HISTORY_SQL, EXPIRED_IDEMPOTENCY_SQL } from "../../src/store/purge.js";
import { useTestDatabase } from "../support/database.js";
import { analyze, explainPlans, now } from "../support/query-plans.js";

const db = useTestDatabase();
let channelId: string;

beforeAll(async () => {
  await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ('ak_plan', '\\x00', 'plan', 'plan')");
  const channel = (name: string, offset: string) =>
    db.pool.query<{ id: string }>(
      `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, created_at, updated_at)
       VALUES ($1, 'claimable', 'open', true, 'plan', 'ak_plan', 86400, 7, now() - $2::interval, now()) RETURNING id`,
      [name, offset],
    );
  const other = (await channel("noise", "1 second")).rows[0]!.id;
  channelId = (await channel("big", "0 seconds")).rows[0]!.id;
  for (const [ch, n] of [
    [channelId, 100_000],
    [other, 20_000],
  ] as const) {
    await db.pool.query(
      `INSERT INTO message_history (channel_id, author_key_id, content, created_at, expires_at, archived_at, reason)
       SELECT $1, 'ak_plan', 'old ' || i, now() - interval '3 days' + i * interval '1 millisecond',
              now() - interval '2 days' + i * interval '1 millisecond', now() - interval '2 days', 'expired'
       FROM generate_series(1, $2::int) AS i`,
      [ch, n],
    );
    // Live messages, a few of them expired: what the purge looks for.
    await db.pool.query(
      `INSERT INTO messages (channel_id, author_key_id, content, created_at, expires_at)
       SELECT $1, 'ak_plan', 'live ' || i, now() - interval '1 hour' + i * interval '1 millisecond',
              now() + CASE WHEN i % 1000 = 0 THEN interval '-1 minute' ELSE interval '1 day' END
       FROM generate_series(1, $2::int) AS i`,
      [ch, n],
    );
  }
  await db.pool.query(
    `INSERT INTO idempotency_records (key_id, idempotency_key, request_hash, response, status, expires_at)
     SELECT 'ak_plan', 'k' || i, '\\x00', '\\x00', 201, now() + CASE WHEN i % 1000 = 0 THEN interval '-1 minute' ELSE interval '1 day' END
     FROM generate_series(1, 100000) AS i`,
  );
  await analyze(db.pool, ["idempotency_records", "message_history", "messages", "channels"]);
}, 120_000);

const plans = (sql: string, params: unknown[]) => explainPlans(db.pool, sql, params);

describe("query plans over 120,000 history rows (custom and generic)", () => {
  it("pages history newest first straight off message_history_page, with no sort", async () => {
    for (const cursor of ["infinity", formatTimestamp(systemClock.now() - 2.5 * 86_400_000_000)]) {
      for (const text of await plans(HISTORY_PAGE_SQL, [channelId, cursor, 50])) {
        expect(text).toMatch(/Index Scan using message_history_page/);
        // A sort of the page; a row's limit names (a subplan over its own few ids) may be sorted.
        expect(text).not.toMatch(/Sort Key: (m|h)\./);
        expect(text).not.toMatch(/Seq Scan on message_history/);
      }
    }
  });

  it("finds expired messages through messages_expiry", async () => {
    for (const text of await plans(EXPIRED_CANDIDATES_SQL, [now(), 1000])) {
      expect(text).toMatch(/messages_expiry/);
      expect(text).not.toMatch(/Seq Scan on messages/);
    }
  });

  it("finds history past retention per channel through message_history_retention, and deletes by primary key", async () => {
    for (const text of await plans(EXPIRED_HISTORY_SQL, [now(), 1000])) {
      expect(text).toMatch(/message_history_retention/);
      expect(text).toMatch(/message_history_pkey/);
      expect(text).not.toMatch(/Seq Scan on message_history/);
    }
  });

  it("finds and deletes expired idempotency records through their expiry index", async () => {
    for (const text of await plans(EXPIRED_IDEMPOTENCY_SQL, [now(), 1000])) {
      expect(text).toMatch(/idempotency_records_expiry/);
      expect(text).not.toMatch(/Seq Scan on idempotency_records/);
    }
  });
});
