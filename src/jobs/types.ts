/**
 * What a job kind is. One module per kind (src/jobs/<kind>.ts) exports a
 * JobKind; src/jobs/index.ts lists them. The runner knows nothing else about
 * any kind.
 */
import type { BackoffStrategy } from "agenda";
import type { Clock } from "../model/time.js";
import type { Logger } from "../platform/logger.js";
import type { JobPostingParser } from "../parsing/index.js";
import type { PdfRenderer } from "../pdf/renderer.js";
import type { JobStore } from "../ports/jobs.js";
import type { PurgeStore } from "../ports/purge.js";
import type { PlannerStatistics } from "../ports/statistics.js";
import type { TranscriptFetcher } from "../transcripts/index.js";

/** What the webhook-sweep job nudges: this process's webhook dispatcher. */
export interface WebhookSweeper {
  sweep(): Promise<void>;
}

/** What every job may use. Later kinds add what they need here (HTTP client, renderer, …). */
export interface JobDependencies {
  jobs: JobStore;
  purge: PurgeStore;
  /** The hot tables' planner statistics; the analyze job refreshes them. */
  statistics?: PlannerStatistics;
  clock: Clock;
  logger: Logger;
  /** This process's webhook dispatcher; the webhook-sweep job nudges it. */
  webhooks?: WebhookSweeper;
  /** This process's headless Chromium; the pdf job renders with it. */
  pdf?: PdfRenderer;
  /** The job-posting parser; absent without OPENAI_API_KEY. */
  jobPostingParser?: JobPostingParser;
  /** The transcript fetcher. */
  transcripts?: TranscriptFetcher;
}

/** One run of a job. */
export interface JobRun<Data> {
  data: Data;
  /**
   * Aborted when the worker is shutting down: stop at the next safe point and
   * return (jobs are idempotent, so the rest is done by the next run).
   */
  signal: AbortSignal;
  /** Extends this run's lock; call between the steps of anything that may outlast lockLifetimeMs. */
  touch(): Promise<void>;
  logger: Logger;
}

export interface JobKind<Data = Record<string, never>> {
  /** The Agenda job name; stored in agenda_jobs, so never rename a kind that has jobs queued. */
  readonly name: string;
  /**
   * For maintenance kinds: a human interval ("1 minute"). One job of this
   * kind exists across all workers, and one worker at a time runs it.
   */
  readonly every?: string;
  /**
   * How long a run may go without touch() before another worker may take it
   * over (a crashed worker's job is retried after this). Keep it short: the
   * runner also keeps a timer of half of it alive after each run.
   */
  readonly lockLifetimeMs: number;
  /** Runs of this kind at once in one worker process; default 1. A function reads it from the dependencies (configuration). */
  readonly concurrency?: number | ((deps: JobDependencies) => number);
  /**
   * Jobs of this kind belong to keys (rows of the jobs table): workers take
   * them fairly between keys and lock only as many as they run
   * (store/agenda.ts, FAIR_NEXT_JOB_SQL).
   */
  readonly fair?: boolean;
  /** Retries after a failure; default none (a recurring kind simply runs again at its next interval). */
  readonly backoff?: BackoffStrategy;
  run(run: JobRun<Data>, deps: JobDependencies): Promise<void>;
}

/**
 * Thrown by a run whose failure it has logged itself, so that Agenda still
 * schedules the retry but the runner does not log the same attempt again.
 */
export class AttemptLogged extends Error {
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = "AttemptLogged";
  }
}
