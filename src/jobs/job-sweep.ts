/**
 * The safety net of the async jobs (docs/decisions.md#job-record): every 30 seconds, one
 * worker looks for unfinished jobs that no Agenda job will run and queues
 * one for each. A job and its Agenda job are written in one transaction,
 * and a worker that stops hands its job over, so normally there are none;
 * this covers the rest (a run Agenda dropped, a shutdown that ran out of
 * time, agenda_jobs rows removed by hand). Runs are idempotent, so queuing
 * one too many is harmless.
 */
import type { JobKind } from "./types.js";

/** Left alone for this long first, so a job between two steps of its run is not taken for an orphan. */
export const ORPHAN_AFTER_SECONDS = 30;
const BATCH = 100;

export const jobSweepJob: JobKind = {
  name: "job-sweep",
  every: "30 seconds",
  lockLifetimeMs: 30_000,
  async run(run, { jobs, clock }) {
    const orphans = await jobs.findOrphaned(clock.now() - ORPHAN_AFTER_SECONDS * 1_000_000, BATCH);
    for (const job of orphans) {
      if (run.signal.aborted) return;
      await jobs.requeueOrphan(job.kind, job.id, clock.now());
    }
    if (orphans.length > 0) run.logger.warn({ jobs: orphans.map((j) => j.id) }, "re-queued jobs that had no Agenda job");
  },
};
