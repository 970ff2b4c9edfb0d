/**
 * The job runner's storage: Agenda's PostgreSQL backend over the app's own
 * connection pool (agenda_jobs is our table, migration 0006).
 *
 * Sharing the pool, safely:
 * - Our pool parses timestamps into integer microseconds (store/pool.ts);
 *   Agenda expects Date objects. Agenda gets a view of the pool whose
 *   queries carry pg's default type parsers, so neither side sees the
 *   other's value shapes.
 * - The view's end() does nothing: stopping the runner must never close the
 *   pool the API still uses. (Agenda only ends pools it created itself; the
 *   view makes that a guarantee rather than a reading of its source.)
 * - Agenda's LISTEN connection is one connection of the pool, held while the
 *   runner runs.
 * - The schema is ours, so the backend starts with ensureSchema: false and
 *   no replica runs DDL at start.
 *
 * Jobs are queued through Agenda's own API (AgendaJobQueue), inside the
 * caller's transaction. This is the one module that reads agenda_jobs'
 * columns in SQL of ours (test/integration/worker.test.ts checks the table
 * against the installed backend's): the sweep's probe for jobs without a run
 * and the fair "next job" statement.
 */
import { PostgresBackend, PostgresJobRepository, PostgresNotificationChannel } from "@agendajs/postgres-backend";
import {
  Agenda,
  type AgendaBackend,
  type JobId,
  type JobLogger,
  type JobParameters,
  type JobRepository,
  type JobRepositoryOptions,
  type JobsOverview,
  type JobsQueryOptions,
  type JobsResult,
  type NotificationChannel,
  type RemoveJobsOptions,
} from "agenda";
import pg from "pg";
import { agendaJobName, RESERVED_RUN_SLOTS, type JobKindName } from "../model/jobs.js";
import type { FairScheduling } from "../ports/jobs.js";
import type { Db } from "./db.js";
import { withTransaction } from "./pool.js";

/** pg's own parsers (timestamps → Date), for Agenda's queries on our pool. */
const defaultTypes: pg.CustomTypesConfig = { getTypeParser: pg.types.getTypeParser };

/** The pool as Agenda sees it: default value parsing, and an end() that leaves the pool open. */
export function agendaPoolView(pool: pg.Pool): pg.Pool {
  const query = (text: string | pg.QueryConfig, values?: unknown[]) =>
    pool.query(typeof text === "string" ? { text, values, types: defaultTypes } : { ...text, types: defaultTypes });
  return new Proxy(pool, {
    get(target, prop) {
      if (prop === "query") return query;
      if (prop === "end") return () => Promise.resolve();
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * Agenda's "find and lock the next job" for the fair kinds is
 * FAIR_NEXT_JOB_SQL: the choice between keys is made in the one statement
 * that locks, after FAIR_CLAIM_LOCK_SQL in the same transaction, so it holds
 * across worker processes. Every other call goes to the PostgreSQL backend's
 * own repository. This is a JobRepository of its own (Agenda's backend
 * interface), not a patch of the backend's.
 */
class FairJobRepository implements JobRepository {
  /** The last claim of each fair kind this process has started (see getNextJobToRun). */
  private readonly claiming = new Map<string, Promise<unknown>>();

  constructor(
    private readonly inner: JobRepository,
    private readonly pool: pg.Pool,
    private readonly fair: FairScheduling,
  ) {}

  async getNextJobToRun(name: string, nextScanAt: Date, lockDeadline: Date, now: Date | undefined, options: JobRepositoryOptions | undefined): Promise<JobParameters | undefined> {
    const slots = this.fair.slots.get(name);
    if (slots === undefined) return this.inner.getNextJobToRun(name, nextScanAt, lockDeadline, now, options);
    // Agenda starts a claim per notification, so a burst of submissions
    // starts many at once. They would take their turns on the claim lock
    // anyway; taking them here first keeps the waiting off the pool, which
    // holds one connection per claim of a kind at most.
    const previous = this.claiming.get(name) ?? Promise.resolve();
    const claim = previous.then(() => this.claim(name, slots, nextScanAt, lockDeadline, now, options));
    this.claiming.set(name, claim.catch(() => undefined));
    const id = await claim;
    if (id === undefined) return undefined;
    // Locked by us now: read back through the backend's own row mapping.
    return (await this.inner.getJobById(String(id))) ?? undefined;
  }

  /** FAIR_NEXT_JOB_SQL after FAIR_CLAIM_LOCK_SQL, in one transaction; the locked Agenda job's id, if any. */
  private claim(name: string, slots: number, nextScanAt: Date, lockDeadline: Date, now: Date | undefined, options: JobRepositoryOptions | undefined): Promise<string | undefined> {
    return withTransaction(this.pool, async (client) => {
      await client.query(FAIR_CLAIM_LOCK_SQL, [name]);
      // The time is read once the claims before this one are done, so the
      // dispatch stamps ("served least recently") follow the claim order.
      const { rows } = await client.query<{ id: string }>(FAIR_NEXT_JOB_SQL, [
        now ?? new Date(),
        name,
        nextScanAt,
        lockDeadline,
        options?.lastModifiedBy ?? null,
        this.fair.maxRunningPerKey,
        slots,
        RESERVED_RUN_SLOTS,
      ]);
      return rows[0]?.id;
    });
  }

  connect(): Promise<void> {
    return this.inner.connect();
  }
  queryJobs(options?: JobsQueryOptions): Promise<JobsResult> {
    return this.inner.queryJobs(options);
  }
  getJobsOverview(): Promise<JobsOverview[]> {
    return this.inner.getJobsOverview();
  }
  getDistinctJobNames(): Promise<string[]> {
    return this.inner.getDistinctJobNames();
  }
  getJobById(id: string): Promise<JobParameters | null> {
    return this.inner.getJobById(id);
  }
  getQueueSize(): Promise<number> {
    return this.inner.getQueueSize();
  }
  removeJobs(options: RemoveJobsOptions): Promise<number> {
    return this.inner.removeJobs(options);
  }
  saveJob<DATA = unknown>(job: JobParameters<DATA>, options: JobRepositoryOptions | undefined): Promise<JobParameters<DATA>> {
    return this.inner.saveJob(job, options);
  }
  saveJobState(job: JobParameters, options: JobRepositoryOptions | undefined): Promise<void> {
    return this.inner.saveJobState(job, options);
  }
  lockJob(job: JobParameters, options: JobRepositoryOptions | undefined): Promise<JobParameters | undefined> {
    return this.inner.lockJob(job, options);
  }
  unlockJob(job: JobParameters): Promise<void> {
    return this.inner.unlockJob(job);
  }
  unlockJobs(jobIds: (JobId | string)[]): Promise<void> {
    return this.inner.unlockJobs(jobIds);
  }
  disableJobs(options: RemoveJobsOptions): Promise<number> {
    return this.inner.disableJobs(options);
  }
  enableJobs(options: RemoveJobsOptions): Promise<number> {
    return this.inner.enableJobs(options);
  }
  purgeAllJobs(): Promise<number> {
    return this.inner.purgeAllJobs();
  }
}

/**
 * The PostgreSQL backend on the shared pool with the fair repository.
 * Connects once: the runner awaits it (so a failure is an error it can
 * report), Agenda's own call reuses it.
 */
class SharedPoolBackend implements AgendaBackend {
  readonly repository: JobRepository;
  private readonly inner: PostgresBackend;
  private connecting: Promise<void> | undefined;

  constructor(pool: pg.Pool, fair: FairScheduling) {
    this.inner = new PostgresBackend({ pool, ensureSchema: false });
    this.repository = new FairJobRepository(this.inner.repository, pool, fair);
  }

  get name(): string {
    return this.inner.name;
  }
  get notificationChannel(): NotificationChannel | undefined {
    return this.inner.notificationChannel;
  }
  get logger(): JobLogger {
    return this.inner.logger;
  }
  get ownsConnection(): boolean {
    return this.inner.ownsConnection;
  }

  connect(): Promise<void> {
    return (this.connecting ??= this.inner.connect());
  }

  disconnect(): Promise<void> {
    return this.inner.disconnect();
  }
}

/** The backend the job runner opens, over `pool` (never closed by it). */
export function agendaBackend(pool: pg.Pool): (fair: FairScheduling) => AgendaBackend {
  return (fair) => new SharedPoolBackend(agendaPoolView(pool), fair);
}

/** The channel Agenda's PostgreSQL backend LISTENs on (its default, which the runner keeps). */
export const AGENDA_NOTIFY_CHANNEL = "agenda:jobs";

/**
 * The pool as Agenda's enqueue side sees it: like agendaPoolView, but a query
 * made inside a Db transaction runs on that transaction's connection. So a
 * job saved by Agenda commits, or rolls back, with the caller's writes.
 */
function transactionalPoolView(db: Db): pg.Pool {
  const query = (text: string | pg.QueryConfig, values?: unknown[]) =>
    db.execute(typeof text === "string" ? { text, values, types: defaultTypes } : { ...text, types: defaultTypes });
  return new Proxy(agendaPoolView(db.pool), {
    get(target, prop) {
      return prop === "query" ? query : Reflect.get(target, prop, target);
    },
  });
}

/**
 * Agenda's PostgreSQL notification channel, publishing only: it never
 * LISTENs (the workers' channels do), so an API replica holds no connection
 * for it. Its NOTIFY goes through the transactional view, and PostgreSQL
 * delivers a NOTIFY made in a transaction only when that commits: no worker
 * looks for a job before its row is visible, and a rolled-back job is never
 * announced.
 */
class PublishingChannel extends PostgresNotificationChannel {
  constructor(pool: pg.Pool) {
    super({ pool, channelName: AGENDA_NOTIFY_CHANNEL });
  }
  override connect(): Promise<void> {
    this.setState("connected");
    return Promise.resolve();
  }
  override disconnect(): Promise<void> {
    this.setState("disconnected");
    return Promise.resolve();
  }
}

/**
 * Queues runs of the async jobs through Agenda's own API (now()), inside the
 * caller's transaction: a job row and the Agenda job that runs it commit
 * together or not at all, so no crash between the two can leave a job
 * queued forever. This Agenda instance is never started: it only writes
 * jobs, so API replicas without workers (AGENTBUS_WORKERS=false) enqueue the
 * same way and never process.
 */
export class AgendaJobQueue {
  private readonly agenda: Agenda;

  /** `source` is recorded as the Agenda job's last_modified_by and in its notification (host:pid). */
  constructor(db: Db, source: string) {
    const pool = transactionalPoolView(db);
    const channel = new PublishingChannel(pool);
    // Agenda connects its backend from its constructor: connecting this one
    // touches no database (schema is ours, the channel only publishes), so
    // there is no failure to go unhandled.
    const backend: AgendaBackend = {
      name: "PostgreSQL (enqueue only)",
      repository: new PostgresJobRepository({ pool, ensureSchema: false }),
      notificationChannel: channel,
      ownsConnection: false,
      connect: () => channel.connect(),
      disconnect: () => channel.disconnect(),
    };
    this.agenda = new Agenda({ backend, name: source });
  }

  /** Queues a run of job `jobId` now. Call inside the transaction that writes the job. */
  async enqueue(kind: JobKindName, jobId: number): Promise<void> {
    await this.agenda.now(agendaJobName(kind), { job_id: jobId });
  }
}

/** $1 untouched since, $2 batch size. Agenda's rows of a name are few (done ones are removed), so the probe is cheap. */
export const ORPHANED_JOBS_SQL = `SELECT j.id, j.kind FROM jobs j
  WHERE j.status IN ('queued', 'processing') AND j.updated_at <= $1
    AND NOT EXISTS (
      SELECT 1 FROM agenda_jobs a
      WHERE a.name = j.kind AND a.data->>'job_id' = j.id::text AND NOT a.disabled
        AND (a.next_run_at IS NOT NULL OR a.locked_at IS NOT NULL)
    )
  ORDER BY j.updated_at LIMIT $2`;

/**
 * Taken first in every fair claim's transaction, in a statement of its own:
 * claims of one kind ($1, the Agenda job name) run one at a time across all
 * workers. See FAIR_NEXT_JOB_SQL for why.
 */
export const FAIR_CLAIM_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('agentbus.fair-claim'), hashtext($1))";

/**
 * Agenda's "find and lock the next job of name $2" (its getNextJobToRun),
 * made fair between keys for the async kinds (docs/decisions.md#job-fairness).
 *
 * Who may take a job. "Running" is an Agenda job of this kind locked and not
 * expired, so the counts cover every worker process, and a worker's own are
 * those whose last_modified_by is its name ($5): the backend's claim, its
 * run's saves and its touch() all stamp the worker's name there, and only a
 * claim sets locked_at (an enqueue inserts the job unlocked). Keys already
 * running $6 jobs of this kind wait. A worker runs $7 jobs (the kind's
 * concurrency) for any keys, and $8 more only for a key with no job of this
 * kind running anywhere: however many slots one key holds, another key's
 * first job starts at once, and keys already running one never use more
 * than $7 of a worker's slots.
 *
 * In which order. Of the due Agenda jobs (or ones whose lock expired) that
 * may be taken: the job of the key that has the fewest jobs of this kind
 * running right now, then of the key served least recently (a key never
 * served first), then the oldest. The same statement stamps the job's
 * dispatched_at, which is what "served least recently" reads, so the turn
 * order is shared by all workers too.
 *
 * Exact under concurrency. Without more, two claims at the same instant
 * would count from snapshots that miss each other's uncommitted lock: two
 * workers could both give their reserved slot to one key's two jobs (then a
 * third key waits), or both let a key past $6. So FAIR_CLAIM_LOCK_SQL comes
 * first in the same transaction: claims of a kind are serialised, and as the
 * claim is a statement of its own under READ COMMITTED (PostgreSQL's
 * default, which the service never changes) its snapshot is taken after the
 * lock was granted and holds every earlier claim, committed before that
 * claim's transaction let go of the lock. Outside a claim the counts only
 * fall (runs end, Agenda unlocks, locks expire; the one exception, a run that
 * outlived its lock and touches it again, is a worker already past its lock
 * lifetime), so what the statement counts is what is true when it locks. SKIP LOCKED still passes over rows
 * that Agenda's own saves hold for a moment. The claims are short (one
 * statement over the few Agenda rows of a kind), so taking them in turn costs
 * a worker a few round trips, not throughput.
 *
 * Parameters as Agenda passes them: $1 lock time, $2 name, $3 next scan at,
 * $4 lock deadline (locks older than this have expired), $5 worker name;
 * then $6 the per-key running cap, $7 the kind's concurrency and $8 the
 * reserved slots per worker. Returns the locked Agenda job's id.
 */
export const FAIR_NEXT_JOB_SQL = `WITH running AS (
    SELECT a.last_modified_by, j.owner_key_id
    FROM agenda_jobs a LEFT JOIN jobs j ON j.id = (a.data->>'job_id')::bigint
    WHERE a.name = $2 AND a.locked_at > $4
  ), busy AS (
    SELECT owner_key_id, count(*) AS n FROM running WHERE owner_key_id IS NOT NULL GROUP BY owner_key_id
  ), here AS (
    SELECT count(*) AS n FROM running WHERE last_modified_by = $5
  ), picked AS (
    SELECT a.id, j.id AS job_id
    FROM agenda_jobs a
    JOIN jobs j ON j.id = (a.data->>'job_id')::bigint
    LEFT JOIN busy b ON b.owner_key_id = j.owner_key_id
    CROSS JOIN here
    WHERE a.name = $2 AND a.disabled = FALSE
      AND ((a.locked_at IS NULL AND a.next_run_at <= $3) OR a.locked_at <= $4)
      AND coalesce(b.n, 0) < $6
      AND (here.n < $7::int OR (here.n < $7::int + $8::int AND b.n IS NULL))
    ORDER BY coalesce(b.n, 0),
      (SELECT max(s.dispatched_at) FROM jobs s WHERE s.kind = j.kind AND s.owner_key_id = j.owner_key_id) ASC NULLS FIRST,
      a.next_run_at, a.priority DESC
    LIMIT 1
    FOR UPDATE OF a SKIP LOCKED
  ), served AS (
    UPDATE jobs SET dispatched_at = $1 FROM picked WHERE jobs.id = picked.job_id
  )
  UPDATE agenda_jobs SET locked_at = $1, last_modified_by = $5
  FROM picked WHERE agenda_jobs.id = picked.id
  RETURNING agenda_jobs.id`;
