/**
 * Worker presence from Agenda's recurring job rows (type 'single': purge,
 * analyze, the sweeps; a handful of rows through a unique index). Every
 * worker takes its turn at them, and each run stamps locked_at, last_run_at
 * and the worker's name in last_modified_by.
 */
import type { WorkerPresence } from "../ports/worker-presence.js";
import type { Micros } from "../model/time.js";
import type { Db } from "./db.js";

export class PgWorkerPresence implements WorkerPresence {
  constructor(private readonly db: Db) {}

  async lastSeen(windowSeconds: number): Promise<{ lastSeenAt: Micros | null; recent: number }> {
    const { rows } = await this.db.query<{ last_seen_at: Micros | null; recent: number }>(
      `SELECT max(greatest(last_run_at, locked_at)) AS last_seen_at,
         count(DISTINCT last_modified_by) FILTER (WHERE greatest(last_run_at, locked_at) > now() - make_interval(secs => $1))::int AS recent
       FROM agenda_jobs WHERE type = 'single'`,
      [windowSeconds],
      "workers_last_seen",
    );
    return { lastSeenAt: rows[0]?.last_seen_at ?? null, recent: rows[0]?.recent ?? 0 };
  }
}
