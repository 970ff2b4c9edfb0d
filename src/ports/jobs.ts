/**
 * Storage of the async jobs (the `jobs` table): the resource the API shows
 * and the record a run reads and writes. Which run is due, and when, is the
 * job runner's business (Agenda), not this table's.
 */
import type { JsonValue } from "../model/json.js";
import type { ClaimedJob, JobErrorRecord, JobKindName, JobRecord, NewJob, PdfDownloadRow } from "../model/jobs.js";
import type { Micros } from "../model/time.js";

export interface JobStore {
  /**
   * In one transaction: counts the key's unfinished jobs under a per-key
   * lock (so concurrent submissions cannot both pass a cap), hands the count
   * to `admit` (which throws to refuse), inserts the job queued and queues
   * its run. Returns the job id.
   */
  submit(job: NewJob, admit: (unfinished: number) => void): Promise<number>;
  /** The job if it exists and belongs to the key (docs/decisions.md#jobs-private: anyone else's is as unknown as a missing one). */
  find(id: number, ownerKeyId: string): Promise<JobRecord | undefined>;
  /** A job of the key with its PDF bytes, unless the result has expired at `now`. */
  findPdf(id: number, ownerKeyId: string, now: Micros): Promise<PdfDownloadRow | undefined>;
  /**
   * Marks an unfinished job processing and counts the attempt; undefined when
   * it already ended or no longer exists (a duplicate or late run: nothing to do).
   */
  claim(id: number, now: Micros): Promise<ClaimedJob | undefined>;
  /** Completes a processing job: result (and PDF) stored, kept until `expiresAt`. False when it was not processing. */
  complete(id: number, outcome: { result: JsonValue; pdf: Uint8Array | null }, now: Micros, expiresAt: Micros): Promise<boolean>;
  /** Ends an unfinished job as failed with `error`, kept until `expiresAt`. */
  fail(id: number, error: JobErrorRecord, now: Micros, expiresAt: Micros): Promise<boolean>;
  /** A processing job goes back to queued (it waits for a retry). */
  release(id: number, now: Micros): Promise<void>;
  /** A processing job goes back to queued with a new run queued, in one transaction (the worker is stopping). */
  handOver(kind: JobKindName, id: number, now: Micros): Promise<void>;
  /** Unfinished jobs untouched since `before` that no pending run will take (the sweep's). */
  findOrphaned(before: Micros, limit: number): Promise<Array<{ id: number; kind: JobKindName }>>;
  /** An orphan is marked queued as of `now` and a run is queued for it, in one transaction. */
  requeueOrphan(kind: JobKindName, id: number, now: Micros): Promise<void>;
}

/** Which job runner kinds are taken fairly between keys (FAIR_NEXT_JOB_SQL), and how many of one key's run at once. */
export interface FairScheduling {
  /**
   * The fair kinds by Agenda job name, each with its run slots per worker
   * process for keys already running a job of it (the kind's concurrency);
   * the process runs RESERVED_RUN_SLOTS more, for keys running none.
   */
  slots: ReadonlyMap<string, number>;
  maxRunningPerKey: number;
}
