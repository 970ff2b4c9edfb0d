/**
 * npx tsx bench/client-cost.ts — how much CPU each HTTP client of bench/http.ts
 * spends per request (in this process, i.e. the load generator), measured on
 * the same server with 16 concurrent closed loops. The benchmark's client and
 * the service share the machine's cores, so the cheapest client is the default.
 *
 * Requests: GET /v1/keys/me (small answer), and when messages are
 * implemented, POST a ~100-byte message and GET a page of 50 messages.
 * Uses BENCH_URL, or starts the service like `npm run bench` does.
 */
import { content } from "./api.js";
import { createClient, type ClientKind } from "./http.js";
import { startServer } from "./server.js";

const log = (msg: string) => process.stderr.write(`[client-cost] ${msg}\n`);
// BENCH_CLIENTS=http,raw,fetch changes the order (the first one meets the least warmed-up server).
const kinds = (process.env.BENCH_CLIENTS ?? "raw,http,fetch").split(",").map((k) => k.trim()) as ClientKind[];
const seconds = Number(process.env.BENCH_DURATION_SECONDS ?? 4);

interface Probe {
  name: string;
  method: string;
  path: string;
  body?: () => string;
}

async function measure(kind: ClientKind, url: string, key: string, probe: Probe) {
  const client = createClient(kind, url, 16);
  const headers = { "X-API-Key": key };
  let stop = false;
  let count = 0;
  let bad = 0;
  const loop = async () => {
    while (!stop) {
      const res = await client.request(probe.method, probe.path, probe.body?.(), headers);
      if (res.status >= 300) bad++;
      count++;
    }
  };
  // warm-up
  const warm = Array.from({ length: 16 }, loop);
  await new Promise((r) => setTimeout(r, 1000));
  stop = true;
  await Promise.all(warm);
  stop = false;
  count = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const loops = Array.from({ length: 16 }, loop);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  stop = true;
  await Promise.all(loops);
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(c0);
  await client.close();
  return {
    client: kind,
    request: probe.name,
    requests_per_s: Math.round(count / elapsed),
    client_cpu_us_per_request: Math.round((cpu.user + cpu.system) / count),
    client_cpu_pct: Math.round(((cpu.user + cpu.system) / 1e6 / elapsed) * 1000) / 10,
    non_2xx: bad,
  };
}

async function main() {
  const server = await startServer();
  const results = [];
  try {
    const mint = await fetch(`${server.url}/v1/keys`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ agent_label: `client-cost-${Date.now()}` }),
    });
    const { key } = (await mint.json()) as { key: string };
    const probes: Probe[] = [{ name: "GET /v1/keys/me", method: "GET", path: "/v1/keys/me" }];
    const ch = await fetch(`${server.url}/v1/channels`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": key },
      body: JSON.stringify({ name: "client-cost", mode: "claimable", ttl_seconds: 3600 }),
    });
    if (ch.status === 201 || ch.status === 200) {
      const { id } = (await ch.json()) as { id: string };
      let n = 0;
      probes.push({ name: "POST message (100 B)", method: "POST", path: `/v1/channels/${id}/messages`, body: () => JSON.stringify({ content: content("cost", n++) }) });
      probes.push({ name: "GET 50 messages", method: "GET", path: `/v1/channels/${id}/messages?since=0&limit=50` });
    } else {
      log(`POST /v1/channels answered ${ch.status}; measuring GET /v1/keys/me only`);
      await ch.text();
    }
    for (const probe of probes) {
      for (const kind of kinds) {
        const r = await measure(kind, server.url, key, probe);
        log(JSON.stringify(r));
        results.push(r);
      }
    }
  } finally {
    await server.stop();
  }
  process.stdout.write(`${JSON.stringify(results)}\n`);
}

main().catch((err: unknown) => {
  log(String((err as Error).stack ?? err));
  process.exit(1);
});
