import type pg from "pg";
import { eventually } from "./eventually.js";

/**
 * Until a session of the pool's database waits for a lock: a transaction is
 * queued behind another. What a test would otherwise sleep to let happen.
 */
export function untilWaitingForLock(pool: pg.Pool): Promise<true> {
  return eventually(async () => {
    const { rows } = await pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    );
    return (rows[0]?.n ?? 0) > 0;
  });
}
