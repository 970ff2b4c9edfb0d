/**
 * The worker side of the async jobs (docs/decisions.md#job-record), shared by the three
 * kinds: a kind module says how to turn its input into its result, and
 * asyncJobKind() makes that an Agenda job kind with the whole lifecycle:
 *
 *   const transcriptJob = asyncJobKind({
 *     kind: "transcript",
 *     async process(input: TranscriptInput, ctx, deps) {
 *       …
 *       return { result: { videoId, language, fullText, segments } };
 *     },
 *   });
 *
 * then list it in src/jobs/index.ts. What a run does:
 *
 * 1. Claims the job row (queued/processing → processing, attempts + 1). A
 *    job that already ended, or is gone, makes the run a no-op: runs are
 *    idempotent, so a duplicate Agenda job (the sweep's, a retry racing a
 *    slow worker) is harmless.
 * 2. Runs process(), extending the Agenda lock while it works, so a crashed
 *    worker's job is taken over within the lock lifetime (30 s) and a live
 *    one never is.
 * 3. Outcome:
 *    - a result: stored (with the PDF for pdf jobs), status completed, kept
 *      24 hours;
 *    - a JobFailure that is not retryable: status failed, `error` = its
 *      {error, message};
 *    - anything else (a retryable JobFailure, an unexpected error): back to
 *      queued and thrown, so Agenda retries with exponential backoff
 *      (2 s, 6 s, …, honoured at the runner's processEvery granularity), up to
 *      maxAttempts runs in all; the last failure then ends the job as failed
 *      (an unexpected error as internal_error, its details only in the log);
 *    - the worker shutting down: the job goes back to queued with a new
 *      Agenda job, which another worker (or this one, restarted) takes.
 *
 * Attempts are counted on the row when a run starts, so a job that kills its
 * worker (crash, OOM) is also given up after maxAttempts runs.
 */
import { create, toJson, type MessageInitShape } from "@bufbuild/protobuf";
import { exponential } from "agenda";
import type { JsonValue } from "../model/json.js";
import { JobFailure } from "../model/job-failure.js";
import { agendaJobName, resultExpiry, type JobKindName } from "../model/jobs.js";
import { RESULT_SCHEMAS } from "../protocol/job-results.js";
import { errorFields } from "../platform/log-limiter.js";
import type { Logger } from "../platform/logger.js";
import { AttemptLogged, type JobDependencies, type JobKind } from "./types.js";
import { inJobSpan } from "../platform/tracing.js";

export type ResultInit<K extends JobKindName> = MessageInitShape<(typeof RESULT_SCHEMAS)[K]>;

/** What the Agenda job carries: only the id; the row holds the rest. */
export interface AsyncJobData {
  job_id: number;
}

export interface AsyncJobContext {
  jobId: number;
  /** The key that submitted the job. */
  ownerKeyId: string;
  /** 1 for the first run. */
  attempt: number;
  /** Aborted when the worker shuts down: stop and throw; the job is handed over. */
  signal: AbortSignal;
  logger: Logger;
}

export interface AsyncJobOutcome<K extends JobKindName> {
  result: ResultInit<K>;
  /** The rendered document (pdf jobs). */
  pdf?: Uint8Array;
}

export interface AsyncJobDefinition<K extends JobKindName, Input> {
  kind: K;
  /** Runs at once per worker process; default 1. */
  concurrency?: number | ((deps: JobDependencies) => number);
  /** Runs in all before the job fails; default DEFAULT_MAX_ATTEMPTS. */
  maxAttempts?: number;
  /** Turns the stored input into the result; throws JobFailure for a failure with a reason. */
  process(input: Input, ctx: AsyncJobContext, deps: JobDependencies): Promise<AsyncJobOutcome<K>>;
}

export const DEFAULT_MAX_ATTEMPTS = 3;
const LOCK_LIFETIME_MS = 30_000;
const TOUCH_EVERY_MS = 10_000;

export function asyncJobKind<K extends JobKindName, Input>(definition: AsyncJobDefinition<K, Input>): JobKind<AsyncJobData> {
  const maxAttempts = definition.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  const schema = RESULT_SCHEMAS[definition.kind];
  return {
    name: agendaJobName(definition.kind),
    lockLifetimeMs: LOCK_LIFETIME_MS,
    fair: true,
    ...(definition.concurrency === undefined ? {} : { concurrency: definition.concurrency }),
    // More than we use: the run that reaches maxAttempts ends the job itself.
    backoff: exponential({ delay: 2_000, factor: 3, maxDelay: 60_000, jitter: 0.2, maxRetries: maxAttempts + 1 }),

    async run(run, deps) {
      const { jobs, clock } = deps;
      const jobId = run.data.job_id;
      const logger = run.logger.child({ job_id: jobId });
      const claimed = await jobs.claim(jobId, clock.now());
      if (!claimed) {
        logger.debug("job already ended or gone; nothing to do");
        return;
      }
      const fail = async (error: { error: string; message: string }) => {
        const now = clock.now();
        await jobs.fail(jobId, error, now, resultExpiry(now));
        logger.info({ kind: definition.kind, attempt: claimed.attempts, error: { message: error.message, code: error.error } }, "job failed");
      };
      if (claimed.kind !== definition.kind) {
        await fail({ error: "internal_error", message: "The job was handed to the wrong worker" });
        return;
      }
      if (claimed.attempts > maxAttempts) {
        await fail({ error: "internal_error", message: `The job was started ${claimed.attempts - 1} times without finishing` });
        return;
      }

      const started = performance.now();
      const keepAlive = setInterval(() => {
        // Once per job per interval during a database outage: no stack for that.
        run.touch().catch((err: unknown) => logger.warn(errorFields(err), "could not extend the job's lock"));
      }, TOUCH_EVERY_MS);
      let outcome: AsyncJobOutcome<K>;
      try {
        const ctx: AsyncJobContext = { jobId, ownerKeyId: claimed.ownerKeyId, attempt: claimed.attempts, signal: run.signal, logger };
        // A span of the trace the job was submitted in, with the statements and requests of its run inside (docs/decisions.md#spans).
        outcome = await inJobSpan(definition.kind, jobId, claimed.attempts, claimed.trace, () => definition.process(claimed.input as Input, ctx, deps));
      } catch (err) {
        if (run.signal.aborted) {
          // Shutting down: hand the job over rather than count this as a failure.
          await jobs.handOver(definition.kind, jobId, clock.now());
          logger.info("worker stopping; job handed over");
          return;
        }
        const failure = err instanceof JobFailure ? err : undefined;
        if (failure && !failure.retryable) return fail(failure.toJobError());
        if (claimed.attempts >= maxAttempts) {
          if (!failure) logger.error({ err }, "job failed unexpectedly");
          return fail(failure?.toJobError() ?? { error: "internal_error", message: "The job failed unexpectedly" });
        }
        await jobs.release(jobId, clock.now());
        logger.warn({ ...errorFields(err), attempt: claimed.attempts, max_attempts: maxAttempts }, "job attempt failed; it will be retried");
        // Thrown so that Agenda schedules the retry; the attempt is logged above, once.
        throw new AttemptLogged(err);
      } finally {
        clearInterval(keepAlive);
      }

      const result = toJson(schema, create(schema, outcome.result as never), { useProtoFieldName: true }) as JsonValue;
      const now = clock.now();
      const stored = await jobs.complete(jobId, { result, pdf: outcome.pdf ?? null }, now, resultExpiry(now));
      if (stored) {
        logger.info({ kind: definition.kind, attempt: claimed.attempts, ms: Math.round(performance.now() - started) }, "job completed");
      } else {
        logger.warn("job ended elsewhere while this run worked on it; result dropped");
      }
    },
  };
}
