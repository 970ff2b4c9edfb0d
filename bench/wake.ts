/**
 * Long-poll wake latency (issue 5): 1,000 waiters long-poll one channel; a
 * writer posts; each waiter's latency is the time from the create response
 * reaching the writer to that waiter's response. Run once per wake bus
 * (PostgreSQL LISTEN/NOTIFY, and Redis pub/sub when redis-server exists),
 * each on its own freshly started service.
 */
import { spawn, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createClient, parseClientKind } from "./http.js";
import { startServer } from "./server.js";
import { Latencies } from "./stats.js";
import { startTestRedis } from "../test/support/redis.js";

export interface WakeResult {
  bus: string;
  waiters: number;
  rounds: number;
  samples: number;
  p50_ms: number | null;
  p99_ms: number | null;
  max_ms: number | null;
  empty_or_failed: number;
}

const WARMUP_ROUNDS = 2;
/** The service's default AGENTBUS_LONGPOLL_MAX_WAITERS_PER_KEY. */
const WAITERS_PER_KEY = 100;
const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function measure(url: string, bus: string, waiters: number, rounds: number): Promise<WakeResult> {
  // The raw client costs the least CPU per response (bench/http.ts), and the
  // client shares the cores with the service: a slow client would be measured
  // as slow wake-ups. The writer has its own connection so its create never
  // queues behind a waiter's.
  const kind = parseClientKind(process.env.BENCH_CLIENT);
  const pollers = createClient(kind, url, waiters);
  const writer = createClient(kind, url, 1);
  try {
    const json = { "content-type": "application/json" };
    const mint = async (label: string) => {
      const minted = await writer.request("POST", "/v1/keys", JSON.stringify({ agent_label: `${label}-${Date.now()}` }), json);
      return (JSON.parse(minted.body) as { key: string }).key;
    };
    const key = await mint("wake");
    const auth = { "x-api-key": key };
    // Waiters spread over keys as the service's per-key cap expects of real
    // agents (AGENTBUS_LONGPOLL_MAX_WAITERS_PER_KEY, 100 by default): one key
    // holding them all would have 900 of 1,000 answered at once, unwoken.
    const waiterKeys: string[] = [];
    for (let i = 0; i < Math.ceil(waiters / WAITERS_PER_KEY); i++) waiterKeys.push(await mint(`wake-waiter-${i}`));
    const created = await writer.request("POST", "/v1/channels", JSON.stringify({ name: "wake", mode: "broadcast", discoverable: false }), { ...json, ...auth });
    const channel = (JSON.parse(created.body) as { id: string }).id;
    const post = async (n: number) => {
      const res = await writer.request("POST", `/v1/channels/${channel}/messages`, JSON.stringify({ content: `wake ${n}` }), { ...json, ...auth });
      return { answeredAt: performance.now(), cursor: (JSON.parse(res.body) as { next_cursor: string }).next_cursor };
    };
    let cursor = (await post(0)).cursor;
    const latencies = new Latencies();
    let failed = 0;
    // Unmeasured rounds first: the first wake-ups run cold code (JIT) and grow the heap.
    for (let round = 1 - WARMUP_ROUNDS; round <= rounds; round++) {
      const path = `/v1/channels/${channel}/messages?since=${encodeURIComponent(cursor)}&wait=20`;
      const arrivals = Array.from({ length: waiters }, (_, i) =>
        pollers.request("GET", path, undefined, { "x-api-key": waiterKeys[i % waiterKeys.length]! }).then(
          (res) => ({ at: performance.now(), ok: res.status === 200 && res.body.includes('"data":[{') }),
          () => ({ at: performance.now(), ok: false }),
        ),
      );
      // Let every waiter reach the server and subscribe before the write.
      await sleep(round === 1 ? 1500 : 600);
      const { answeredAt, cursor: next } = await post(round);
      cursor = next;
      const answers = await Promise.all(arrivals);
      if (round < 1) continue;
      const roundLatencies = new Latencies();
      for (const a of answers) {
        if (!a.ok) {
          failed++;
          continue;
        }
        latencies.add(Math.max(0, a.at - answeredAt));
        roundLatencies.add(Math.max(0, a.at - answeredAt));
      }
      const r = roundLatencies.summary();
      log(`wake (${bus}) round ${round}: p50 ${r.p50_ms} ms, p99 ${r.p99_ms} ms`);
    }
    const s = latencies.summary();
    return { bus, waiters, rounds, samples: s.count, p50_ms: s.p50_ms, p99_ms: s.p99_ms, max_ms: s.max_ms, empty_or_failed: failed };
  } finally {
    await pollers.close();
    await writer.close();
  }
}

/** The same measurement against bench/wake-floor.ts: what Node's HTTP server alone costs here. */
async function floorLatency(waiters: number, rounds: number): Promise<WakeResult> {
  const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(new URL("./wake-floor.ts", import.meta.url))], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, NODE_OPTIONS: "" },
  });
  try {
    const port = await new Promise<string>((resolve, reject) => {
      child.once("error", reject);
      child.stdout?.once("data", (d: Buffer) => resolve(d.toString().trim()));
    });
    log(`wake: ${waiters} waiters × ${rounds} rounds against the floor (bare node:http, no service)`);
    const result = await measure(`http://127.0.0.1:${port}`, FLOOR, waiters, rounds);
    log(`wake (${FLOOR}): p50 ${result.p50_ms} ms, p99 ${result.p99_ms} ms over ${result.samples} wake-ups`);
    return result;
  } finally {
    child.kill("SIGTERM");
  }
}

/** The `bus` of the floor measurement, which is not the service. */
export const FLOOR = "floor:bare-node-http";

/** Runs the floor, then the scenario on each available bus; skips Redis when redis-server is not installed. */
export async function wakeLatency(waiters: number, rounds: number): Promise<WakeResult[]> {
  const results: WakeResult[] = [];
  const buses: Array<[string, () => Promise<{ env: NodeJS.ProcessEnv; stop: () => Promise<void> } | undefined>]> = [
    ["postgres-notify", async () => ({ env: { ...process.env, REDIS_URL: "" }, stop: async () => {} })],
    [
      "redis",
      async () => {
        if (spawnSync("redis-server", ["--version"]).status !== 0) return undefined;
        // The tests' throwaway Redis: a free port, nothing on disk, ready once it listens.
        const redis = await startTestRedis();
        return { env: { ...process.env, REDIS_URL: redis.url }, stop: () => redis.stop() };
      },
    ],
  ];
  results.push(await floorLatency(waiters, rounds));
  for (const [bus, prepare] of buses) {
    const prepared = await prepare();
    if (!prepared) {
      log(`wake: ${bus} skipped (redis-server not installed)`);
      continue;
    }
    const env = { ...prepared.env, BENCH_URL: "", AGENTBUS_LONGPOLL_MAX_WAITERS: String(waiters * 2) };
    const server = await startServer(env);
    try {
      log(`wake: ${waiters} waiters × ${rounds} rounds over ${bus}`);
      const result = await measure(server.url, bus, waiters, rounds);
      log(`wake (${bus}): p50 ${result.p50_ms} ms, p99 ${result.p99_ms} ms over ${result.samples} wake-ups`);
      results.push(result);
    } finally {
      await server.stop();
      await prepared.stop();
    }
  }
  return results;
}

