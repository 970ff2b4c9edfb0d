/**
 * EXPLAIN of a statement as PostgreSQL may run it: a custom plan for these
 * values, and the generic plan a prepared statement switches to after a few
 * executions (the service prepares its hot statements).
 */
import type pg from "pg";
import { formatTimestamp, systemClock } from "../../src/model/time.js";

/** The current time as the statements' now parameter, formatted as the service passes it. */
export const now = (): string => formatTimestamp(systemClock.now());

/** Statistics for the seeded tables, so the planner costs their real sizes rather than guessing. */
export async function analyze(pool: pg.Pool, tables: string[]): Promise<void> {
  for (const table of tables) await pool.query(`ANALYZE ${table}`);
}

export async function explainPlans(pool: pg.Pool, sql: string, params: unknown[]): Promise<string[]> {
  const text = (rows: Array<{ "QUERY PLAN": string }>) => rows.map((r) => r["QUERY PLAN"]).join("\n");
  const custom = await pool.query<{ "QUERY PLAN": string }>(`EXPLAIN ${sql}`, params);
  const client = await pool.connect();
  try {
    await client.query("SET plan_cache_mode = force_generic_plan");
    await client.query(`PREPARE planned AS ${sql}`);
    const quote = (v: string) => `'${v.replace(/'/g, "''")}'`;
    // Arrays as PostgreSQL array literals ({"a","b"}), as pg sends them.
    const literal = (p: unknown) =>
      p === null ? "NULL" : Array.isArray(p) ? quote(`{${p.map((e) => JSON.stringify(String(e))).join(",")}}`) : quote(String(p));
    const generic = await client.query<{ "QUERY PLAN": string }>(`EXPLAIN EXECUTE planned(${params.map(literal).join(", ")})`);
    return [text(custom.rows), text(generic.rows)];
  } finally {
    // Also after a failed EXPLAIN, so the next call on this pooled connection can PREPARE again.
    await client.query("DEALLOCATE ALL");
    await client.query("RESET plan_cache_mode");
    client.release();
  }
}
