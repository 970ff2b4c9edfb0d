/**
 * The reserved run slot (docs/decisions.md#job-fairness): a key with no job
 * of a kind running is never kept waiting for a slot by a key that holds all
 * of them, on one worker process or several, and claims made at the same
 * instant cannot give the reserve to a key that is already running one.
 *
 * Slow jobs are job-posting parses against the local model server holding
 * its answers: the busy key's jobs stay in flight until the test lets go, so
 * what the records show (when each job was dispatched, when it completed) is
 * an order, not a latency. Each hold ends when the other key's request has
 * arrived or after HOLD_MS, whichever is first: without the reserve that
 * request only comes once a busy job has ended, and the order shows it.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startWorker, type Worker } from "../../src/app.js";
import { JOB_KINDS, type JobKindName } from "../../src/model/jobs.js";
import { createLogger } from "../../src/platform/logger.js";
import { agendaBackend } from "../../src/store/agenda.js";
import { Db } from "../../src/store/db.js";
import { PgJobStore } from "../../src/store/jobs.js";
import { FakeOpenAI } from "../fakes/openai-server.js";
import { useTestDatabase } from "../support/database.js";
import { eventually } from "../support/eventually.js";
import { QUIET_JOBS } from "../support/job-fakes.js";
import { untilWaitingForLock } from "../support/locks.js";
import { waitForJob } from "../support/pdf.js";
import { mintKey, rest, startTestServer, testConfig, type TestServer } from "../support/server.js";

/** job_posting runs this many at once per worker process (src/jobs/job-posting.ts). */
const POSTING_SLOTS = 4;
/** How long a hold waits for the other key's request before letting the busy key's answers go. */
const HOLD_MS = 3_000;

const POSTING = {
  title: "Baker",
  company: null,
  location: null,
  salary_min: null,
  salary_max: null,
  salary_currency: null,
  employment_type: null,
  requirements: [],
  skills: [],
  benefits: [],
  description_summary: null,
};

/** The model server's answers wait long past HOLD_MS without timing out. */
const workerEnv = (llm: FakeOpenAI, maxRunningPerKey: number) => ({
  AGENTBUS_WORKERS: "true",
  OPENAI_API_KEY: llm.apiKey,
  OPENAI_BASE_URL: llm.baseUrl,
  AGENTBUS_LLM_MODEL: llm.model,
  AGENTBUS_LLM_TIMEOUT_MS: "30000",
  AGENTBUS_JOBS_MAX_RUNNING_PER_KEY: String(maxRunningPerKey),
});

async function submitParse(base: string, key: string, text: string): Promise<number> {
  const res = await rest(base, "POST", "/v1/jobs/parse", { key, body: { text } });
  if (res.status !== 202) throw new Error(`submission answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.job_id as number;
}

/** Model requests received so far whose posting text contains `marker`. */
const requestsFor = (llm: FakeOpenAI, marker: string) => llm.requests.filter((r) => r.text.includes(marker)).length;

/** True once `count` requests for `marker` arrived; false after HOLD_MS. */
async function arrived(llm: FakeOpenAI, marker: string, count: number): Promise<boolean> {
  return eventually(async () => requestsFor(llm, marker) >= count, HOLD_MS).then(
    () => true,
    () => false,
  );
}

interface Timeline {
  dispatchedMs: number;
  completedMs: number;
}

/**
 * When each job was dispatched to a worker and when it completed, from the
 * jobs table, in whole milliseconds: the dispatch is stamped to the
 * millisecond, and the system clock's microseconds within one are not a
 * reading, so "before" means an earlier millisecond.
 */
async function timelines(server: TestServer, ids: number[]): Promise<Timeline[]> {
  const { rows } = await server.app.pool.query<{ dispatched_at: number; completed_at: number }>(
    "SELECT dispatched_at, completed_at FROM jobs WHERE id = ANY($1) ORDER BY id",
    [ids],
  );
  return rows.map((r) => ({ dispatchedMs: Math.floor(r.dispatched_at / 1000), completedMs: Math.floor(r.completed_at / 1000) }));
}

async function allCompleted(server: TestServer, key: string, ids: number[]): Promise<void> {
  for (const id of ids) expect((await waitForJob(server.url, key, id, 60_000)).status).toBe("completed");
}

/**
 * Key "busy" submits `busyJobs` parses and is let into `slots` of them (all
 * the slots there are; `whenFull` runs then); then key "other" submits one.
 * Returns both keys' records.
 */
async function busyKeyThenOther(server: TestServer, llm: FakeOpenAI, slots: number, busyJobs: number, whenFull = async () => {}) {
  const busy = await mintKey(server.url);
  const other = await mintKey(server.url);
  const release = llm.hold();
  try {
    const busyIds: number[] = [];
    for (let n = 1; n <= busyJobs; n++) busyIds.push(await submitParse(server.url, busy, `Baker wanted, posting busy-${n}`));
    await eventually(async () => requestsFor(llm, "posting busy-") === slots);
    await whenFull();
    const otherId = await submitParse(server.url, other, "Baker wanted, posting other-1");
    await arrived(llm, "posting other-", 1);
    release();
    await allCompleted(server, busy, busyIds);
    await allCompleted(server, other, [otherId]);
    return { busy: await timelines(server, busyIds), other: (await timelines(server, [otherId]))[0]! };
  } finally {
    release();
  }
}

describe("one worker process", () => {
  let llm: FakeOpenAI;
  let server: TestServer;
  beforeAll(async () => {
    llm = await FakeOpenAI.start();
    // One key may hold every job_posting slot of the worker: the finding's shape (running cap = slot count).
    server = await startTestServer(workerEnv(llm, POSTING_SLOTS), { jobs: QUIET_JOBS });
  });
  beforeEach(() => {
    llm.reset();
    llm.answer = POSTING;
  });
  afterAll(async () => {
    await server?.close();
    await llm?.close();
  });

  it("starts another key's only job before any of the busy key's running jobs ends, when the busy key holds every slot", async () => {
    const { busy, other } = await busyKeyThenOther(server, llm, POSTING_SLOTS, POSTING_SLOTS + 2);
    const firstEnd = Math.min(...busy.map((t) => t.completedMs));
    expect(other.dispatchedMs).toBeLessThan(firstEnd);
    // The busy key's queued jobs did not take the reserve: they waited for one of its own to end.
    for (const queued of busy.slice(POSTING_SLOTS)) expect(queued.dispatchedMs).toBeGreaterThanOrEqual(firstEnd);
  }, 60_000);

  it("runs a lone key's jobs in all of the kind's slots at once", async () => {
    const lone = await mintKey(server.url);
    const release = llm.hold();
    try {
      const ids: number[] = [];
      for (let n = 1; n <= POSTING_SLOTS + 1; n++) ids.push(await submitParse(server.url, lone, `Baker wanted, posting lone-${n}`));
      // Every slot is in use before any answer comes back: the reserve costs a single user nothing.
      await eventually(async () => requestsFor(llm, "posting lone-") === POSTING_SLOTS);
      release();
      await allCompleted(server, lone, ids);
      const records = await timelines(server, ids);
      const firstEnd = Math.min(...records.map((t) => t.completedMs));
      expect(records.filter((t) => t.dispatchedMs < firstEnd)).toHaveLength(POSTING_SLOTS);
    } finally {
      release();
    }
  }, 60_000);
});

describe("two worker processes", () => {
  let llm: FakeOpenAI;
  let server: TestServer;
  let worker: Worker;
  beforeAll(async () => {
    llm = await FakeOpenAI.start();
    // One key may hold every job_posting slot of both workers.
    const env = workerEnv(llm, 2 * POSTING_SLOTS);
    server = await startTestServer(env, { jobs: QUIET_JOBS });
    worker = await startWorker({ config: testConfig(server.databaseUrl, env), logger: createLogger("silent"), jobs: QUIET_JOBS });
  });
  beforeEach(() => {
    llm.reset();
    llm.answer = POSTING;
  });
  afterAll(async () => {
    await worker?.close();
    await server?.close();
    await llm?.close();
  });

  it("starts another key's only job before any of the busy key's running jobs ends, when the busy key holds every slot of both", async () => {
    let perWorker: number[] = [];
    const { busy, other } = await busyKeyThenOther(server, llm, 2 * POSTING_SLOTS, 2 * POSTING_SLOTS + 2, async () => {
      const { rows } = await server.app.pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM agenda_jobs WHERE name = 'job_posting' AND locked_at IS NOT NULL GROUP BY last_modified_by",
      );
      perWorker = rows.map((r) => r.n);
    });
    // The busy key held every slot of both workers when the other key came.
    expect(perWorker).toEqual([POSTING_SLOTS, POSTING_SLOTS]);
    const firstEnd = Math.min(...busy.map((t) => t.completedMs));
    expect(other.dispatchedMs).toBeLessThan(firstEnd);
  }, 60_000);
});

describe("claims at the same instant", () => {
  const db = useTestDatabase();
  const SLOTS = 2;

  async function newKey(): Promise<string> {
    const keyId = `ak_${Math.random().toString(36).slice(2, 10)}`;
    await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ($1, '\\x00', $1, $1)", [keyId]);
    return keyId;
  }

  it.each(JOB_KINDS)("%s: two workers full of one key give their reserve to one job of an idle key, not to both of its jobs", async (kind: JobKindName) => {
    const jobs = new PgJobStore(new Db(db.pool), "test");
    // Each worker process has a backend of its own.
    const backends = new Map(["w1", "w2"].map((worker) => [worker, agendaBackend(db.pool)({ slots: new Map([[kind, SLOTS]]), maxRunningPerKey: 2 * SLOTS })]));
    const claim = (worker: "w1" | "w2") => {
      const now = new Date();
      const { repository } = backends.get(worker)!;
      return repository.getNextJobToRun(kind, new Date(now.getTime() + 1_000), new Date(now.getTime() - 30_000), undefined, { lastModifiedBy: worker });
    };
    const submit = async (owner: string) => jobs.submit({ kind, ownerKeyId: owner, input: {}, now: Date.now() * 1000 }, () => {});

    const busy = await newKey();
    for (let n = 0; n < 2 * SLOTS; n++) await submit(busy);
    for (const worker of ["w1", "w1", "w2", "w2"] as const) expect(await claim(worker)).toBeDefined();
    const idle = await newKey();
    const idleJobs = [await submit(idle), await submit(idle)];

    // Both claims are made while a transaction holds the idle key's job rows:
    // each must get as far as it can before the other's claim commits.
    const holder = await db.pool.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT 1 FROM jobs WHERE id = ANY($1) FOR UPDATE", [idleJobs]);
      const claims = Promise.all([claim("w1"), claim("w2")]);
      await untilWaitingForLock(db.pool, 2);
      await holder.query("COMMIT");
      const taken = (await claims).filter((job) => job !== undefined);
      expect(taken).toHaveLength(1);
    } finally {
      holder.release();
    }
    const { rows } = await db.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM agenda_jobs WHERE name = $1 AND locked_at IS NOT NULL AND (data->>'job_id')::bigint = ANY($2)",
      [kind, idleJobs],
    );
    expect(rows[0]!.n).toBe(1);
  });
});
