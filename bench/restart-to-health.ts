// Restart to healthy with nothing changed: `npm start` over a data directory
// whose embedded PostgreSQL is already initialised and migrated, and a build
// that is up to date, timed from the spawn to the first 200 on /health.
//
//   npx tsx bench/restart-to-health.ts [runs=5] [data dir]
//
// One unmeasured start first (it builds if a source changed, runs initdb and
// the migrations in a fresh data dir), stopped with Ctrl-C (SIGINT to the
// process group); then `runs` measured restarts over the same folder. Prints
// one JSON line per restart to stdout, with where the time went (from the
// service's own JSON log lines: the first line the process writes, PostgreSQL
// accepting connections, the migration check done, the listener up), then a
// summary line with the median. Run it on an otherwise idle machine: on two
// cores, any other work shows up in the figure.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { freePort } from "../src/platform/free-port.js";

const runs = Number(process.argv[2] ?? 5);
const given = process.argv[3];
const dataDir = given ?? mkdtempSync(path.join(tmpdir(), "agentbus-restart-"));

interface Start {
  healthy_ms: number;
  /** ms from the spawn to each milestone the service logged (absent: not logged). */
  phases: Record<string, number>;
  state: unknown;
  stop_ms: number;
  exit: { code: number | null; signal: string | null };
}

/** Log messages that mark a phase of the start, by the name reported. */
const MILESTONES: Array<[string, (msg: string) => boolean]> = [
  ["first_log_line", () => true],
  ["postgres_ready", (m) => m.startsWith("embedded PostgreSQL listening")],
  ["listening", (m) => m.startsWith("agentbus listening on")],
];

async function startOnce(): Promise<Start> {
  const port = await freePort();
  const started = Date.now();
  const t0 = performance.now();
  const child = spawn("npm", ["start", "--silent"], {
    detached: true,
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", AGENTBUS_DATA_DIR: dataDir, AGENTBUS_LOG_FORMAT: "json" },
  });
  const phases: Record<string, number> = {};
  createInterface({ input: child.stdout! }).on("line", (line) => {
    let entry: { msg?: string; time?: string };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      return;
    }
    const at = entry.time === undefined ? Date.now() : Date.parse(entry.time);
    for (const [name, matches] of MILESTONES) if (phases[name] === undefined && matches(entry.msg ?? "")) phases[name] = at - started;
  });
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  let healthyMs: number | undefined;
  let state: unknown;
  const deadline = t0 + 120_000;
  while (healthyMs === undefined) {
    if (child.exitCode !== null) throw new Error(`npm start exited (code ${child.exitCode}) before /health answered 200`);
    if (performance.now() > deadline) throw new Error("no 200 on /health within 120 s");
    const res = await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined);
    if (res?.status === 200) {
      healthyMs = Math.round(performance.now() - t0);
      const body = (await res.json()) as { state?: string; components?: Record<string, { state: string }> };
      state = { overall: body.state, ...Object.fromEntries(Object.entries(body.components ?? {}).map(([name, c]) => [name, c.state])) };
    } else {
      await res?.body?.cancel();
      await sleep(10);
    }
  }
  process.kill(-child.pid!, "SIGINT");
  const stopStarted = performance.now();
  const exit = await exited;
  return { healthy_ms: healthyMs, phases, state, stop_ms: Math.round(performance.now() - stopStarted), exit };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : Math.round((sorted[mid - 1]! + sorted[mid]!) / 2);
}

try {
  const warm = await startOnce();
  console.error(`[restart-to-health] warm-up start (initdb, migrations, build if needed): ${warm.healthy_ms} ms; data dir ${dataDir}`);
  const results: Start[] = [];
  for (let i = 0; i < runs; i++) {
    const result = await startOnce();
    results.push(result);
    console.log(JSON.stringify({ run: i + 1, ...result }));
  }
  const healthy = results.map((r) => r.healthy_ms);
  console.log(JSON.stringify({ runs, median_healthy_ms: median(healthy), min_healthy_ms: Math.min(...healthy), max_healthy_ms: Math.max(...healthy) }));
} finally {
  if (given === undefined) rmSync(dataDir, { recursive: true, force: true });
}
