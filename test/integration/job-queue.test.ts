/**
 * Queuing a job's run through Agenda's own API (store/agenda.ts,
 * AgendaJobQueue; docs/decisions.md#job-runner): the Agenda job joins the
 * caller's transaction, its notification is delivered only on commit, and a
 * worker that LISTENs starts it at once.
 */
import pg from "pg";
import { describe, expect, it } from "vitest";
import { JobRunner } from "../../src/jobs/runner.js";
import type { JobKind } from "../../src/jobs/types.js";
import { createLogger } from "../../src/platform/logger.js";
import { AGENDA_NOTIFY_CHANNEL, agendaBackend, AgendaJobQueue } from "../../src/store/agenda.js";
import { Db } from "../../src/store/db.js";
import { PgJobStore } from "../../src/store/jobs.js";
import { PgPurgeStore } from "../../src/store/purge.js";
import { AdjustableClock } from "../support/clock.js";
import { useTestDatabase } from "../support/database.js";
import { eventually } from "../support/eventually.js";

const db = useTestDatabase();

/** A LISTEN on Agenda's channel on a connection of its own; `received` fills as notifications arrive. */
async function listen(): Promise<{ received: Array<Record<string, unknown>>; flush(): Promise<void>; close(): Promise<void> }> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const received: Array<Record<string, unknown>> = [];
  client.on("notification", (msg) => {
    if (msg.channel === AGENDA_NOTIFY_CHANNEL && msg.payload) received.push(JSON.parse(msg.payload) as Record<string, unknown>);
  });
  await client.query(`LISTEN "${AGENDA_NOTIFY_CHANNEL}"`);
  return {
    received,
    // A round trip on the listening connection: whatever was delivered before it has been read.
    flush: async () => void (await client.query("SELECT 1")),
    close: () => client.end(),
  };
}

const rowsFor = async (jobId: number) =>
  (await db.pool.query<{ name: string; data: unknown; last_modified_by: string }>("SELECT name, data, last_modified_by FROM agenda_jobs WHERE data->>'job_id' = $1", [String(jobId)]))
    .rows;

describe("AgendaJobQueue", () => {
  it("writes the Agenda job in the caller's transaction and announces it only once that commits", async () => {
    const appDb = new Db(db.pool);
    const queue = new AgendaJobQueue(appDb, "host:42");
    const listener = await listen();
    try {
      await appDb.transaction(async () => {
        await queue.enqueue("pdf", 9001);
        await listener.flush();
        // Not announced yet, and not visible outside the transaction.
        expect(listener.received).toEqual([]);
        expect(await rowsFor(9001)).toEqual([]);
      });
      expect(await rowsFor(9001)).toEqual([{ name: "pdf", data: { job_id: 9001 }, last_modified_by: "host:42" }]);
      await eventually(async () => listener.received.length === 1);
      expect(listener.received[0]).toMatchObject({ jobName: "pdf", source: "host:42" });
    } finally {
      await listener.close();
    }
  });

  it("leaves neither a job nor a notification behind when the caller's transaction rolls back", async () => {
    const appDb = new Db(db.pool);
    const queue = new AgendaJobQueue(appDb, "host:42");
    const listener = await listen();
    try {
      await expect(
        appDb.transaction(async () => {
          await queue.enqueue("pdf", 9002);
          throw new Error("the caller's write failed");
        }),
      ).rejects.toThrow("the caller's write failed");
      // A later committed notification proves the channel works and nothing came before it.
      await appDb.transaction(() => queue.enqueue("pdf", 9003));
      await eventually(async () => listener.received.length > 0);
      await listener.flush();
      expect(await rowsFor(9002)).toEqual([]);
      expect(listener.received).toHaveLength(1);
    } finally {
      await listener.close();
    }
  });

  it("holds no connection of its own: an API replica that only enqueues does not LISTEN", async () => {
    const appDb = new Db(db.pool);
    const queue = new AgendaJobQueue(appDb, "host:42");
    await appDb.transaction(() => queue.enqueue("pdf", 9004));
    const listening = await db.pool.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'");
    expect(listening.rowCount).toBe(0);
  });

  it("starts a submitted job at once on a worker that polls rarely: the notification reaches Agenda's LISTEN", async () => {
    const appDb = new Db(db.pool);
    const jobs = new PgJobStore(appDb, "test");
    const started: number[] = [];
    // The pdf kind's name and fairness, with a run that only records itself.
    const probe: JobKind<{ job_id: number }> = {
      name: "pdf",
      fair: true,
      lockLifetimeMs: 5_000,
      async run(run) {
        started.push(run.data.job_id);
      },
    };
    const runner = await JobRunner.start({
      backend: agendaBackend(db.pool),
      deps: { jobs, purge: new PgPurgeStore(appDb), clock: new AdjustableClock(), logger: createLogger("silent") },
      kinds: [probe],
      processEveryMs: 600_000,
    });
    try {
      const owner = `ak_${Math.random().toString(36).slice(2, 10)}`;
      await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ($1, '\\x00', $1, $1)", [owner]);
      const id = await jobs.submit({ kind: "pdf", ownerKeyId: owner, input: {}, now: Date.now() * 1000 }, () => {});
      await eventually(async () => started.includes(id));
    } finally {
      await runner.stop();
    }
  });
});
