/**
 * The embedded PostgreSQL dies under load (SIGKILL of the postmaster, as the
 * OOM killer would): the service restarts it by itself on the same port,
 * answers writes again within seconds, and every write it acknowledged with
 * 201 is still there (crash recovery replays the WAL).
 *
 * The service runs as a child process on its own embedded PostgreSQL in a
 * temp data dir, on a port picked at start (AGENTBUS_EMBEDDED_PG_PORT=0).
 */
import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initialisedDataDir } from "../support/data-dir.js";
import { createChannel } from "../support/fixtures.js";
import { listAllIds, startLoad, summarise, waitUntil, type Outcome } from "../support/load.js";
import { startServiceProcess, stopServiceProcess, type ServiceProcess } from "../support/process.js";
import { mintKey } from "../support/server.js";

let dataDir: string;
let svc: ServiceProcess | undefined;

const postmasterPid = async () => Number((await readFile(path.join(dataDir, "pg", "postmaster.pid"), "utf8")).split("\n")[0]);

function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
}

beforeAll(async () => {
  dataDir = await initialisedDataDir("agentbus-embedded-crash-");
  svc = await startServiceProcess(
    {
      AGENTBUS_DATA_DIR: dataDir,
      AGENTBUS_EMBEDDED_PG_PORT: "0",
      AGENTBUS_RATE_LIMIT: "0",
      AGENTBUS_KEY_MINT_LIMIT: "0",
      AGENTBUS_SHUTDOWN_GRACE_MS: "2000",
    },
    90_000,
  );
}, 120_000);

afterAll(async () => {
  await stopServiceProcess(svc, 15_000);
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}, 60_000);

describe("embedded PostgreSQL killed under load", () => {
  it("is restarted by the service, which answers writes again within seconds and keeps every acknowledged write", async () => {
    const base = svc!.url;
    const key = await mintKey(base);
    const channels = [await createChannel(base, key), await createChannel(base, key)];
    const load = startLoad({ base, key, channels, writers: 4, readers: 2 });
    // Real time: load against a real process before the crash.
    await sleep(2_000);
    const beforeCrash = load.outcomes.filter((o) => o.status === 201).length;

    const pid = await postmasterPid();
    const killedAt = performance.now();
    process.kill(pid, "SIGKILL");
    await waitUntil(async () => isGone(pid), 10_000, "postmaster exit after SIGKILL", 10);

    // The first write acknowledged after the kill, by the load's own writers.
    const firstWriteMs = await waitUntil(
      async () => load.outcomes.some((o) => o.kind === "write" && o.status === 201 && o.startedAt > killedAt),
      30_000,
      "a write acknowledged after the kill",
      20,
    );
    // Real time: load against a real process after the recovery.
    await sleep(2_000);
    await load.stop();

    const outcomes = load.outcomes;
    const summary = summarise(outcomes);
    console.log(`[resilience-embedded] ${JSON.stringify({ requests: outcomes.length, acknowledged_before_kill: beforeCrash, first_write_after_kill_ms: Math.round(firstWriteMs), summary })}`);

    // Service returns within seconds, and never answers anything but success or 503 store_unavailable.
    expect(firstWriteMs).toBeLessThan(15_000);
    const wrong = outcomes.filter((o: Outcome) => !(o.status === 200 || o.status === 201 || (o.status === 503 && o.error === "store_unavailable")));
    expect(wrong, JSON.stringify(summary)).toEqual([]);
    expect(svc!.child.exitCode).toBeNull();
    expect(await postmasterPid()).not.toBe(pid);
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(200);

    // Logged once: one line for the exit, one for the restart.
    expect(svc!.lines.filter((l) => l.includes("exited unexpectedly"))).toHaveLength(1);
    expect(svc!.lines.filter((l) => l.includes("embedded PostgreSQL restarted on port"))).toHaveLength(1);

    let acknowledged = 0;
    for (const channel of channels) {
      const stored = await listAllIds(base, key, channel);
      const wanted = load.acknowledged.get(channel)!;
      acknowledged += wanted.size;
      expect([...wanted].filter((id) => !stored.has(id)), `acknowledged but missing in ${channel}`).toEqual([]);
    }
    expect(acknowledged).toBeGreaterThan(beforeCrash);
  }, 120_000);
});
