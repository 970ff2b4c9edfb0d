/**
 * Planner statistics for the tables the service fills fast
 * (docs/decisions.md#planner-statistics).
 *
 * With no statistics PostgreSQL guesses: a channel equality matches 0.5 % of
 * a table of the size it has on disk. So right after a burst of writes (every
 * new deployment, every channel that grows faster than autovacuum's
 * schedule) it estimates a handful of rows for a channel holding thousands,
 * and reads a page of that channel with a bitmap heap scan and a sort of
 * every row instead of walking messages_channel_order for 50 (measured: 4.3
 * ms instead of 0.1 ms per page at 9,227 messages). Query shape cannot
 * prevent it, because the cheap-looking plan is cheap under that guess:
 * measured on a never-analysed table, an ORDER BY on both index columns, a
 * row comparison on (channel_id, created_at) and the LIMIT moved into a
 * subquery all keep the bitmap heap scan and sort in the custom plan.
 * Autovacuum fixes the statistics, but only after its naptime (a minute by
 * default) and only once 10 % of the table changed since the last analysis.
 *
 * So the service analyses its hot tables itself, a few seconds after their
 * size moved away from what the planner believes: `analyzeStale` runs
 * ANALYZE on each watched table whose live row count differs from its row
 * estimate (reltuples) by MIN_CHANGES + SCALE × that estimate (a
 * never-analysed table counts as empty, so its first 1,000 rows trigger it).
 * Size, not churn: a busy queue rewrites its rows all the time (receive,
 * ack) without changing what the plans depend on, and counting those
 * updates analysed a 30,000-row queue at every check, 0.4 s each (measured).
 * That bounds the cost: one catalog query per check, and an ANALYZE (a
 * sample of at most 30,000 rows) per tenth of a table's growth or shrinkage;
 * autovacuum still analyses after churn on its own schedule. The job runs on
 * one worker at a time; a transaction-scoped advisory lock also keeps any
 * other caller from analysing alongside (it skips that round). The analyze job runs the check (src/jobs/analyze.ts), where the
 * workers run.
 */
import type { PlannerStatistics } from "../ports/statistics.js";
import type { Db } from "./db.js";

/** The tables whose plans decide the hot paths: pages of live messages and of history. */
export const WATCHED_TABLES = ["messages", "message_history"] as const;
export const MIN_CHANGES = 1_000;
export const SCALE = 0.1;

/** Taken while one replica analyses; another finds it held and skips that round. */
const ANALYZE_LOCK = "SELECT pg_try_advisory_xact_lock(hashtext('agentbus_analyze')) AS locked";

/** $1 tables, $2 minimum change, $3 scale: the watched tables whose size the planner misjudges. */
export const STALE_TABLES_SQL = `SELECT s.relname AS table FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
  WHERE s.schemaname = current_schema() AND s.relname = ANY($1::text[])
    AND abs(s.n_live_tup - greatest(c.reltuples, 0)) >= $2 + $3 * greatest(c.reltuples, 0)
  ORDER BY s.relname`;

export class PgStatistics implements PlannerStatistics {
  constructor(private readonly db: Db) {}

  /** ANALYZEs the watched tables whose size moved enough from the planner's estimate; the ones it analysed. */
  async analyzeStale(): Promise<string[]> {
    return this.db.transaction(async () => {
      const { rows: lock } = await this.db.query<{ locked: boolean }>(ANALYZE_LOCK);
      if (!lock[0]?.locked) return [];
      const { rows } = await this.db.query<{ table: string }>(STALE_TABLES_SQL, [WATCHED_TABLES, MIN_CHANGES, SCALE], "stale_tables");
      const tables = rows.map((r) => r.table).filter((t): t is (typeof WATCHED_TABLES)[number] => (WATCHED_TABLES as readonly string[]).includes(t));
      // Names from the fixed list above, never from input.
      for (const table of tables) await this.db.query(`ANALYZE ${table}`);
      return tables;
    });
  }
}
