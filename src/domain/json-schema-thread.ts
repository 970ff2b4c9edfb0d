/**
 * Runs json-schema.ts (compiling metadata schemas, validating metadata) on a
 * worker thread, never on the API thread. Ajv compiles a schema into
 * JavaScript and V8 then compiles that: about half a millisecond per property
 * on this service's hardware, so a schema within the size limits can still cost
 * a tenth of a second, and its first validation as much again
 * (docs/decisions.md#schemas-off-thread).
 * json-schema.ts bounds the cost statically (size with $refs expanded,
 * depth, linear-time regular expressions); this thread keeps even that cost
 * off the event loop, and a deadline ends a job that overruns anyway.
 *
 * One thread per process, started on first use and unref'd (never holds the
 * process open). Every key's jobs take turns on it: the jobs wait here, one
 * queue per key, and the thread is given at most WINDOW of them at a time,
 * one per key, the key served least recently first (fair-queue.ts). So one
 * key's backlog of costly checks delays another key's check by about one
 * job, not by the backlog; and a key may hold MAX_SCHEMA_JOBS_PER_KEY jobs.
 * A job past its deadline ends the thread; the jobs sent with it and those
 * waiting go to a new one, so only the culprit fails. The thread imports
 * json-schema.ts itself, so the rules live in one place.
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { ApiError } from "../model/errors.js";
import type { JsonObject, JsonValue } from "../model/json.js";
import { FairQueue } from "./fair-queue.js";
import type { Violation } from "./json-schema.js";


/** Past this a schema is refused (compile) or a message's metadata is reported unverifiable (validate). */
export const SCHEMA_JOB_DEADLINE_MS = 5_000;
/**
 * The most jobs one key may have waiting for or on the thread; beyond, 429
 * schema_checks_busy. Posting with many requests at once gains a key nothing
 * (its jobs take turns with every other key's), so this costs no honest
 * client throughput and bounds what one key's backlog holds in memory.
 */
export const MAX_SCHEMA_JOBS_PER_KEY = 32;

const WORKER_CODE = `
const { parentPort, workerData } = require("node:worker_threads");
// Lowest CPU priority for this thread only (Linux: a thread id is a pid to
// setpriority): on a busy machine the API thread must win the core.
try {
  const tid = Number(require("node:fs").readlinkSync("/proc/thread-self").split("/").pop());
  if (tid > 0) require("node:os").setPriority(tid, 19);
} catch {}
const load = workerData.tsx === undefined
  ? import(workerData.module)
  : import(workerData.tsx).then((tsx) => tsx.tsImport(workerData.module, workerData.module));
load.then((rules) => {
  parentPort.on("message", ({ id, schema, data }) => {
    try {
      const result = data === undefined ? { problem: rules.schemaProblem(schema) } : { violations: rules.violations(schema, data) };
      parentPort.postMessage({ id, ...result });
    } catch (err) {
      parentPort.postMessage({ id, error: String((err && err.stack) || err) });
    }
  });
  parentPort.postMessage({ ready: true });
});
`;

type Outcome = { problem?: string; violations?: Violation[]; error?: string };

interface Job {
  key: string;
  schema: JsonObject;
  data: JsonValue | undefined;
  deadlineMs: number;
  resolve: (outcome: Outcome) => void;
  timer: NodeJS.Timeout | undefined;
}

// From source (tests, `npm run dev`) the rules are TypeScript, which a
// worker cannot import by itself (Node 20 does not pass module hooks on to
// workers): tsx's API loads them there.
const fromSource = import.meta.url.endsWith(".ts");
// tsx is a development dependency: resolved only when running from source.
const tsxApi = (): string => {
  const pkg = createRequire(import.meta.url).resolve("tsx/package.json");
  return pathToFileURL(join(dirname(pkg), "dist/esm/api/index.mjs")).href;
};

/** Jobs of different keys on the thread at once: the next is waiting there as one finishes. */
const WINDOW = 2;

class SchemaThread {
  private worker: Worker | undefined;
  /** Deadlines run from when the thread is ready: starting it (and loading Ajv) is not the job's cost. */
  private ready = false;
  /** Jobs not yet sent, per key; the thread gets them one key at a time (fair-queue.ts). */
  private readonly waiting = new FairQueue<Job>(MAX_SCHEMA_JOBS_PER_KEY);
  /** Jobs sent to the thread, by id. */
  private readonly sent = new Map<number, Job>();
  private next = 0;

  run(key: string, schema: JsonObject, data: JsonValue | undefined, deadlineMs: number): Promise<Outcome> {
    return new Promise<Outcome>((resolve, reject) => {
      const job: Job = { key, schema, data, deadlineMs, resolve, timer: undefined };
      if (!this.waiting.push(key, job)) {
        reject(tooManyChecks());
        return;
      }
      this.pump();
    });
  }

  /** Sends waiting jobs while the window has room. */
  private pump(): void {
    while (this.sent.size < WINDOW) {
      const taken = this.waiting.take();
      if (taken === undefined) return;
      this.send(taken.item);
    }
  }

  private send(job: Job): void {
    const worker = this.start();
    const id = ++this.next;
    this.sent.set(id, job);
    if (this.ready) this.arm(id, job);
    worker.postMessage({ id, schema: job.schema, data: job.data });
  }

  /** The job is answered (or failed): its key's next job may go. */
  private finish(id: number, job: Job, outcome: Outcome): void {
    this.sent.delete(id);
    clearTimeout(job.timer);
    this.waiting.done(job.key);
    job.resolve(outcome);
  }

  private arm(id: number, job: Job): void {
    // The deadline counts from when the job is sent; the thread holds at most
    // WINDOW jobs, so it sees at most that many others' run time, and a job
    // sent behind a slow one is re-sent, never failed, when that one is ended.
    job.timer = setTimeout(() => {
      this.finish(id, job, { error: `timeout:${job.deadlineMs}` });
      this.restart();
    }, job.deadlineMs);
    job.timer.unref();
  }

  start(): Worker {
    if (this.worker) return this.worker;
    this.ready = false;
    const module = new URL(`./json-schema.${fromSource ? "ts" : "js"}`, import.meta.url).href;
    const worker = new Worker(WORKER_CODE, {
      eval: true,
      workerData: { module, tsx: fromSource ? tsxApi() : undefined },
    });
    worker.unref();
    worker.on("message", (msg: Outcome & { id?: number; ready?: boolean }) => {
      if (msg.ready === true && this.worker === worker) {
        this.ready = true;
        for (const [id, job] of this.sent) if (job.timer === undefined) this.arm(id, job);
      }
      if (msg.id === undefined || this.worker !== worker) return;
      const job = this.sent.get(msg.id);
      if (!job) return;
      this.finish(msg.id, job, msg);
      this.pump();
    });
    const lost = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      // The jobs on the thread fail; those still waiting go to a new one.
      for (const [id, job] of this.sent) this.finish(id, job, { error: `The schema thread stopped: ${why}` });
      this.pump();
    };
    worker.on("error", (err) => lost(String(err)));
    worker.on("exit", (code) => lost(`exit code ${code}`));
    this.worker = worker;
    return worker;
  }

  /** Ends the stuck thread and sends the jobs that were on it to a new one, then the waiting ones. */
  private restart(): void {
    const old = this.worker;
    this.worker = undefined;
    void old?.terminate();
    const resend = [...this.sent];
    this.sent.clear();
    for (const [, job] of resend) {
      clearTimeout(job.timer);
      job.timer = undefined;
      this.send(job);
    }
    this.pump();
  }
}

const thread = new SchemaThread();

function tooManyChecks(): ApiError {
  return new ApiError("schema_checks_busy", `This key has ${MAX_SCHEMA_JOBS_PER_KEY} metadata schema checks waiting or running; that is as many as one key may`, {
    details: { limit: MAX_SCHEMA_JOBS_PER_KEY, retry_after: 1 },
    headers: { "Retry-After": "1" },
  });
}

/** Starts the schema thread ahead of the first schema (idempotent; it is unref'd). */
export function startSchemaThread(): void {
  thread.start();
}

function unwrap(outcome: Outcome, what: string): Outcome {
  if (outcome.error === undefined) return outcome;
  if (outcome.error.startsWith("timeout:")) return { error: `${what} took longer than ${outcome.error.slice(8)} ms` };
  throw new Error(`Checking a metadata schema failed: ${outcome.error.split("\n")[0]}`);
}

/**
 * Why the schema cannot be used, or undefined when it can; compiled off the
 * event loop, in turn with the other keys' jobs (`key`: the caller's key id).
 */
export async function schemaProblemOffThread(key: string, schema: JsonObject, deadlineMs = SCHEMA_JOB_DEADLINE_MS): Promise<string | undefined> {
  const outcome = unwrap(await thread.run(key, schema, undefined, deadlineMs), "compiling it");
  return outcome.error !== undefined ? `is too expensive: ${outcome.error}; make it smaller or simpler` : outcome.problem;
}

/**
 * The ways data fails the schema, checked off the event loop in turn with
 * the other keys' jobs (`key`: the caller's key id). An empty schema accepts anything.
 */
export async function violationsOffThread(key: string, schema: JsonObject, data: JsonValue, deadlineMs = SCHEMA_JOB_DEADLINE_MS): Promise<Violation[]> {
  if (Object.keys(schema).length === 0) return [];
  const outcome = unwrap(await thread.run(key, schema, data, deadlineMs), "checking it");
  if (outcome.error !== undefined) return [{ field: "metadata", issue: `could not be checked against the schema: ${outcome.error}` }];
  return outcome.violations ?? [];
}
