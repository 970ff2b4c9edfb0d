/**
 * The async jobs as the API sees them (docs/decisions.md#job-record, #pdf-jobs,
 * #jobs-private): submission, the job record, and the PDF download. Each kind
 * validates its own request and runs in its worker (src/jobs/<kind>.ts over
 * src/jobs/async-job.ts); everything they share is here.
 *
 * - A job is created queued and its Agenda job is written in the same
 *   transaction (JobStore.submit), so it is never left without a runner.
 * - Only the submitting key sees a job; for any other key it does not exist
 *   (404 job_not_found, as for an unknown id).
 * - A result is kept RESULT_TTL after the job ended. From then on the job
 *   still answers (status, error, timestamps; `result` null) and the download
 *   answers 410 result_expired, for TOMBSTONE_DAYS more; then the row goes
 *   and both answer 404.
 */
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import type { JsonValue } from "../model/json.js";
import type { JobKindName, JobRecord } from "../model/jobs.js";
import type { Clock } from "../model/time.js";
import type { JobStore } from "../ports/jobs.js";
import { newTrace, type TraceContext } from "../model/trace.js";

/** Job ids are positive integers below 2^53 (a sequence); anything else cannot exist. */
function jobIdOf(id: bigint | number): number | undefined {
  const n = typeof id === "bigint" ? (id > 0n && id <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(id) : undefined) : id;
  return n !== undefined && Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

const notFound = () => new ApiError("job_not_found");

/**
 * Retry-After for job_limit_exceeded. The cap is on unfinished jobs, not on a
 * time window, so no exact time exists; a PDF renders in seconds, so a few
 * seconds is the shortest wait after which a retry can sensibly succeed.
 */
export const JOB_LIMIT_RETRY_AFTER_SECONDS = 5;

export class AsyncJobs {
  constructor(
    private readonly store: JobStore,
    private readonly clock: Clock,
    /** Unfinished (queued or processing) jobs one key may have, all kinds together (AGENTBUS_JOBS_MAX_QUEUED_PER_KEY). */
    private readonly maxUnfinishedPerKey: number,
  ) {}

  /**
   * Creates a job of `kind` with its validated input and queues it; returns
   * the job id. 429 job_limit_exceeded when the key already has
   * maxUnfinishedPerKey unfinished jobs: one key cannot fill the queue.
   */
  async submit(caller: Caller, kind: JobKindName, input: JsonValue, trace?: TraceContext): Promise<number> {
    // A job submitted without a trace context starts a trace (docs/decisions.md#trace-context).
    return this.store.submit({ kind, ownerKeyId: caller.keyId, input, now: this.clock.now(), trace: trace ?? newTrace() }, (unfinished) => {
      if (unfinished >= this.maxUnfinishedPerKey) {
        throw new ApiError("job_limit_exceeded", `This key has ${unfinished} unfinished jobs; at most ${this.maxUnfinishedPerKey} may be queued or running at once`, {
          details: { retry_after: JOB_LIMIT_RETRY_AFTER_SECONDS, max_unfinished_jobs: this.maxUnfinishedPerKey },
          headers: { "Retry-After": String(JOB_LIMIT_RETRY_AFTER_SECONDS) },
        });
      }
    });
  }

  /** The caller's job, with `result` hidden once expired (the purge clears it soon after). */
  async get(caller: Caller, jobId: bigint | number): Promise<JobRecord> {
    const id = jobIdOf(jobId);
    if (id === undefined) throw notFound();
    const job = await this.store.find(id, caller.keyId);
    if (!job) throw notFound();
    if (job.expiresAt !== null && job.expiresAt <= this.clock.now()) return { ...job, result: null };
    return job;
  }

  /**
   * The PDF of the caller's completed pdf job. 404 job_not_found when there
   * is no such pdf job of the caller's, 409 job_not_completed while it runs,
   * 409 job_failed when it failed, 410 result_expired once its 24 hours ran out.
   */
  async pdf(caller: Caller, jobId: bigint | number): Promise<Uint8Array> {
    const id = jobIdOf(jobId);
    if (id === undefined) throw notFound();
    const now = this.clock.now();
    const job = await this.store.findPdf(id, caller.keyId, now);
    if (!job || job.kind !== "pdf") throw notFound();
    if (job.expiresAt !== null && job.expiresAt <= now) {
      throw new ApiError("result_expired", "The PDF of this job has expired (PDFs are kept 24 hours)");
    }
    if (job.status === "failed") throw new ApiError("job_failed");
    if (job.status !== "completed") throw new ApiError("job_not_completed", `The job is ${job.status}; the PDF is not ready yet`);
    if (job.pdf === null) throw new Error(`pdf job ${id} is completed but has no PDF`);
    return job.pdf;
  }
}
