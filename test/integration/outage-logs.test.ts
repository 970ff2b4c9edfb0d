/**
 * A database outage does not flood the log: each condition (a failing wake-up
 * transport, the job runner, idle connections, …) logs its first occurrence,
 * then at most one summary per interval, and once when it recovers; expected
 * failures (connection refused, store unavailable) carry no stack trace.
 * Requests keep their one access line each ("request"), which is not counted.
 */
import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../src/platform/free-port.js";
import { startEmbeddedPostgres, type EmbeddedPostgresServer } from "../../src/store/embedded.js";
import { initialisedDataDir } from "../support/data-dir.js";
import { createChannel } from "../support/fixtures.js";
import { startLoad, waitUntil } from "../support/load.js";
import { startServiceProcess, stopServiceProcess, type ServiceProcess } from "../support/process.js";
import { startTestRedis, type TestRedis } from "../support/redis.js";
import { mintKey } from "../support/server.js";

const WINDOW_MS = 6_000;
const INTERVAL_S = 2;

let dataDir: string;
let pgPort: number;
let pgServer: EmbeddedPostgresServer | undefined;
let redis: TestRedis | undefined;
let svc: ServiceProcess | undefined;

const startPostgres = () => startEmbeddedPostgres({ dataDir, port: pgPort, log: () => {} });

beforeAll(async () => {
  dataDir = await initialisedDataDir("agentbus-outage-logs-");
  pgPort = await freePort();
  pgServer = await startPostgres();
  redis = await startTestRedis();
  svc = await startServiceProcess({
    DATABASE_URL: pgServer.url,
    REDIS_URL: redis.url,
    AGENTBUS_RATE_LIMIT: "0",
    AGENTBUS_KEY_MINT_LIMIT: "0",
    AGENTBUS_SHUTDOWN_GRACE_MS: "2000",
    AGENTBUS_LOG_REPEAT_INTERVAL_SECONDS: String(INTERVAL_S),
  });
}, 120_000);

afterAll(async () => {
  await stopServiceProcess(svc, 10_000);
  await pgServer?.stop();
  await redis?.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}, 60_000);

interface LogLine {
  level: string;
  msg: string;
  err?: { stack?: string };
  [field: string]: unknown;
}

const parsed = (lines: string[]): LogLine[] => lines.flatMap((l) => (l.startsWith("{") ? [JSON.parse(l) as LogLine] : []));

describe("log volume during a PostgreSQL outage", () => {
  it("stays bounded: first occurrence, then a summary per interval, no stacks for expected failures, one line on recovery", async () => {
    const base = svc!.url;
    const key = await mintKey(base);
    const channels = [await createChannel(base, key), await createChannel(base, key)];
    const load = startLoad({ base, key, channels, writers: 4, readers: 4, pauseMs: 5 });
    // Real time: load against a real process before the outage.
    await sleep(1_000);

    const from = svc!.lines.length;
    const pid = Number((await readFile(path.join(dataDir, "pg", "postmaster.pid"), "utf8")).split("\n")[0]);
    process.kill(pid, "SIGQUIT");
    await waitUntil(async () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    }, 15_000, "postgres exit");
    await pgServer?.stop();
    pgServer = undefined;

    // Real time: the log-repeat window of a real process (its limiter runs on real time).
    await sleep(WINDOW_MS);
    const during = parsed(svc!.lines.slice(from)).filter((l) => l.msg !== "request");
    const requests = load.outcomes.filter((o) => o.status === 503).length;

    pgServer = await startPostgres();
    await waitUntil(async () => (await fetch(`${base}/health`)).status === 200, 30_000, "health after restart");
    // Real time: load against a real process after the recovery.
    await sleep(3_000);
    await load.stop();

    const lines = during.map((l) => `${l.level} ${l.msg}`);
    console.log(`[outage-logs] ${during.length} lines in ${WINDOW_MS} ms for ${requests} failed requests:\n${lines.join("\n")}`);
    expect(requests, "the load did not hit the outage").toBeGreaterThan(100);
    // Each condition: its first line plus one summary per interval.
    const conditions = new Set(during.map((l) => l.msg.replace(/ \(\d+ more in the last .*\)$/, "")));
    expect(during.length).toBeLessThanOrEqual(conditions.size * (1 + Math.ceil(WINDOW_MS / 1000 / INTERVAL_S)));
    expect(conditions.size).toBeLessThanOrEqual(12);
    expect(during.filter((l) => l.err?.stack !== undefined).map((l) => l.msg)).toEqual([]);
    // Expected failures still say what happened.
    expect(during.find((l) => l.msg.startsWith("webhook LISTEN"))).toMatchObject({ error: { message: expect.any(String) } });

    // Recovery: one line per condition that knows it is over (the LISTEN connections retry with up to 5 s back-off).
    const restored = (m: string) => m === "webhook LISTEN connection restored" || m === "wake-up LISTEN connection restored";
    await waitUntil(async () => parsed(svc!.lines.slice(from)).filter((l) => restored(l.msg)).length >= 2, 15_000, "recovery lines");
    // Real time: an absence of log lines from a real process shows only over a while.
    await sleep(500);
    const after = parsed(svc!.lines.slice(from)).map((l) => l.msg);
    expect(after.filter((m) => m === "webhook LISTEN connection restored")).toHaveLength(1);
    expect(after.filter((m) => m === "wake-up LISTEN connection restored")).toHaveLength(1);
  }, 120_000);
});
