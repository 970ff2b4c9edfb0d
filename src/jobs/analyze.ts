/**
 * Every 5 seconds, one worker refreshes the planner statistics of the hot
 * tables when their size moved away from what the planner believes
 * (docs/decisions.md#planner-statistics; the rule and the SQL are in
 * store/statistics.ts). Seconds, not autovacuum's minute: right after a
 * burst of posts a page of a never-analysed channel reads and sorts the
 * whole channel.
 */
import type { JobKind } from "./types.js";

export const analyzeJob: JobKind = {
  name: "analyze",
  every: "5 seconds",
  lockLifetimeMs: 30_000,
  async run(run, { statistics }) {
    const tables = (await statistics?.analyzeStale()) ?? [];
    if (tables.length > 0) run.logger.info({ tables }, "analysed");
  },
};
