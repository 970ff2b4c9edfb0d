/**
 * PostgreSQL goes away under load and comes back: the service answers fast
 * with 503 store_unavailable (REST and gRPC), never a 500 and never a hang,
 * stays up, reports 503 on /health, and recovers by itself once the server is
 * back, without losing any write it acknowledged with 201.
 *
 * The test runs its own PostgreSQL (never the run's shared one, which other
 * files use) and the service as a child process with its job workers on, as
 * an operator runs it.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { startEmbeddedPostgres, type EmbeddedPostgresServer } from "../../src/store/embedded.js";
import { initialisedDataDir } from "../support/data-dir.js";
import { createChannel } from "../support/fixtures.js";
import { listAllIds, startLoad, summarise, waitUntil, type Outcome } from "../support/load.js";
import { startServiceProcess, stopServiceProcess, type ServiceProcess } from "../support/process.js";
import { mintKey } from "../support/server.js";
import { freePort } from "../../src/platform/free-port.js";

let dataDir: string;
let pgPort: number;
let pgServer: EmbeddedPostgresServer | undefined;
let svc: ServiceProcess | undefined;

const startPostgres = () =>
  startEmbeddedPostgres({
    dataDir,
    port: pgPort,
    log: (level, msg) => {
      if (level === "error") console.error(`[outage postgres] ${msg}`);
    },
  });

/** Immediate shutdown (SIGQUIT to the postmaster): sessions are cut without goodbye, recovery runs at the next start. */
async function crashPostgres(): Promise<void> {
  const pid = Number((await readFile(path.join(dataDir, "pg", "postmaster.pid"), "utf8")).split("\n")[0]);
  process.kill(pid, "SIGQUIT");
  await waitUntil(
    async () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    },
    15_000,
    "postgres exit after SIGQUIT",
    20,
  );
  // Releases the data dir lock; the postmaster is already gone.
  await pgServer?.stop();
  pgServer = undefined;
}

beforeAll(async () => {
  dataDir = await initialisedDataDir("agentbus-outage-pg-");
  pgPort = await freePort();
  pgServer = await startPostgres();
  svc = await startServiceProcess({
    DATABASE_URL: pgServer.url,
    AGENTBUS_RATE_LIMIT: "0",
    AGENTBUS_KEY_MINT_LIMIT: "0",
    AGENTBUS_SHUTDOWN_GRACE_MS: "2000",
  });
}, 120_000);

afterAll(async () => {
  await stopServiceProcess(svc, 10_000);
  await pgServer?.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}, 60_000);

const errorDetail = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error;

describe("PostgreSQL stopped under load", () => {
  it("fails fast with 503 store_unavailable, stays up, recovers alone and keeps every acknowledged write", async () => {
    const base = svc!.url;
    const key = await mintKey(base);
    const channels = [await createChannel(base, key), await createChannel(base, key), await createChannel(base, key)];
    const grpc = createClient(MessageService, createGrpcTransport({ baseUrl: base }));

    const load = startLoad({ base, key, channels, writers: 4, readers: 2 });
    // Real time: load against a real process before the crash.
    await sleep(2_000);
    const beforeOutage = load.outcomes.filter((o) => o.status === 201).length;

    const stoppedAt = performance.now();
    await crashPostgres();

    // While it is down: /health says so, a gRPC caller gets UNAVAILABLE with the same code.
    // Real time: requests against a real process while PostgreSQL is really down.
    await sleep(1_000);
    const healthStarted = performance.now();
    const health = await fetch(`${base}/health`);
    const healthMs = performance.now() - healthStarted;
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ status: "unavailable", database: "unreachable" });

    const grpcStarted = performance.now();
    const grpcErr = await grpc
      .createMessage({ identifier: channels[0]!, content: "during outage" }, { headers: { "x-api-key": key } })
      .then(() => undefined, (err: unknown) => err);
    const grpcMs = performance.now() - grpcStarted;
    expect(grpcErr, "gRPC createMessage succeeded while PostgreSQL was down").toBeDefined();
    expect(ConnectError.from(grpcErr).code).toBe(Code.Unavailable);
    expect(errorDetail(grpcErr)).toBe("store_unavailable");

    // Real time: the outage lasts a while for a real process; its retries run on real time.
    await sleep(3_000);
    expect(svc!.child.exitCode, "the service exited while PostgreSQL was down").toBeNull();

    const restartAt = performance.now();
    pgServer = await startPostgres();
    const pgUpMs = performance.now() - restartAt;
    // Recovery: the first write that succeeds after PostgreSQL is back, without touching the service.
    const recoveryMs = await waitUntil(
      async () => {
        const res = await fetch(`${base}/v1/channels/${channels[0]}/messages`, {
          method: "POST",
          headers: { "X-API-Key": key, "Content-Type": "application/json" },
          body: JSON.stringify({ content: "probe after restart" }),
        });
        if (res.status === 201) {
          load.acknowledged.get(channels[0]!)!.add(((await res.json()) as { message: { id: string } }).message.id);
          return true;
        }
        return false;
      },
      30_000,
      "a write after PostgreSQL came back",
    );
    const healthAfter = await fetch(`${base}/health`);
    expect(healthAfter.status).toBe(200);
    // Real time: load against a real process after the recovery.
    await sleep(2_000);
    const recoveredAt = performance.now();
    // Real time: load against a real process after the recovery.
    await sleep(1_000);
    await load.stop();

    const outcomes = load.outcomes;
    const summary = summarise(outcomes);
    const during = outcomes.filter((o) => o.startedAt >= stoppedAt && o.startedAt < restartAt);
    const failed = outcomes.filter((o) => o.status !== 200 && o.status !== 201);
    const durations = failed.map((o) => o.durationMs).sort((a, b) => a - b);
    const figures = {
      requests: outcomes.length,
      acknowledged_before_outage: beforeOutage,
      during_outage: during.length,
      failed: failed.length,
      failed_ms_median: Math.round(durations[Math.floor(durations.length / 2)] ?? 0),
      failed_ms_max: Math.round(durations.at(-1) ?? 0),
      health_during_outage_ms: Math.round(healthMs),
      grpc_during_outage_ms: Math.round(grpcMs),
      postgres_restart_ms: Math.round(pgUpMs),
      service_recovery_after_restart_ms: Math.round(recoveryMs),
      summary,
    };
    console.log(`[resilience-postgres] ${JSON.stringify(figures)}`);

    // Every answer is a success or a prompt 503 store_unavailable: no 500, no hang, no dropped connection.
    const wrong = outcomes.filter((o: Outcome) => !(o.status === 200 || o.status === 201 || (o.status === 503 && o.error === "store_unavailable")));
    expect(wrong, JSON.stringify(summary)).toEqual([]);
    expect(during.some((o) => o.status === 503), "no request failed during the outage").toBe(true);
    expect(figures.failed_ms_max).toBeLessThan(10_000);
    expect(healthMs).toBeLessThan(10_000);
    expect(grpcMs).toBeLessThan(10_000);
    // Once recovered, it stays recovered.
    const afterRecovery = outcomes.filter((o) => o.startedAt >= recoveredAt);
    expect(afterRecovery.length).toBeGreaterThan(0);
    expect(afterRecovery.filter((o) => o.status !== 200 && o.status !== 201)).toEqual([]);
    expect(svc!.child.exitCode).toBeNull();

    // No write acknowledged with 201 was lost.
    let acknowledged = 0;
    for (const channel of channels) {
      const stored = await listAllIds(base, key, channel);
      const wanted = load.acknowledged.get(channel)!;
      acknowledged += wanted.size;
      const missing = [...wanted].filter((id) => !stored.has(id));
      expect(missing, `acknowledged but missing in ${channel}`).toEqual([]);
    }
    expect(acknowledged).toBeGreaterThan(beforeOutage);
  }, 120_000);
});
