/** Both wake buses deliver to local waiters at once and to other processes through their transport. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PgNotifyBus } from "../../src/bus/pg-notify-bus.js";
import { RedisBus } from "../../src/bus/redis-bus.js";
import { LocalFanout } from "../../src/bus/wake-bus.js";
import type { WakeBus } from "../../src/ports/wake-bus.js";
import { useTestDatabase } from "../support/database.js";
import { startTestRedis, type TestRedis } from "../support/redis.js";

const db = useTestDatabase();
let redis: TestRedis;
beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  await redis?.stop();
});

const ignore = () => {};

const buses: Array<[string, () => Promise<WakeBus & { whenReady(): Promise<void> }>]> = [
  ["PostgreSQL LISTEN/NOTIFY", async () => new PgNotifyBus(db.pool, { connectionString: db.url, onError: ignore })],
  ["Redis pub/sub", async () => new RedisBus(redis.url, ignore)],
];

const nextWake = (bus: WakeBus, channel: string, timeoutMs = 5_000) =>
  new Promise<number>((resolve, reject) => {
    const started = performance.now();
    // Real time: a bound on a wake-up travelling over a real Redis or PostgreSQL.
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

describe("PostgreSQL LISTEN/NOTIFY under load", () => {
  it("sends the announcements of one event-loop turn together: another process hears each channel once", async () => {
    const a = new PgNotifyBus(db.pool, { connectionString: db.url, onError: ignore });
    const b = new PgNotifyBus(db.pool, { connectionString: db.url, onError: ignore });
    try {
      await Promise.all([a.whenReady(), b.whenReady()]);
      const heard: string[] = [];
      const stops = ["turn-x", "turn-y"].map((ch) => b.subscribe(ch, () => heard.push(ch)));
      // One statement (one transaction): PostgreSQL folds the repeated NOTIFY; three statements would be heard three times.
      for (const ch of ["turn-x", "turn-y", "turn-x", "turn-x"]) a.notify(ch);
      await nextWake(b, "turn-y");
      // Notifications arrive in commit order: once a later one is heard, no straggler of the first turn is left.
      const end = nextWake(b, "turn-end");
      setImmediate(() => a.notify("turn-end"));
      await end;
      expect(heard.sort()).toEqual(["turn-x", "turn-y"]);
      for (const stop of stops) stop();
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe("when the transport goes away", () => {
  it("Redis down: publishes fall back to PostgreSQL NOTIFY and still wake other processes", async () => {
    const own = await startTestRedis();
    const make = () => {
      const fanout = new LocalFanout();
      const fallback = new PgNotifyBus(db.pool, { connectionString: db.url, onError: ignore, fanout });
      // No periodic re-read within the test: only the NOTIFY fallback can wake b.
      return { bus: new RedisBus(own.url, ignore, { fanout, fallback, recheckMs: 60_000 }), fallback };
    };
    const a = make();
    const b = make();
    try {
      await Promise.all([a.bus.whenReady(), b.bus.whenReady(), a.fallback.whenReady(), b.fallback.whenReady()]);
      await own.kill();
      const woken = nextWake(b.bus, "outage");
      a.bus.publish("outage");
      expect(await woken).toBeLessThan(3_000);
    } finally {
      await Promise.all([a.bus.close(), b.bus.close()]);
      await own.stop();
    }
  });

  it("Redis subscriber down: local waiters re-read periodically, and once more when it is subscribed again", async () => {
    const own = await startTestRedis();
    const bus = new RedisBus(own.url, ignore, { recheckMs: 200 });
    try {
      await bus.whenReady();
      await own.kill();
      // No publish at all: the periodic re-check wakes the waiter.
      expect(await nextWake(bus, "quiet", 5_000)).toBeLessThan(5_000);
      await own.start();
      await new Promise<void>((resolve) => {
        const check = setInterval(() => {
          if (bus.connected) {
            clearInterval(check);
            resolve();
          }
        }, 20);
      });
      // Re-checks stop once subscribed: nothing wakes a waiter for three intervals without a publish.
      let wakes = 0;
      const unsubscribe = bus.subscribe("quiet", () => wakes++);
      // Real time: the Redis adapter's recheck timer is tied to its real connection; an absence of wake-ups shows only over a while.
      await new Promise((r) => setTimeout(r, 600));
      unsubscribe();
      expect(wakes).toBe(0);
      // A publish from another process arrives over Redis again.
      const other = new RedisBus(own.url, ignore);
      try {
        await other.whenReady();
        const woken = nextWake(bus, "back");
        other.publish("back");
        expect(await woken).toBeLessThan(5_000);
      } finally {
        await other.close();
      }
    } finally {
      await bus.close();
      await own.stop();
    }
  });

  it("NOTIFY listener lost: it reconnects and wakes every local waiter once", async () => {
    const bus = new PgNotifyBus(db.pool, { connectionString: db.url, onError: ignore });
    try {
      await bus.whenReady();
      const woken = nextWake(bus, "missed", 10_000);
      await db.pool.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'agentbus-wake' AND datname = current_database()");
      // Nobody published: the wake-up covers NOTIFYs sent while nobody listened.
      expect(await woken).toBeLessThan(10_000);
    } finally {
      await bus.close();
    }
  });
});
