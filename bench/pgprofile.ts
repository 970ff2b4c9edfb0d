/**
 * BENCH_PG_PROFILE=1 (embedded server only): what PostgreSQL does during each
 * measured window.
 *
 *  - statements: pg_stat_statements, reset at the start of the window, top
 *    statements by total execution time with calls and mean time, so one can
 *    read off the round trips per API request and what each costs;
 *  - sessions: pg_stat_activity of the service's connections sampled every
 *    10 ms: how often a connection is running a query, waiting on a lock,
 *    on WAL flush (commit fsync), idle in a transaction (waiting for node),
 *    or idle in the pool.
 *
 * pg_stat_statements and the sampling cost a little CPU themselves; use the
 * profile to see where time goes, not for the headline figures.
 */
import type pg from "pg";
import { superuser } from "./server.js";

export interface PgProfile {
  /** mean_ms is execution; plan_mean_ms is planning (0 unless pg_stat_statements.track_planning=on, see BENCH_PG_SETTINGS). */
  statements: Array<{ query: string; calls: number; total_ms: number; mean_ms: number; plan_mean_ms: number; rows: number }>;
  /** Share of sampled service connections in each state, percent. */
  sessions: Record<string, number>;
  samples: number;
  commits_per_s: number;
  wal_fsyncs_per_s: number | null;
}

export class PgProfiler {
  private sampling: NodeJS.Timeout | undefined;
  private counts = new Map<string, number>();
  private sessions = 0;
  private samples = 0;
  private busy = false;
  private started = 0;
  private commits0 = 0;
  private walSync0: number | null = null;

  private constructor(private readonly db: pg.Client) {}

  static async open(pgDataDir: string): Promise<PgProfiler> {
    const db = await superuser(pgDataDir);
    await db.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
    return new PgProfiler(db);
  }

  async start(): Promise<void> {
    this.counts.clear();
    this.sessions = 0;
    this.samples = 0;
    await this.db.query("SELECT pg_stat_statements_reset()");
    const c = await this.counters();
    this.commits0 = c.commits;
    this.walSync0 = c.walSync;
    this.started = performance.now();
    this.sampling = setInterval(() => void this.sample(), 10);
  }

  private async counters(): Promise<{ commits: number; walSync: number | null }> {
    const { rows } = await this.db.query<{ commits: string }>(
      "SELECT xact_commit::text AS commits FROM pg_stat_database WHERE datname = 'agentbus'",
    );
    let walSync: number | null = null;
    try {
      // PostgreSQL ≥ 18 counts WAL fsyncs in pg_stat_io; older in pg_stat_wal.
      const io = await this.db.query<{ n: string | null }>("SELECT sum(fsyncs)::text AS n FROM pg_stat_io WHERE object = 'wal'");
      walSync = io.rows[0]?.n == null ? null : Number(io.rows[0].n);
    } catch {
      walSync = null;
    }
    return { commits: Number(rows[0]?.commits ?? 0), walSync };
  }

  private async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const { rows } = await this.db.query<{ state: string | null; wait_event_type: string | null; wait_event: string | null }>(
        "SELECT state, wait_event_type, wait_event FROM pg_stat_activity WHERE application_name = 'agentbus' AND pid <> pg_backend_pid()",
      );
      this.samples++;
      for (const r of rows) {
        let key: string;
        if (r.state === "active") key = r.wait_event_type ? `active: waiting ${r.wait_event_type}:${r.wait_event}` : "active: running";
        else key = r.state ?? "unknown";
        this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
        this.sessions++;
      }
    } catch {
      // a failed sample is just missing
    } finally {
      this.busy = false;
    }
  }

  async stop(): Promise<PgProfile> {
    clearInterval(this.sampling);
    const seconds = (performance.now() - this.started) / 1000;
    while (this.busy) await new Promise((r) => setTimeout(r, 5));
    const c = await this.counters();
    const { rows } = await this.db.query<{ query: string; calls: string; total: number; mean: number; plan: number; rows: string }>(
      `SELECT regexp_replace(query, '\\s+', ' ', 'g') AS query, calls::text, total_exec_time AS total, mean_exec_time AS mean,
         mean_plan_time AS plan, rows::text
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
       WHERE d.datname = 'agentbus' AND query NOT LIKE '%pg_stat%'
       ORDER BY total_exec_time DESC LIMIT 12`,
    );
    const sessions: Record<string, number> = {};
    for (const [k, n] of [...this.counts].sort((a, b) => b[1] - a[1])) {
      sessions[k] = Math.round((n / Math.max(1, this.sessions)) * 1000) / 10;
    }
    return {
      statements: rows.map((r) => ({
        query: r.query.length > 160 ? `${r.query.slice(0, 160)}…` : r.query,
        calls: Number(r.calls),
        total_ms: Math.round(r.total),
        mean_ms: Math.round(r.mean * 1000) / 1000,
        plan_mean_ms: Math.round(r.plan * 1000) / 1000,
        rows: Number(r.rows),
      })),
      sessions,
      samples: this.samples,
      // minus the sampling queries of this profiler (one transaction each)
      commits_per_s: Math.round((c.commits - this.commits0 - this.samples) / seconds),
      wal_fsyncs_per_s: c.walSync === null || this.walSync0 === null ? null : Math.round((c.walSync - this.walSync0) / seconds),
    };
  }

  async close(): Promise<void> {
    clearInterval(this.sampling);
    await this.db.end();
  }
}
