/**
 * A Redis that accepts connections but stops answering (issue 26, F13):
 * keyed requests are not slowed by it (the request limit is counted in the
 * process at once, not after a wait for Redis each time), wake-ups go over
 * LISTEN/NOTIFY, and /health and /status say the wake bus and the request
 * limits are degraded; once Redis answers again, all is back on it. The
 * hang is a real redis-server stopped with SIGSTOP.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { waitUntil } from "../support/load.js";
import { startTestRedis, type TestRedis } from "../support/redis.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";

let redis: TestRedis;
let server: TestServer;
let key: string;
beforeAll(async () => {
  redis = await startTestRedis();
  server = await startTestServer({ REDIS_URL: redis.url, AGENTBUS_RATE_LIMIT: "6000" });
  key = await mintKey(server.url, "redis-hang");
});
afterAll(async () => {
  redis.thaw();
  await server?.close();
  await redis?.stop();
});

const state = async (component: string) =>
  (await rest<{ components: Record<string, { state: string }> }>(server.url, "GET", "/health")).body.components[component]?.state;

/** The median of `n` keyed requests, one after another, in ms. */
async function medianKeyedMs(n: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    expect((await rest(server.url, "GET", "/v1/keys/me", { key })).status).toBe(200);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(n / 2)]!;
}

it("costs keyed requests no wait for it, and /health and /status report the degraded state until it answers again", async () => {
  await waitUntil(async () => (await state("wake_bus")) === "ok" && (await state("request_limits")) === "ok", 10_000, "on Redis");
  const idle = await medianKeyedMs(20);

  redis.freeze();
  // The first request waits the limiter's timeout (100 ms) once; the rest are counted here at once.
  const frozen = await medianKeyedMs(30);
  expect(frozen).toBeLessThan(idle + 50);

  await waitUntil(async () => (await state("request_limits")) === "degraded" && (await state("wake_bus")) === "degraded", 10_000, "degraded", 200);
  const health = await rest<{ status: string; state: string }>(server.url, "GET", "/health");
  expect(health.status).toBe(200);
  expect(health.body).toMatchObject({ status: "ok", state: "degraded" });
  await waitUntil(async () => (await rest<{ request_limits: { state: string } }>(server.url, "GET", "/status")).body.request_limits.state === "degraded", 5_000, "/status", 200);

  redis.thaw();
  await waitUntil(async () => (await state("request_limits")) === "ok" && (await state("wake_bus")) === "ok", 20_000, "back on Redis", 200);
}, 60_000);
