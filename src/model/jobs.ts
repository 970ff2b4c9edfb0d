/**
 * The async jobs' vocabulary (docs/decisions.md#job-record, #jobs-private; table of 0008_async_jobs.sql):
 * what a job is as stored and shown, and how long its result is kept.
 */
import type { JsonValue } from "./json.js";
import { MICROS_PER_SECOND, type Micros } from "./time.js";
import type { TraceContext } from "./trace.js";

export const JOB_KINDS = ["pdf", "job_posting", "transcript"] as const;
export type JobKindName = (typeof JOB_KINDS)[number];
export type JobStatusName = "queued" | "processing" | "completed" | "failed";

export interface JobErrorRecord {
  error: string;
  message: string;
}

export interface JobRecord {
  id: number;
  kind: JobKindName;
  ownerKeyId: string;
  status: JobStatusName;
  /** The kind's result as stored (proto JSON); null until completed and once purged. */
  result: { [key: string]: JsonValue } | null;
  error: JobErrorRecord | null;
  createdAt: Micros;
  updatedAt: Micros;
  completedAt: Micros | null;
  expiresAt: Micros | null;
  /** The trace it was submitted in (docs/decisions.md#trace-context); null for jobs from before traces were kept. */
  trace: TraceContext | null;
}

export interface PdfDownloadRow {
  kind: JobKindName;
  status: JobStatusName;
  expiresAt: Micros | null;
  /** Read only while the result is live at `now`. */
  pdf: Buffer | null;
}

export interface ClaimedJob {
  id: number;
  kind: JobKindName;
  input: JsonValue;
  /** Runs started, this one included. */
  attempts: number;
  /** The key that submitted it (whose share of the machine it runs on). */
  ownerKeyId: string;
  /** The trace it was submitted in; its run is a span of it. */
  trace: TraceContext | null;
}

/** A job to be created queued. */
export interface NewJob {
  kind: JobKindName;
  ownerKeyId: string;
  input: JsonValue;
  now: Micros;
  /** The use case sets it; absent: stored without. */
  trace?: TraceContext;
}

/**
 * Run slots a worker process keeps per fair job kind beyond the kind's
 * concurrency, for a key with no job of that kind running anywhere
 * (docs/decisions.md#job-fairness): however many slots one key holds,
 * another key's first job starts at once. Keys already running a job of the
 * kind share the other `concurrency` slots.
 */
export const RESERVED_RUN_SLOTS = 1;

/** How long a result (and a PDF) is kept after the job ended (24 hours: docs/decisions.md#job-record). */
export const RESULT_TTL_SECONDS = 24 * 60 * 60;
/** How long an expired job is remembered (410 on download) before it is deleted (404). */
export const TOMBSTONE_DAYS = 7;

export const resultExpiry = (endedAt: Micros): Micros => endedAt + RESULT_TTL_SECONDS * MICROS_PER_SECOND;

/**
 * The job runner's name for the runs of a kind: the kind itself. Stored with
 * every queued run, so never renamed while runs are queued.
 */
export const agendaJobName = (kind: JobKindName): string => kind;
