/** An in-memory JobStore for the job use cases' unit tests (PostgreSQL stays in the integration tests). */
import type { JsonValue } from "../../../src/model/json.js";
import type { ClaimedJob, JobErrorRecord, JobKindName, JobRecord, NewJob, PdfDownloadRow } from "../../../src/model/jobs.js";
import type { Micros } from "../../../src/model/time.js";
import type { JobStore } from "../../../src/ports/jobs.js";

interface StoredJob extends JobRecord {
  input: JsonValue;
  attempts: number;
  pdf: Buffer | null;
}

export class FakeJobStore implements JobStore {
  readonly jobs = new Map<number, StoredJob>();
  /** Runs queued, in order (what the job runner would be asked to run). */
  readonly queued: Array<{ kind: JobKindName; id: number }> = [];
  private nextId = 1;

  async submit(job: NewJob, admit: (unfinished: number) => void): Promise<number> {
    admit([...this.jobs.values()].filter((j) => j.ownerKeyId === job.ownerKeyId && (j.status === "queued" || j.status === "processing")).length);
    const id = this.nextId++;
    this.jobs.set(id, {
      id,
      kind: job.kind,
      ownerKeyId: job.ownerKeyId,
      trace: job.trace ?? null,
      status: "queued",
      result: null,
      error: null,
      createdAt: job.now,
      updatedAt: job.now,
      completedAt: null,
      expiresAt: null,
      input: job.input,
      attempts: 0,
      pdf: null,
    });
    this.queued.push({ kind: job.kind, id });
    return id;
  }

  async find(id: number, ownerKeyId: string): Promise<JobRecord | undefined> {
    const job = this.jobs.get(id);
    if (!job || job.ownerKeyId !== ownerKeyId) return undefined;
    const { input: _input, attempts: _attempts, pdf: _pdf, ...record } = job;
    return record;
  }

  async findPdf(id: number, ownerKeyId: string, now: Micros): Promise<PdfDownloadRow | undefined> {
    const job = this.jobs.get(id);
    if (!job || job.ownerKeyId !== ownerKeyId) return undefined;
    const live = job.expiresAt !== null && job.expiresAt > now;
    return { kind: job.kind, status: job.status, expiresAt: job.expiresAt, pdf: live ? job.pdf : null };
  }

  async claim(id: number, now: Micros): Promise<ClaimedJob | undefined> {
    const job = this.jobs.get(id);
    if (!job || (job.status !== "queued" && job.status !== "processing")) return undefined;
    Object.assign(job, { status: "processing", attempts: job.attempts + 1, updatedAt: now });
    return { id, kind: job.kind, input: job.input, attempts: job.attempts, ownerKeyId: job.ownerKeyId, trace: job.trace };
  }

  async complete(id: number, outcome: { result: JsonValue; pdf: Uint8Array | null }, now: Micros, expiresAt: Micros): Promise<boolean> {
    const job = this.jobs.get(id);
    if (!job || job.status !== "processing") return false;
    Object.assign(job, {
      status: "completed",
      result: outcome.result,
      pdf: outcome.pdf && Buffer.from(outcome.pdf),
      error: null,
      updatedAt: now,
      completedAt: now,
      expiresAt,
    });
    return true;
  }

  async fail(id: number, error: JobErrorRecord, now: Micros, expiresAt: Micros): Promise<boolean> {
    const job = this.jobs.get(id);
    if (!job || (job.status !== "queued" && job.status !== "processing")) return false;
    Object.assign(job, { status: "failed", error, result: null, pdf: null, updatedAt: now, expiresAt });
    return true;
  }

  async release(id: number, now: Micros): Promise<void> {
    const job = this.jobs.get(id);
    if (job?.status === "processing") Object.assign(job, { status: "queued", updatedAt: now });
  }

  async handOver(kind: JobKindName, id: number, now: Micros): Promise<void> {
    await this.release(id, now);
    this.queued.push({ kind, id });
  }

  async findOrphaned(before: Micros, limit: number): Promise<Array<{ id: number; kind: JobKindName }>> {
    const covered = new Set(this.queued.map((q) => q.id));
    return [...this.jobs.values()]
      .filter((j) => (j.status === "queued" || j.status === "processing") && j.updatedAt <= before && !covered.has(j.id))
      .slice(0, limit)
      .map((j) => ({ id: j.id, kind: j.kind }));
  }

  async requeueOrphan(kind: JobKindName, id: number, now: Micros): Promise<void> {
    const job = this.jobs.get(id);
    if (job && (job.status === "queued" || job.status === "processing")) Object.assign(job, { status: "queued", updatedAt: now });
    this.queued.push({ kind, id });
  }
}
