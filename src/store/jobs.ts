/**
 * SQL for the async jobs (decisions J-1, A5; tables of 0008_async_jobs.sql).
 *
 * Every "now" is the caller's (the injected clock), like the purge's. The
 * Agenda job that runs a job is written by enqueueJob() in the caller's
 * transaction, so a job row and its Agenda job commit together or not at
 * all: no crash between the two can leave a row queued forever.
 */
import type { JsonValue } from "../model/json.js";
import { agendaJobName, type ClaimedJob, type JobErrorRecord, type JobKindName, type JobRecord, type JobStatusName, type NewJob, type PdfDownloadRow } from "../model/jobs.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { JobStore } from "../ports/jobs.js";
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
}

const JOB_COLUMNS = "id, kind, owner_key_id, status, result, error, created_at, updated_at, completed_at, expires_at";

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
});

/** The channel Agenda's PostgreSQL backend LISTENs on (its default, which the runner keeps). */
export const AGENDA_NOTIFY_CHANNEL = "agenda:jobs";

/**
 * Queues the Agenda job that runs job $2, and wakes the workers.
 *
 * Written here rather than through agenda.now() so that it joins the caller's
 * transaction: agenda_jobs is our table (0006_jobs_and_history.sql, checked
 * against the installed backend by test/integration/worker.test.ts), and the
 * row is what @agendajs/postgres-backend's saveJob() writes for now(). The
 * NOTIFY carries the payload of its PostgresNotificationChannel.publish()
 * (a worker then fills its queue for that name at once); PostgreSQL delivers
 * it only when the transaction commits, so no worker looks before the job
 * row is visible. API replicas without workers enqueue the same way.
 */
const ENQUEUE_SQL = `WITH queued AS (
    INSERT INTO agenda_jobs (name, priority, next_run_at, type, data, last_modified_by)
    VALUES ($1, 0, now(), 'normal', jsonb_build_object('job_id', $2::bigint), $3)
    RETURNING id, name, next_run_at, priority
  )
  SELECT pg_notify('${AGENDA_NOTIFY_CHANNEL}', json_build_object(
    'jobId', q.id, 'jobName', q.name, 'nextRunAt', q.next_run_at, 'priority', q.priority,
    'timestamp', now(), 'source', $3::text)::text)
  FROM queued q`;

async function enqueueJob(db: Db, kind: JobKindName, jobId: number, source: string): Promise<void> {
  await db.query(ENQUEUE_SQL, [agendaJobName(kind), jobId, source], "jobs_enqueue");
}

/** Inserts a queued job; returns its id. Call enqueueJob() in the same transaction. */
async function insertJob(db: Db, job: NewJob): Promise<number> {
  const at = formatTimestamp(job.now);
  const { rows } = await db.query<{ id: number }>(
    `INSERT INTO jobs (kind, owner_key_id, status, input, created_at, updated_at)
     VALUES ($1, $2, 'queued', $3::jsonb, $4, $4) RETURNING id`,
    [job.kind, job.ownerKeyId, JSON.stringify(job.input), at],
    "jobs_insert",
  );
  return rows[0]!.id;
}

/** The job if it exists and belongs to the key (A5: anyone else's is as unknown as a missing one). */
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
  const { rows } = await db.query<ClaimedJob>(
    `UPDATE jobs SET status = 'processing', attempts = attempts + 1, updated_at = $2
     WHERE id = $1 AND status IN ('queued', 'processing')
     RETURNING id, kind, input, attempts`,
    [id, formatTimestamp(now)],
    "jobs_claim",
  );
  return rows[0];
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

/** $1 untouched since, $2 batch size. Agenda's rows of a name are few (done ones are removed), so the probe is cheap. */
export const ORPHANED_JOBS_SQL = `SELECT j.id, j.kind FROM jobs j
  WHERE j.status IN ('queued', 'processing') AND j.updated_at <= $1
    AND NOT EXISTS (
      SELECT 1 FROM agenda_jobs a
      WHERE a.name = j.kind AND a.data->>'job_id' = j.id::text AND NOT a.disabled
        AND (a.next_run_at IS NOT NULL OR a.locked_at IS NOT NULL)
    )
  ORDER BY j.updated_at LIMIT $2`;

/** Marks a job as just handled (the sweep re-queued it). */
async function touchJob(db: Db, id: number, now: Micros): Promise<void> {
  await db.query(`UPDATE jobs SET status = 'queued', updated_at = $2 WHERE id = $1 AND status IN ('queued', 'processing')`, [id, formatTimestamp(now)]);
}

/**
 * Agenda's "find and lock the next job of name $2" (its getNextJobToRun),
 * made fair between keys for the async kinds. Of the due Agenda jobs (or
 * ones whose lock expired), it takes the job of the key that has the fewest
 * jobs of this kind running right now, then of the key served least
 * recently (a key never served first), then the oldest; keys already
 * running $6 jobs of this kind wait. "Running" is an Agenda job locked and
 * not expired, so the count covers every worker process. The same statement
 * stamps the job's dispatched_at, which is what "served least recently"
 * reads, so the turn order is shared by all workers too. Two workers
 * claiming in the same instant may both favour the same key (each skips the
 * other's uncommitted lock); the next claim evens it out.
 *
 * Parameters as Agenda passes them: $1 lock time, $2 name, $3 next scan at,
 * $4 lock deadline (locks older than this have expired), $5 worker name;
 * then $6 the per-key running cap. Returns agenda_jobs rows.
 */
export const FAIR_NEXT_JOB_SQL = `WITH busy AS (
    SELECT j.owner_key_id, count(*) AS n
    FROM agenda_jobs a JOIN jobs j ON j.id = (a.data->>'job_id')::bigint
    WHERE a.name = $2 AND a.locked_at > $4
    GROUP BY j.owner_key_id
  ), picked AS (
    SELECT a.id, j.id AS job_id
    FROM agenda_jobs a
    JOIN jobs j ON j.id = (a.data->>'job_id')::bigint
    LEFT JOIN busy b ON b.owner_key_id = j.owner_key_id
    WHERE a.name = $2 AND a.disabled = FALSE
      AND ((a.locked_at IS NULL AND a.next_run_at <= $3) OR a.locked_at <= $4)
      AND coalesce(b.n, 0) < $6
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
  RETURNING agenda_jobs.*`;

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
  constructor(private readonly db: Db) {}

  submit(job: NewJob, source: string, admit: (unfinished: number) => void): Promise<number> {
    return this.db.transaction(async () => {
      admit(await lockAndCountUnfinishedJobs(this.db, job.ownerKeyId));
      const id = await insertJob(this.db, job);
      await enqueueJob(this.db, job.kind, id, source);
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

  handOver(kind: JobKindName, id: number, now: Micros, source: string): Promise<void> {
    return this.db.transaction(async () => {
      await releaseJob(this.db, id, now);
      await enqueueJob(this.db, kind, id, source);
    });
  }

  findOrphaned(before: Micros, limit: number): Promise<Array<{ id: number; kind: JobKindName }>> {
    return findOrphanedJobs(this.db, before, limit);
  }

  requeueOrphan(kind: JobKindName, id: number, now: Micros, source: string): Promise<void> {
    return this.db.transaction(async () => {
      await touchJob(this.db, id, now);
      await enqueueJob(this.db, kind, id, source);
    });
  }
}
