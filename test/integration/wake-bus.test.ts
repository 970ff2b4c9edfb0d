/** Both wake buses deliver to local waiters at once and to other processes through their transport. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PgNotifyBus } from "../../src/bus/pg-notify-bus.js";
import { RedisBus } from "../../src/bus/redis-bus.js";
import type { WakeBus } from "../../src/bus/wake-bus.js";
import { createTestDatabase } from "../support/database.js";
import { startTestRedis, type TestRedis } from "../support/redis.js";

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let redis: TestRedis;
beforeAll(async () => {
  db = await createTestDatabase();
  redis = await startTestRedis();
});
afterAll(async () => {
  await redis?.stop();
  await db?.drop();
});

const ignore = () => {};

const buses: Array<[string, () => Promise<WakeBus & { whenReady(): Promise<void> }>]> = [
  ["PostgreSQL LISTEN/NOTIFY", async () => new PgNotifyBus(db.pool, { connectionString: db.url, onError: ignore })],
  ["Redis pub/sub", async () => new RedisBus(redis.url, ignore)],
];

const nextWake = (bus: WakeBus, channel: string, timeoutMs = 5_000) =>
  new Promise<number>((resolve, reject) => {
    const started = performance.now();
    const timer = setTimeout(() => {
      stop();
      reject(new Error("no wake-up"));
    }, timeoutMs);
    const stop = bus.subscribe(channel, () => {
      clearTimeout(timer);
      stop();
      resolve(performance.now() - started);
    });
  });

describe.each(buses)("%s", (_name, make) => {
  it("wakes local subscribers of the channel at once, and only them", async () => {
    const bus = await make();
    try {
      await bus.whenReady();
      let other = 0;
      const stopOther = bus.subscribe("ch-b", () => other++);
      const woken = nextWake(bus, "ch-a");
      bus.publish("ch-a");
      await woken;
      expect(other).toBe(0);
      stopOther();
      expect(bus.subscriptions).toBe(0);
    } finally {
      await bus.close();
    }
  });

  it("wakes the subscribers of another process", async () => {
    const a = await make();
    const b = await make();
    try {
      await Promise.all([a.whenReady(), b.whenReady()]);
      const woken = nextWake(b, "shared");
      a.publish("shared");
      expect(await woken).toBeLessThan(5_000);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("wakes every one of many waiters on one channel", async () => {
    const a = await make();
    const b = await make();
    try {
      await Promise.all([a.whenReady(), b.whenReady()]);
      const all = Array.from({ length: 500 }, () => nextWake(b, "crowded"));
      a.publish("crowded");
      expect(await Promise.all(all)).toHaveLength(500);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
