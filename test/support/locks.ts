import type pg from "pg";
import { eventually } from "./eventually.js";

/**
 * Until `sessions` (default one) sessions of the pool's database wait for a
 * lock: transactions are queued behind another. What a test would otherwise
 * sleep to let happen.
 */
export function untilWaitingForLock(pool: pg.Pool, sessions = 1): Promise<true> {
  return eventually(async () => {
    const { rows } = await pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    );
    return (rows[0]?.n ?? 0) >= sessions;
  });
}
