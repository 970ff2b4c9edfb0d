// Time from `npm start` to the first 200 on /health, then a clean stop
// (SIGINT to the process group, as Ctrl-C in a terminal): prints one JSON
// line per run. Usage (in the checkout):
//   npx tsx bench/start-to-health.ts [runs] [data dir]
// The data dir defaults to a fresh temporary one per run (a cold start with
// initdb); give one to measure warm starts over the same cluster.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort } from "../src/platform/free-port.js";

const runs = Number(process.argv[2] ?? 1);
const fixedDir = process.argv[3];


for (let i = 0; i < runs; i++) {
  const port = await freePort();
  const dataDir = fixedDir ?? mkdtempSync(path.join(tmpdir(), "agentbus-start-"));
  const started = performance.now();
  const child = spawn("npm", ["start", "--silent"], {
    detached: true,
    stdio: ["ignore", "ignore", "inherit"],
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", AGENTBUS_DATA_DIR: dataDir },
  });
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  let healthyMs: number | undefined;
  let state: unknown;
  while (healthyMs === undefined) {
    const res = await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined);
    if (res?.status === 200) {
      healthyMs = Math.round(performance.now() - started);
      // What /health said at that first 200: every component's state, so a
      // fast figure cannot hide a component that was still starting.
      const body = (await res.json()) as { state?: string; components?: Record<string, { state: string }> };
      state = { overall: body.state, ...Object.fromEntries(Object.entries(body.components ?? {}).map(([name, c]) => [name, c.state])) };
    } else await new Promise((r) => setTimeout(r, 20));
  }
  process.kill(-child.pid!, "SIGINT");
  const stopStarted = performance.now();
  const exit = await exited;
  console.log(JSON.stringify({ run: i + 1, healthy_ms: healthyMs, state, stop_ms: Math.round(performance.now() - stopStarted), exit }));
}
