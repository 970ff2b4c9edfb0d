/**
 * The job runner (docs/decisions.md#job-runner): Agenda 6 on PostgreSQL, over the app's own
 * connection pool. `agentbus serve` runs it in-process unless
 * AGENTBUS_WORKERS=false; `agentbus worker` runs only this.
 *
 * Its storage is Agenda's PostgreSQL backend over the app's pool
 * (store/agenda.ts), opened by the composition root and handed in.
 *
 * Stopping: the runner's AbortSignal tells running jobs to finish at their
 * next safe point; agenda.stop(true) stops polling, unlocks jobs this
 * process had locked but not started, and releases the LISTEN connection;
 * then stop() waits (bounded) for the jobs that were running to record their
 * outcome, so the pool can be closed after it. Agenda leaves one timer of
 * lockLifetime/2 per finished run; kinds keep lockLifetimeMs short, and the
 * CLI exits explicitly once everything is closed.
 */
import { AsyncResource } from "node:async_hooks";
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { Agenda, Job, type AgendaBackend, type BackoffStrategy, type JobId, type JobStateNotification } from "agenda";
import { RESERVED_RUN_SLOTS } from "../model/jobs.js";
import { errorFields, LogLimiter } from "../platform/log-limiter.js";
import type { Logger } from "../platform/logger.js";
import type { FairScheduling } from "../ports/jobs.js";
import { jobKinds } from "./index.js";
import { AttemptLogged, type JobDependencies, type JobKind } from "./types.js";

/** Opens Agenda's backend; the fair kinds are taken by key (store/agenda.ts). connect() may be called more than once. */
export type JobBackendFactory = (fair: FairScheduling) => AgendaBackend;

export interface JobRunnerOptions {
  /** Agenda's storage (over the app's pool, which the runner never closes). */
  backend: JobBackendFactory;
  deps: JobDependencies;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  kinds?: ReadonlyArray<JobKind<any>>;
  /** How often Agenda looks for due jobs; default 5 s. Jobs enqueued with enqueue() start at once (NOTIFY). */
  processEveryMs?: number;
  /** Overrides of the kinds' `every` by name (tests use short intervals). */
  intervals?: Readonly<Record<string, string>>;
  /**
   * Multiplies every retry delay of the kinds' back-off (default 1: the async
   * jobs retry after about 2 s, then 6 s). Tests that watch a job fail its
   * attempts use a small one, so the attempts follow each other at once.
   */
  retryDelayScale?: number;
  /** Longest stop() waits for running jobs; default 10 s. */
  stopTimeoutMs?: number;
  /**
   * This worker in agenda_jobs.last_modified_by, where the fair claim counts
   * its running jobs: unique per runner. Default host:pid:random (two
   * containers may share host name and pid, e.g. pid 1 on host networking).
   */
  name?: string;
  /** Jobs of one key and fair kind running at once across all workers (AGENTBUS_JOBS_MAX_RUNNING_PER_KEY); default 2. */
  maxRunningPerKey?: number;
  /** Where failures that repeat during a database outage go; default: one of its own. */
  outageLog?: LogLimiter;
}

/** A kind's runs at once per worker process, as it declares them (for a fair kind, without the reserved slots). */
function concurrencyOf(kind: Pick<JobKind, "concurrency">, deps: JobDependencies): number {
  return typeof kind.concurrency === "function" ? kind.concurrency(deps) : (kind.concurrency ?? 1);
}

/** A back-off whose delays are `scale` times the strategy's (null, no more retries, stays null). */
function scaled(strategy: BackoffStrategy, scale: number): BackoffStrategy {
  if (scale === 1) return strategy;
  return (context) => {
    const delay = strategy(context);
    return delay === null ? null : Math.round(delay * scale);
  };
}

const DEFAULT_PROCESS_EVERY_MS = 5_000;
const DEFAULT_STOP_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_RUNNING_PER_KEY = 2;

export class JobRunner {
  private readonly shutdown = new AbortController();
  private readonly running = new Set<Job>();
  private readonly idle: Array<() => void> = [];
  private stopping: Promise<void> | undefined;

  private constructor(
    private readonly agenda: Agenda,
    private readonly logger: Logger,
    private readonly stopTimeoutMs: number,
    private readonly backend: AgendaBackend,
    private readonly fairNames: ReadonlySet<string>,
  ) {}

  /** Connects, defines every kind, starts processing and schedules the recurring kinds. */
  static async start(options: JobRunnerOptions): Promise<JobRunner> {
    const logger = options.deps.logger.child({ component: "jobs" });
    const kinds = options.kinds ?? jobKinds;
    const slots = new Map(kinds.filter((k) => k.fair).map((k) => [k.name, concurrencyOf(k, options.deps)]));
    const runs = (kind: Pick<JobKind, "name" | "fair" | "concurrency">) => concurrencyOf(kind, options.deps) + (kind.fair ? RESERVED_RUN_SLOTS : 0);
    const backend = options.backend({ slots, maxRunningPerKey: options.maxRunningPerKey ?? DEFAULT_MAX_RUNNING_PER_KEY });
    await backend.connect();
    // An 'error' event without a listener would crash the process (e.g. when
    // the LISTEN connection drops; the channel reconnects by itself).
    const outageLog = (options.outageLog ?? new LogLimiter(options.deps.logger, { intervalMs: 30_000 })).child({ component: "jobs" });
    backend.notificationChannel?.on("error", (err: unknown) => outageLog.warn("job notification channel error", err));
    const agenda = new Agenda({
      backend,
      name: options.name ?? `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`,
      processEvery: options.processEveryMs ?? DEFAULT_PROCESS_EVERY_MS,
      // Agenda's own cap on runs across kinds (20 unless told) must never be
      // the one that binds: a fair job claimed but kept waiting by it would
      // hold a slot, or the reserve, without running.
      maxConcurrency: kinds.reduce((sum, k) => sum + runs(k), 0),
      removeOnComplete: true,
    });
    const runner = new JobRunner(agenda, logger, options.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS, backend, new Set(slots.keys()));
    // Agenda reports every failed poll of the jobs table here: once per
    // processEvery while the database is down.
    agenda.on("error", (err: unknown) => outageLog.error("job runner error", err));
    // Agenda also re-emits the job events other workers announce (remote:
    // true, with a notification in place of the job). Those are theirs to
    // log, and no run of this process: counting them as running here would
    // hold up stop(), and reading them as jobs would throw.
    agenda.on("fail", (err: unknown, job: Job | JobStateNotification, remote?: boolean) => {
      if (remote === true || !(job instanceof Job) || err instanceof AttemptLogged) return;
      logger.error({ ...errorFields(err), job: job.attrs.name }, "job failed");
    });
    agenda.on("start", (job: Job | JobStateNotification, remote?: boolean) => {
      if (remote !== true && job instanceof Job) runner.running.add(job);
    });
    agenda.on("complete", (job: Job | JobStateNotification, remote?: boolean) => {
      if (remote !== true && job instanceof Job) runner.finished(job);
    });

    for (const kind of kinds) runner.define(kind, options.deps, runs(kind), options.retryDelayScale ?? 1);
    await agenda.start();
    try {
      for (const kind of kinds) {
        const every = options.intervals?.[kind.name] ?? kind.every;
        if (every !== undefined) await agenda.every(every, kind.name, {});
      }
    } catch (err) {
      await runner.stop();
      throw err;
    }
    logger.info({ kinds: kinds.map((k) => k.name) }, "job runner started");
    return runner;
  }

  /** Queues one job of a kind to run as soon as a worker is free. */
  async enqueue<Data>(kind: JobKind<Data>, data: Data): Promise<void> {
    await this.agenda.now(kind.name, data);
  }

  /** Stops taking jobs, tells running ones to wrap up and waits for them (bounded). Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.shutdown.abort();
      // true: also disconnect the backend. With a pool passed in, that ends
      // nothing of ours (and the view's end() is a no-op).
      await this.agenda.stop(true);
      if (!(await this.whenIdle(this.stopTimeoutMs))) {
        this.logger.warn({ running: [...this.running].map((j) => j.attrs.name) }, "jobs still running at shutdown; their locks expire");
      }
      this.logger.info("job runner stopped");
    })();
    return this.stopping;
  }

  /** `concurrency`: the kind's runs at once here; for a fair kind, its concurrency plus the reserved slots. */
  private define<Data>(kind: JobKind<Data>, deps: JobDependencies, concurrency: number, retryDelayScale: number): void {
    const logger = this.logger.child({ job: kind.name });
    // Bound to the runner's own async context: Agenda may start a job from
    // whatever context enqueued it, and a job must never join a request's
    // database transaction (Db follows the async context).
    const handler = AsyncResource.bind(async (job: Job<Data>) => {
      if (this.shutdown.signal.aborted) return;
      await kind.run({ data: job.attrs.data, signal: this.shutdown.signal, touch: () => job.touch(), logger }, deps);
    });
    this.agenda.define<Data>(
      kind.name,
      handler,
      {
        lockLifetime: kind.lockLifetimeMs,
        concurrency,
        // A fair kind locks only what it can run now: a job locked here but
        // waiting would be out of the other workers' reach and out of the
        // fair order (Agenda runs its local queue oldest first). Which key
        // may take the reserved slot is the claim statement's to decide.
        ...(kind.fair ? { lockLimit: concurrency } : {}),
        ...(kind.backoff ? { backoff: scaled(kind.backoff, retryDelayScale) } : {}),
      },
    );
  }

  private finished(job: Job): void {
    this.running.delete(job);
    if (this.fairNames.has(job.attrs.name)) this.slotFreed(job.attrs.name);
    // Agenda emits 'complete' once the outcome is saved, then (same call
    // chain, microtasks only) removes a finished one-off job. Waking on the
    // next macrotask lets that query reach the pool first; the pool's end()
    // then waits for it.
    if (this.running.size === 0) {
      setImmediate(() => {
        if (this.running.size === 0) for (const wake of this.idle.splice(0)) wake();
      });
    }
  }

  /**
   * With lockLimit, Agenda looks for the next job of a kind only at its
   * processEvery tick or on a notification. A freed slot should be filled at
   * once, so it is announced like a new job: every worker (this one after
   * Agenda has released the slot, on a later macrotask) claims by the fair
   * order.
   */
  private slotFreed(name: string): void {
    setImmediate(() => {
      const now = new Date();
      this.backend.notificationChannel
        ?.publish({ jobId: "slot-freed" as JobId, jobName: name, nextRunAt: now, priority: 0, timestamp: now })
        .catch((err: unknown) => this.logger.warn({ err }, "could not announce a freed job slot"));
    });
  }

  /** True when no job is running, at once or within timeoutMs. */
  private whenIdle(timeoutMs: number): Promise<boolean> {
    if (this.running.size === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.idle.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }
}
