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
 * process open); jobs take turns. A job past its deadline ends the thread;
 * the jobs queued behind it are sent again to a new one, so only the culprit
 * fails. The thread imports json-schema.ts itself, so the rules live in one place.
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import type { JsonObject, JsonValue } from "../model/json.js";
import type { Violation } from "./json-schema.js";


/** Past this a schema is refused (compile) or a message's metadata is reported unverifiable (validate). */
export const SCHEMA_JOB_DEADLINE_MS = 5_000;

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

class SchemaThread {
  private worker: Worker | undefined;
  /** Deadlines run from when the thread is ready: starting it (and loading Ajv) is not the job's cost. */
  private ready = false;
  private readonly jobs = new Map<number, Job>();
  private next = 0;

  run(schema: JsonObject, data: JsonValue | undefined, deadlineMs: number): Promise<Outcome> {
    const worker = this.start();
    const id = ++this.next;
    return new Promise<Outcome>((resolve) => {
      const job: Job = { schema, data, deadlineMs, resolve, timer: undefined };
      this.jobs.set(id, job);
      if (this.ready) this.arm(id, job);
      worker.postMessage({ id, schema, data });
    });
  }

  private arm(id: number, job: Job): void {
    // The deadline counts from when the job is sent; a job queued behind a
    // slow one may see part of its wait, but it is re-sent, never failed, when
    // that one is ended.
    job.timer = setTimeout(() => {
      this.jobs.delete(id);
      job.resolve({ error: `timeout:${job.deadlineMs}` });
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
        for (const [id, job] of this.jobs) if (job.timer === undefined) this.arm(id, job);
      }
      if (msg.id === undefined) return;
      const job = this.jobs.get(msg.id);
      if (!job) return;
      this.jobs.delete(msg.id);
      clearTimeout(job.timer);
      job.resolve(msg);
    });
    const lost = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      for (const [id, job] of this.jobs) {
        this.jobs.delete(id);
        clearTimeout(job.timer);
        job.resolve({ error: `The schema thread stopped: ${why}` });
      }
    };
    worker.on("error", (err) => lost(String(err)));
    worker.on("exit", (code) => lost(`exit code ${code}`));
    this.worker = worker;
    return worker;
  }

  /** Ends the stuck thread and sends every job still waiting to a new one. */
  private restart(): void {
    const old = this.worker;
    this.worker = undefined;
    void old?.terminate();
    if (this.jobs.size === 0) return;
    const worker = this.start();
    for (const [id, job] of this.jobs) {
      clearTimeout(job.timer);
      job.timer = undefined;
      worker.postMessage({ id, schema: job.schema, data: job.data });
    }
  }
}

const thread = new SchemaThread();

/** Starts the schema thread ahead of the first schema (idempotent; it is unref'd). */
export function startSchemaThread(): void {
  thread.start();
}

function unwrap(outcome: Outcome, what: string): Outcome {
  if (outcome.error === undefined) return outcome;
  if (outcome.error.startsWith("timeout:")) return { error: `${what} took longer than ${outcome.error.slice(8)} ms` };
  throw new Error(`Checking a metadata schema failed: ${outcome.error.split("\n")[0]}`);
}

/** Why the schema cannot be used, or undefined when it can; compiled off the event loop. */
export async function schemaProblemOffThread(schema: JsonObject, deadlineMs = SCHEMA_JOB_DEADLINE_MS): Promise<string | undefined> {
  const outcome = unwrap(await thread.run(schema, undefined, deadlineMs), "compiling it");
  return outcome.error !== undefined ? `is too expensive: ${outcome.error}; make it smaller or simpler` : outcome.problem;
}

/** The ways data fails the schema, checked off the event loop. An empty schema accepts anything. */
export async function violationsOffThread(schema: JsonObject, data: JsonValue, deadlineMs = SCHEMA_JOB_DEADLINE_MS): Promise<Violation[]> {
  if (Object.keys(schema).length === 0) return [];
  const outcome = unwrap(await thread.run(schema, data, deadlineMs), "checking it");
  if (outcome.error !== undefined) return [{ field: "metadata", issue: `could not be checked against the schema: ${outcome.error}` }];
  return outcome.violations ?? [];
}
