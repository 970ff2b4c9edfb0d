/**
 * The job runner (docs/decisions.md#job-runner): `agentbus worker` as a process, the purge
 * scheduled on Agenda, shutdown that leaves the shared pool open, and the
 * agenda_jobs schema against the installed backend's.
 */
import { Writable } from "node:stream";
import { getCreateIndexesSQL, getCreateTableSQL } from "@agendajs/postgres-backend";
import { describe, expect, it } from "vitest";
import { JobRunner } from "../../src/jobs/runner.js";
import type { JobKind } from "../../src/jobs/types.js";
import { createLogger } from "../../src/platform/logger.js";
import { agendaBackend, agendaPoolView } from "../../src/store/agenda.js";
import { Db } from "../../src/store/db.js";
import { PgJobStore } from "../../src/store/jobs.js";
import { PgPurgeStore } from "../../src/store/purge.js";
import { AdjustableClock } from "../support/clock.js";
import { useTestDatabase, type SuiteDatabase } from "../support/database.js";
import { spawnCli, startServiceProcess } from "../support/process.js";
import { startTestServer } from "../support/server.js";
import { eventually } from "../support/eventually.js";

const silent = createLogger("silent");

/** A key, a channel and one message in it that expires at `expiresAt` (SQL). Returns the message id. */
async function seedMessage(db: SuiteDatabase, expiresAt: string): Promise<{ channelId: string; messageId: string }> {
  const keyId = `ak_${Math.random().toString(36).slice(2, 10)}`;
  await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ($1, '\\x00', $1, $1)", [keyId]);
  const channel = await db.pool.query<{ id: string }>(
    `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, stored_messages, created_at, updated_at)
     VALUES ('jobs', 'claimable', 'open', true, $1, $1, 300, 7, 1, clock_timestamp(), clock_timestamp()) RETURNING id`,
    [keyId],
  );
  const channelId = channel.rows[0]!.id;
  const message = await db.pool.query<{ id: string }>(
    `INSERT INTO messages (channel_id, author_key_id, content, created_at, expires_at)
     VALUES ($1, $2, 'due', now() - interval '1 hour', ${expiresAt}) RETURNING id`,
    [channelId, keyId],
  );
  return { channelId, messageId: message.rows[0]!.id };
}

const archived = async (db: SuiteDatabase, messageId: string) =>
  (await db.pool.query("SELECT 1 FROM message_history WHERE id = $1 AND reason = 'expired'", [messageId])).rowCount === 1;

describe("agentbus worker", () => {
  const db = useTestDatabase();

  it("runs the purge without serving HTTP, then exits 0 promptly on SIGTERM", async () => {
    const { channelId, messageId } = await seedMessage(db, "now() - interval '1 minute'");
    const cli = spawnCli(["worker"], { DATABASE_URL: db.url });
    try {
      await eventually(() => archived(db, messageId));
      const { rows } = await db.pool.query<{ stored_messages: number }>("SELECT stored_messages FROM channels WHERE id = $1", [channelId]);
      expect(rows[0]!.stored_messages).toBe(0);
      // The purge may finish before the startup line is written (the job runner starts first): wait for the line, not for an order.
      await eventually(async () => cli.lines.join("\n").includes("agentbus worker running"));
      expect(cli.lines.join("\n")).not.toContain("listening");
      const signalled = performance.now();
      cli.child.kill("SIGTERM");
      expect(await cli.exited).toBe(0);
      expect(performance.now() - signalled).toBeLessThan(5_000);
      expect(cli.lines.join("\n")).toContain("job runner stopped");
    } finally {
      if (cli.child.exitCode === null) cli.child.kill("SIGKILL");
    }
  });

  it("is listed by agentbus help", async () => {
    const cli = spawnCli(["help"], {});
    expect(await cli.exited).toBe(0);
    expect(cli.lines.join("\n")).toMatch(/worker\s+run only the job workers/);
  });
});

describe("agentbus serve", () => {
  const db = useTestDatabase();

  it("runs the workers in-process by default and still exits 0 promptly on SIGTERM", async () => {
    const { messageId } = await seedMessage(db, "now() - interval '1 minute'");
    const svc = await startServiceProcess({ DATABASE_URL: db.url });
    try {
      await eventually(() => archived(db, messageId));
      svc.signal("SIGTERM");
      const exit = await svc.exited;
      expect(exit.code).toBe(0);
      expect(exit.afterMs).toBeLessThan(5_000);
    } finally {
      if (svc.child.exitCode === null) svc.child.kill("SIGKILL");
    }
  });

  it("runs no workers with AGENTBUS_WORKERS=false", async () => {
    const server = await startTestServer({ AGENTBUS_WORKERS: "false" });
    try {
      expect(server.app.jobs).toBeUndefined();
      const { rows } = await server.app.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM agenda_jobs");
      expect(rows[0]!.n).toBe(0);
    } finally {
      await server.close();
    }
  });
});

describe("JobRunner", () => {
  const db = useTestDatabase();

  it("schedules the purge as one recurring job and runs it on its interval, at the injected clock's time", async () => {
    const clock = new AdjustableClock();
    const runner = await JobRunner.start({
      backend: agendaBackend(db.pool),
      deps: { jobs: new PgJobStore(new Db(db.pool), "test"), purge: new PgPurgeStore(new Db(db.pool)), clock, logger: silent },
      intervals: { purge: "1 second" },
      processEveryMs: 200,
    });
    try {
      const job = async () =>
        (
          await db.pool.query<{ type: string; repeat_interval: string; finished: boolean }>(
            "SELECT type, repeat_interval, last_finished_at IS NOT NULL AS finished FROM agenda_jobs WHERE name = 'purge'",
          )
        ).rows;
      expect(await job()).toEqual([{ type: "single", repeat_interval: "1 second", finished: expect.any(Boolean) }]);
      await eventually(async () => (await job())[0]?.finished === true);
      // Due only by the runner's clock: a later run must use it.
      const { messageId } = await seedMessage(db, "now() + interval '1 hour'");
      clock.advanceSeconds(7200);
      await eventually(() => archived(db, messageId));
    } finally {
      await runner.stop();
    }
  });

  it("waits for a running job to wrap up when stopped, and leaves the shared pool open", async () => {
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let finished = false;
    const appDb = new Db(db.pool);
    const probe: JobKind<{ n: number }> = {
      name: "probe",
      lockLifetimeMs: 5_000,
      async run(run) {
        started();
        await new Promise((resolve) => run.signal.addEventListener("abort", resolve, { once: true }));
        await appDb.query("SELECT $1::int", [run.data.n]);
        finished = true;
      },
    };
    const runner = await JobRunner.start({ backend: agendaBackend(db.pool), deps: { jobs: new PgJobStore(appDb, "test"), purge: new PgPurgeStore(appDb), clock: new AdjustableClock(), logger: silent }, kinds: [probe] });
    await runner.enqueue(probe, { n: 1 });
    await running;
    await runner.stop();
    expect(finished).toBe(true);
    // Its outcome was recorded: the job is not left locked for another worker to wait out.
    const locked = await db.pool.query("SELECT 1 FROM agenda_jobs WHERE name = 'probe' AND locked_at IS NOT NULL");
    expect(locked.rowCount).toBe(0);
    expect(db.pool.ended).toBe(false);
    expect((await db.pool.query("SELECT 1 AS ok")).rows).toEqual([{ ok: 1 }]);
    // Agenda's LISTEN connection went back to the pool.
    const listening = await db.pool.query(
      "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'",
    );
    expect(listening.rowCount).toBe(0);
  });

  it("takes another worker's announced job events for none of its own runs", async () => {
    // Agenda re-emits every other worker's start, fail and complete here
    // (remote, with a notification for the job): taking them as its own
    // would throw, or leave a run that never ends to hold up stop().
    const appDb = new Db(db.pool);
    const deps = { jobs: new PgJobStore(appDb, "test"), purge: new PgPurgeStore(appDb), clock: new AdjustableClock(), logger: silent };
    const ran: string[] = [];
    const kind = (name: string, fails = false): JobKind => ({
      name,
      lockLifetimeMs: 5_000,
      async run() {
        ran.push(name);
        if (fails) throw new Error(`${name} failed`);
      },
    });
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString("utf8"));
        done();
      },
    });
    const worker = await JobRunner.start({ backend: agendaBackend(db.pool), deps, kinds: [kind("done-probe"), kind("failing-probe", true)], name: "worker-a" });
    const bystander = await JobRunner.start({
      backend: agendaBackend(db.pool),
      deps: { ...deps, logger: createLogger("warn", sink) },
      kinds: [kind("marker")],
      name: "worker-b",
      stopTimeoutMs: 5_000,
    });
    try {
      await worker.enqueue(kind("done-probe"), {});
      await worker.enqueue(kind("failing-probe", true), {});
      await eventually(async () => ran.includes("done-probe") && ran.includes("failing-probe"));
      // Announced on the bystander's one LISTEN connection after both runs
      // ended: once it ran this job, it has had their events.
      await worker.enqueue(kind("marker"), {});
      await eventually(async () => ran.includes("marker"));
    } finally {
      await worker.stop();
    }
    await bystander.stop();
    expect(lines.join("")).toBe("");
  });

  it("gives Agenda a view of the pool that cannot end it and parses timestamps as Dates", async () => {
    const view = agendaPoolView(db.pool);
    await view.end();
    expect(db.pool.ended).toBe(false);
    const { rows } = await view.query<{ at: unknown }>("SELECT now() AS at");
    expect(rows[0]!.at).toBeInstanceOf(Date);
    // The app's own queries keep microsecond integers.
    const own = await db.pool.query<{ at: unknown }>("SELECT now() AS at");
    expect(typeof own.rows[0]!.at).toBe("number");
  });

  it("keeps agenda_jobs identical to the table the installed backend would create", async () => {
    const probe = "agenda_probe";
    await db.pool.query(getCreateTableSQL(probe));
    for (const sql of getCreateIndexesSQL(probe)) await db.pool.query(sql);
    const shape = async (table: string) => {
      const columns = await db.pool.query(
        `SELECT column_name, data_type, character_maximum_length, is_nullable, column_default
         FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position`,
        [table],
      );
      const indexes = await db.pool.query<{ indexdef: string }>("SELECT indexdef FROM pg_indexes WHERE tablename = $1 ORDER BY indexname", [table]);
      return { columns: columns.rows, indexes: indexes.rows.map((r) => r.indexdef.replaceAll(table, "T")) };
    };
    expect(await shape("agenda_jobs")).toEqual(await shape(probe));
  });
});
