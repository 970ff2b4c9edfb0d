/**
 * agentbus_pick's statements (docs/decisions.md#dispatch) must read about
 * what they hand out, not the backlog, whatever the channel's rule: each
 * channel here holds 50,000 open messages of one priority (a skew the
 * planner's generic plans cannot see) and a limit, and a pick of 10 runs
 * under auto_explain. With `priority = lvl`, the full reading's generic plan
 * walked messages_unclaimed through the whole backlog for each empty
 * priority level: 64,000 rows filtered away, 10 ms a pick.
 */
import type pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { useTestDatabase } from "../support/database.js";
import { analyze } from "../support/query-plans.js";

const db = useTestDatabase();
const BACKLOG = 50_000;
const channels: Record<string, string> = {};

/** A claimable channel of the plan key's with `settings`, its shared limit, and BACKLOG open messages (in 1,000 groups when `grouped`). */
async function channel(name: string, settings: string, grouped: boolean): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, created_at, updated_at, limit_ids)
     VALUES ($1, 'claimable', 'open', false, 'plan', 'ak_plan', 86400, 7, now(), now(), ARRAY[(SELECT id FROM limits WHERE name = 'model')]) RETURNING id`,
    [name],
  );
  const id = rows[0]!.id;
  if (settings !== "") await db.pool.query(`UPDATE channels SET ${settings} WHERE id = $1`, [id]);
  await db.pool.query(
    `INSERT INTO messages (channel_id, author_key_id, content, created_at, expires_at, group_key)
     SELECT $1, 'ak_plan', 'task ' || i, now() - interval '1 hour' + i * interval '1 millisecond', now() + interval '1 day',
            CASE WHEN $3 THEN 'g' || (i % 1000) END
     FROM generate_series(1, $2::int) AS i`,
    [id, BACKLOG, grouped],
  );
  if (grouped) await db.pool.query("INSERT INTO message_groups (channel_id, group_key) SELECT DISTINCT channel_id, group_key FROM messages WHERE channel_id = $1", [id]);
  return id;
}

beforeAll(async () => {
  await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ('ak_plan', '\\x00', 'plan', 'plan')");
  await db.pool.query(
    `INSERT INTO limits (owner_key_id, name, max_in_flight, rate_count, rate_per_seconds, created_at, updated_at)
     VALUES ('ak_plan', 'model', 100000, 1000000, 60, now(), now())`,
  );
  channels.fifo = await channel("fifo", "", false);
  channels.fair = await channel("fair", "dispatch = 'fair'", true);
  channels.aging = await channel("aging", "dispatch = 'fair', priority_aging_seconds = 60", true);
  channels.bounded = await channel("bounded", "group_concurrency = 2", true);
  await analyze(db.pool, ["messages", "message_groups", "channels", "limits"]);
}, 120_000);

/** The most rows any scan of `messages` in the plan filtered away (message_groups and the rest are small here: a whole scan is right for them). */
function removedFromMessages(plan: string): number {
  let relation = "";
  let most = 0;
  for (const line of plan.split("\n")) {
    const scan = / on (\w+)(?: \w+)? +\(cost/.exec(line);
    if (scan) relation = scan[1]!;
    const removed = /Rows Removed by Filter: (\d+)/.exec(line);
    if (removed && relation === "messages") most = Math.max(most, Number(removed[1]));
  }
  return most;
}

interface Statement {
  text: string;
  /** The most rows a scan of messages filtered away. */
  removed: number;
  plan: string;
}

/** Each statement one pick of 10 runs, with its plan and the rows its scans filtered away. */
async function pickStatements(client: pg.PoolClient, channelId: string): Promise<Statement[]> {
  const notices: string[] = [];
  const onNotice = (n: { message?: string }) => notices.push(String(n.message));
  client.on("notice", onNotice);
  try {
    await client.query("LOAD 'auto_explain'");
    for (const setting of ["log_min_duration = 0", "log_nested_statements = on", "log_analyze = on", "log_level = 'notice'"]) {
      await client.query(`SET auto_explain.${setting}`);
    }
    await client.query("BEGIN");
    const picked = await client.query("SELECT * FROM agentbus_pick($1, now(), 10)", [channelId]);
    expect(picked.rows).toHaveLength(10);
    await client.query("ROLLBACK");
  } finally {
    client.off("notice", onNotice);
    await client.query("RESET auto_explain.log_min_duration");
  }
  return notices
    .filter((n) => !n.includes("Query Text: SELECT * FROM agentbus_pick"))
    .map((plan) => ({
      text: (/Query Text: ([^\n]*)/.exec(plan)?.[1] ?? "").trim().slice(0, 100),
      removed: removedFromMessages(plan),
      plan,
    }));
}

describe("a pick of 10 from 50,000 open messages of one priority, with a limit", () => {
  for (const rule of ["fifo", "fair", "aging", "bounded"] as const) {
    it(`filters at most a few hundred messages in any statement, and never scans messages whole (${rule})`, async () => {
      const client = await db.pool.connect();
      try {
        // Twice: the second pick runs the function's cached (generic) plans.
        await pickStatements(client, channels[rule]!);
        const statements = await pickStatements(client, channels[rule]!);
        expect(statements.length).toBeGreaterThan(0);
        for (const s of statements) {
          expect(s.removed, `${s.text}\n${s.plan}`).toBeLessThan(2_000);
          expect(s.plan, s.text).not.toMatch(/Seq Scan on messages/);
        }
      } finally {
        client.release();
      }
    });
  }
});
