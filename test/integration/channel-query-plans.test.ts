/**
 * Resolving `{identifier}` (docs/decisions.md#channel-names) runs on every
 * channel call, posts included: EXPLAIN the exact statement (custom and
 * generic plans) over 40,000 channels, 20,000 of them one key's, and check
 * that each branch — id, alias, owned name — is an index probe.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { CHANNEL_VIEW_SQL } from "../../src/store/channels.js";
import { useTestDatabase } from "../support/database.js";
import { analyze, explainPlans } from "../support/query-plans.js";

const db = useTestDatabase();
let someId: string;

beforeAll(async () => {
  await db.pool.query(
    `INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id)
     SELECT 'ak_plan_' || k, '\\x00', 'plan-' || k, 'plan-' || k FROM generate_series(0, 1) AS k`,
  );
  // Key 0 holds half the channels, under 5,000 names (four channels each); key 1 the other half.
  await db.pool.query(
    `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, created_at, updated_at)
     SELECT 'ch ' || (i % 5000), 'claimable', 'open', true, 'plan-' || (i % 2), 'ak_plan_' || (i % 2), 86400, 7,
            now() - i * interval '1 millisecond', now()
     FROM generate_series(1, 40000) AS i`,
  );
  await db.pool.query(
    `INSERT INTO channel_aliases (alias, channel_id, alias_key)
     SELECT 'alias ' || n, id, 'alias ' || n FROM (SELECT id, row_number() OVER (ORDER BY created_at) AS n FROM channels) c`,
  );
  someId = (await db.pool.query<{ id: string }>("SELECT id FROM channels LIMIT 1")).rows[0]!.id;
  await analyze(db.pool, ["channels", "channel_aliases", "channel_members"]);
}, 120_000);

const plans = (params: unknown[]) => explainPlans(db.pool, CHANNEL_VIEW_SQL, params);

describe("resolving an identifier over 40,000 channels (custom and generic plans)", () => {
  it("finds an owned name through channels_by_owner_key_and_name, with no sequential scan", async () => {
    for (const text of await plans([null, "ch 42", "ak_plan_0"])) {
      expect(text).toMatch(/channels_by_owner_key_and_name/);
      expect(text).not.toMatch(/Seq Scan on channels/);
    }
  });

  it("finds an id through the primary key and an alias through channel_aliases' primary key", async () => {
    for (const text of await plans([someId, someId, "ak_plan_0"])) {
      expect(text).toMatch(/channels_pkey/);
      expect(text).toMatch(/channel_aliases_pkey/);
      expect(text).not.toMatch(/Seq Scan on channels/);
      expect(text).not.toMatch(/Seq Scan on channel_aliases/);
    }
  });
});
