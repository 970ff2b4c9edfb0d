/**
 * SQL for the async jobs (docs/decisions.md#job-record; tables of 0008_async_jobs.sql).
 *
 * Every "now" is the caller's (the injected clock), like the purge's. The
 * Agenda job that runs a job is queued through Agenda (AgendaJobQueue,
 * store/agenda.ts) in the same transaction, so a job row and its Agenda job
 * commit together or not at all: no crash between the two can leave a row
 * queued forever.
 */
import type { JsonValue } from "../model/json.js";
import type { ClaimedJob, JobErrorRecord, JobKindName, JobRecord, JobStatusName, NewJob, PdfDownloadRow } from "../model/jobs.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { JobStore } from "../ports/jobs.js";
import { AgendaJobQueue, ORPHANED_JOBS_SQL } from "./agenda.js";
import type { Db } from "./db.js";

interface JobRow {
  id: number;
  kind: JobKindName;
  owner_key_id: string;
  status: JobStatusName;
  result: { [key: string]: JsonValue } | null;
  error: JobErrorRecord | null;
  created_at: Micros;
  updated_at: Micros;
  completed_at: Micros | null;
  expires_at: Micros | null;
  trace_parent: string | null;
  trace_state: string | null;
}

const JOB_COLUMNS = "id, kind, owner_key_id, status, result, error, created_at, updated_at, completed_at, expires_at, trace_parent, trace_state";

const toJobRecord = (row: JobRow): JobRecord => ({
  id: row.id,
  kind: row.kind,
  ownerKeyId: row.owner_key_id,
  status: row.status,
  result: row.result,
  error: row.error,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  completedAt: row.completed_at,
  expiresAt: row.expires_at,
  trace: row.trace_parent === null ? null : { traceparent: row.trace_parent, tracestate: row.trace_state },
});

/** Inserts a queued job; returns its id. Queue its run in the same transaction. */
async function insertJob(db: Db, job: NewJob): Promise<number> {
  const at = formatTimestamp(job.now);
  const { rows } = await db.query<{ id: number }>(
    `INSERT INTO jobs (kind, owner_key_id, status, input, created_at, updated_at, trace_parent, trace_state)
     VALUES ($1, $2, 'queued', $3::jsonb, $4, $4, $5, $6) RETURNING id`,
    [job.kind, job.ownerKeyId, JSON.stringify(job.input), at, job.trace?.traceparent ?? null, job.trace?.tracestate ?? null],
    "jobs_insert",
  );
  return rows[0]!.id;
}

/** The job if it exists and belongs to the key (docs/decisions.md#jobs-private: anyone else's is as unknown as a missing one). */
async function findJob(db: Db, id: number, ownerKeyId: string): Promise<JobRecord | undefined> {
  const { rows } = await db.query<JobRow>(
    `SELECT ${JOB_COLUMNS} FROM jobs WHERE id = $1 AND owner_key_id = $2`,
    [id, ownerKeyId],
    "jobs_find",
  );
  return rows[0] ? toJobRecord(rows[0]) : undefined;
}

/** A job of the key with its PDF bytes, unless the result has expired at `now`. */
async function findJobPdf(db: Db, id: number, ownerKeyId: string, now: Micros): Promise<PdfDownloadRow | undefined> {
  const { rows } = await db.query<{ kind: JobKindName; status: JobStatusName; expires_at: Micros | null; pdf: Buffer | null }>(
    `SELECT kind, status, expires_at, CASE WHEN expires_at > $3 THEN pdf END AS pdf
     FROM jobs WHERE id = $1 AND owner_key_id = $2`,
    [id, ownerKeyId, formatTimestamp(now)],
    "jobs_find_pdf",
  );
  const row = rows[0];
  return row ? { kind: row.kind, status: row.status, expiresAt: row.expires_at, pdf: row.pdf } : undefined;
}

/**
 * Marks an unfinished job processing and counts the attempt; undefined when
 * it already ended or no longer exists (a duplicate or late run: nothing to do).
 */
async function claimJob(db: Db, id: number, now: Micros): Promise<ClaimedJob | undefined> {
  const { rows } = await db.query<Omit<ClaimedJob, "trace"> & { trace_parent: string | null; trace_state: string | null }>(
    `UPDATE jobs SET status = 'processing', attempts = attempts + 1, updated_at = $2
     WHERE id = $1 AND status IN ('queued', 'processing')
     RETURNING id, kind, input, attempts, owner_key_id AS "ownerKeyId", trace_parent, trace_state`,
    [id, formatTimestamp(now)],
    "jobs_claim",
  );
  const row = rows[0];
  if (row === undefined) return undefined;
  const { trace_parent, trace_state, ...claimed } = row;
  return { ...claimed, trace: trace_parent === null ? null : { traceparent: trace_parent, tracestate: trace_state } };
}

/** Completes a processing job: result (and PDF) stored, kept until `expiresAt`. False when it was not processing. */
async function completeJob(
  db: Db,
  id: number,
  outcome: { result: JsonValue; pdf: Uint8Array | null },
  now: Micros,
  expiresAt: Micros,
): Promise<boolean> {
  const at = formatTimestamp(now);
  const { rowCount } = await db.query(
    `UPDATE jobs SET status = 'completed', result = $2::jsonb, pdf = $3, error = NULL, input = NULL,
       updated_at = $4, completed_at = $4, expires_at = $5
     WHERE id = $1 AND status = 'processing'`,
    [id, JSON.stringify(outcome.result), outcome.pdf === null ? null : Buffer.from(outcome.pdf.buffer, outcome.pdf.byteOffset, outcome.pdf.byteLength), at, formatTimestamp(expiresAt)],
    "jobs_complete",
  );
  return rowCount === 1;
}

/** Ends an unfinished job as failed with `error`, kept until `expiresAt`. */
async function failJob(db: Db, id: number, error: JobErrorRecord, now: Micros, expiresAt: Micros): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE jobs SET status = 'failed', error = $2::jsonb, result = NULL, pdf = NULL, updated_at = $3, expires_at = $4
     WHERE id = $1 AND status IN ('queued', 'processing')`,
    [id, JSON.stringify(error), formatTimestamp(now), formatTimestamp(expiresAt)],
    "jobs_fail",
  );
  return rowCount === 1;
}

/** A processing job goes back to queued (it waits for a retry, or for another worker). */
async function releaseJob(db: Db, id: number, now: Micros): Promise<void> {
  await db.query(
    `UPDATE jobs SET status = 'queued', updated_at = $2 WHERE id = $1 AND status = 'processing'`,
    [id, formatTimestamp(now)],
    "jobs_release",
  );
}

/**
 * Unfinished jobs untouched since `before` that no pending Agenda job will
 * run: none queued, none locked by a worker. Normally there are none; they
 * appear when a worker stopped between taking a job and finishing it in a
 * way Agenda does not retry, or when someone removed Agenda's rows.
 */
async function findOrphanedJobs(db: Db, before: Micros, limit: number): Promise<Array<{ id: number; kind: JobKindName }>> {
  const { rows } = await db.query<{ id: number; kind: JobKindName }>(ORPHANED_JOBS_SQL, [formatTimestamp(before), limit]);
  return rows;
}

/** Marks a job as just handled (the sweep re-queued it). */
async function touchJob(db: Db, id: number, now: Micros): Promise<void> {
  await db.query(`UPDATE jobs SET status = 'queued', updated_at = $2 WHERE id = $1 AND status IN ('queued', 'processing')`, [id, formatTimestamp(now)]);
}

/**
 * The key's unfinished jobs (queued or processing, every kind), counted
 * under a per-key transaction lock so that concurrent submissions of one key
 * cannot both pass the cap. Call inside the submitting transaction.
 */
async function lockAndCountUnfinishedJobs(db: Db, ownerKeyId: string): Promise<number> {
  await db.query("SELECT pg_advisory_xact_lock(hashtext('agentbus.jobs'), hashtext($1))", [ownerKeyId], "jobs_owner_lock");
  const { rows } = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM jobs WHERE owner_key_id = $1 AND status IN ('queued', 'processing')",
    [ownerKeyId],
    "jobs_count_unfinished",
  );
  return rows[0]!.n;
}

export class PgJobStore implements JobStore {
  private readonly queue: AgendaJobQueue;

  /** `source` names this process in the Agenda jobs it queues (host:pid). */
  constructor(
    private readonly db: Db,
    source: string,
  ) {
    this.queue = new AgendaJobQueue(db, source);
  }

  submit(job: NewJob, admit: (unfinished: number) => void): Promise<number> {
    return this.db.transaction(async () => {
      admit(await lockAndCountUnfinishedJobs(this.db, job.ownerKeyId));
      const id = await insertJob(this.db, job);
      await this.queue.enqueue(job.kind, id);
      return id;
    });
  }

  find(id: number, ownerKeyId: string): Promise<JobRecord | undefined> {
    return findJob(this.db, id, ownerKeyId);
  }

  findPdf(id: number, ownerKeyId: string, now: Micros): Promise<PdfDownloadRow | undefined> {
    return findJobPdf(this.db, id, ownerKeyId, now);
  }

  claim(id: number, now: Micros): Promise<ClaimedJob | undefined> {
    return claimJob(this.db, id, now);
  }

  complete(id: number, outcome: { result: JsonValue; pdf: Uint8Array | null }, now: Micros, expiresAt: Micros): Promise<boolean> {
    return completeJob(this.db, id, outcome, now, expiresAt);
  }

  fail(id: number, error: JobErrorRecord, now: Micros, expiresAt: Micros): Promise<boolean> {
    return failJob(this.db, id, error, now, expiresAt);
  }

  release(id: number, now: Micros): Promise<void> {
    return releaseJob(this.db, id, now);
  }

  handOver(kind: JobKindName, id: number, now: Micros): Promise<void> {
    return this.db.transaction(async () => {
      await releaseJob(this.db, id, now);
      await this.queue.enqueue(kind, id);
    });
  }

  findOrphaned(before: Micros, limit: number): Promise<Array<{ id: number; kind: JobKindName }>> {
    return findOrphanedJobs(this.db, before, limit);
  }

  requeueOrphan(kind: JobKindName, id: number, now: Micros): Promise<void> {
    return this.db.transaction(async () => {
      await touchJob(this.db, id, now);
      await this.queue.enqueue(kind, id);
    });
  }
}
