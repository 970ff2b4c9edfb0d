/**
 * Long-poll wake latency (issue 5): 1,000 waiters long-poll one channel; a
 * writer posts; each waiter's latency is the time from the create response
 * reaching the writer to that waiter's response. Run once per wake bus
 * (PostgreSQL LISTEN/NOTIFY, and Redis pub/sub when redis-server exists),
 * each on its own freshly started service.
 */
import { spawn, spawnSync } from "node:child_process";
import http from "node:http";
import net from "node:net";
import { startServer } from "./server.js";
import { Latencies } from "./stats.js";

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

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function request(agent: http.Agent, base: URL, method: string, path: string, key: string, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { agent, host: base.hostname, port: base.port, method, path, headers: { "X-API-Key": key, "Content-Type": "application/json" } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

async function measure(url: string, bus: string, waiters: number, rounds: number): Promise<WakeResult> {
  const base = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: waiters + 8 });
  try {
    const minted = await request(agent, base, "POST", "/v1/keys", "", JSON.stringify({ agent_label: `wake-${Date.now()}` }));
    const key = (JSON.parse(minted.text) as { key: string }).key;
    const created = await request(agent, base, "POST", "/v1/channels", key, JSON.stringify({ name: "wake", mode: "broadcast", discoverable: false }));
    const channel = (JSON.parse(created.text) as { id: string }).id;
    const post = async (n: number) => {
      const res = await request(agent, base, "POST", `/v1/channels/${channel}/messages`, key, JSON.stringify({ content: `wake ${n}` }));
      return { answeredAt: performance.now(), cursor: (JSON.parse(res.text) as { next_cursor: string }).next_cursor };
    };
    let cursor = (await post(0)).cursor;
    const latencies = new Latencies();
    let failed = 0;
    for (let round = 1; round <= rounds; round++) {
      const path = `/v1/channels/${channel}/messages?since=${encodeURIComponent(cursor)}&wait=20`;
      const arrivals = Array.from({ length: waiters }, () =>
        request(agent, base, "GET", path, key).then(
          (res) => ({ at: performance.now(), ok: res.status === 200 && (JSON.parse(res.text) as { data: unknown[] }).data.length === 1 }),
          () => ({ at: performance.now(), ok: false }),
        ),
      );
      // Let every waiter reach the server and subscribe before the write.
      await sleep(round === 1 ? 1500 : 600);
      const { answeredAt, cursor: next } = await post(round);
      cursor = next;
      for (const a of await Promise.all(arrivals)) {
        if (a.ok) latencies.add(Math.max(0, a.at - answeredAt));
        else failed++;
      }
    }
    const s = latencies.summary();
    return { bus, waiters, rounds, samples: s.count, p50_ms: s.p50_ms, p99_ms: s.p99_ms, max_ms: s.max_ms, empty_or_failed: failed };
  } finally {
    agent.destroy();
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Runs the scenario on each available bus; skips Redis when redis-server is not installed. */
export async function wakeLatency(waiters: number, rounds: number): Promise<WakeResult[]> {
  const results: WakeResult[] = [];
  const buses: Array<[string, () => Promise<{ env: NodeJS.ProcessEnv; stop: () => void } | undefined>]> = [
    ["postgres-notify", async () => ({ env: { ...process.env, REDIS_URL: "" }, stop: () => {} })],
    [
      "redis",
      async () => {
        if (spawnSync("redis-server", ["--version"]).status !== 0) return undefined;
        const port = await freePort();
        const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
        await sleep(300);
        return { env: { ...process.env, REDIS_URL: `redis://127.0.0.1:${port}` }, stop: () => child.kill("SIGKILL") };
      },
    ],
  ];
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
      prepared.stop();
    }
  }
  return results;
}

