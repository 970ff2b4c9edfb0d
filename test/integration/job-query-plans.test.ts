/**
 * The purge and the job sweep must walk only what is due as the jobs table
 * grows (0008_async_jobs.sql): EXPLAIN their exact statements over 60,000
 * jobs, most of them finished and already emptied.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { ORPHANED_JOBS_SQL } from "../../src/store/agenda.js";
import { EXPIRED_JOB_RESULTS_SQL, OLD_JOBS_SQL } from "../../src/store/purge.js";
import { useTestDatabase } from "../support/database.js";
import { analyze, now } from "../support/query-plans.js";

const db = useTestDatabase();

beforeAll(async () => {
  await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ('ak_plan', '\\x00', 'plan', 'plan')");
  // 50,000 expired and emptied (tombstones), 5,000 completed with results, 5,000 unfinished.
  await db.pool.query(
    `INSERT INTO jobs (kind, owner_key_id, status, result, created_at, updated_at, completed_at, expires_at)
     SELECT 'pdf', 'ak_plan', 'completed', CASE WHEN i > 50000 THEN '{"url":"/v1/pdf/1"}'::jsonb END,
            now() - interval '3 days', now() - interval '3 days', now() - interval '3 days',
            CASE WHEN i > 50000 THEN now() + (i - 50000) * interval '1 second' ELSE now() - interval '2 days' + i * interval '1 millisecond' END
     FROM generate_series(1, 55000) AS i`,
  );
  await db.pool.query(
    `INSERT INTO jobs (kind, owner_key_id, status, input, created_at, updated_at)
     SELECT 'pdf', 'ak_plan', 'queued', '{}'::jsonb, now(), now() FROM generate_series(1, 5000)`,
  );
  await analyze(db.pool, ["jobs"]);
}, 120_000);

async function plan(sql: string, params: unknown[]): Promise<string> {
  const { rows } = await db.pool.query<{ "QUERY PLAN": string }>(`EXPLAIN ${sql}`, params);
  return rows.map((r) => r["QUERY PLAN"]).join("\n");
}

describe("job statements", () => {
  it("the purge finds expired results through the partial index, not through the tombstones", async () => {
    const text = await plan(EXPIRED_JOB_RESULTS_SQL, [now(), 1000]);
    expect(text).toContain("jobs_payload_expiry");
    expect(text).not.toMatch(/Seq Scan on jobs/);
  });

  it("the purge finds old tombstones by expires_at", async () => {
    const text = await plan(OLD_JOBS_SQL, [now(), 1000]);
    expect(text).toMatch(/jobs_expiry|jobs_payload_expiry/);
    expect(text).not.toMatch(/Seq Scan on jobs/);
  });

  it("the sweep reads only unfinished jobs", async () => {
    const text = await plan(ORPHANED_JOBS_SQL, [now(), 100]);
    expect(text).toContain("jobs_unfinished");
    expect(text).not.toMatch(/Seq Scan on jobs/);
  });
});
