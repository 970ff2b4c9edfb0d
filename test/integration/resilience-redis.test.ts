/**
 * Redis goes away while long-polls wait and comes back. Two replicas share
 * one database and one Redis: the waiters are on B, the writes on A, so every
 * wake-up has to cross processes. While Redis is down, waiters keep working
 * with no client-visible error and are woken promptly through the fallback
 * (PostgreSQL NOTIFY); once Redis is back, wake-ups travel over Redis again.
 */
import { Redis } from "ioredis";
import pg from "pg";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChannel, postMessage, type PageJson } from "../support/fixtures.js";
import { waitUntil } from "../support/load.js";
import { startTestRedis, type TestRedis } from "../support/redis.js";
import { mintKey, rest, startTestServer, untilParked, type TestServer } from "../support/server.js";

let redis: TestRedis;
let a: TestServer;
let b: TestServer;
let key: string;
/** Channel ids seen on the Redis topic and as NOTIFY payloads, to tell which transport carried a wake-up. */
const seenOnRedis: string[] = [];
const seenOnNotify: string[] = [];
let redisObserver: Redis | undefined;
let notifyObserver: pg.Client | undefined;

async function observeRedis(): Promise<Redis> {
  const observer = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: null });
  observer.on("error", () => {});
  observer.on("message", (_topic: string, channelId: string) => seenOnRedis.push(channelId));
  await observer.connect();
  await observer.subscribe("agentbus:wake");
  return observer;
}

const redisConnected = async (server: TestServer) => /^agentbus_wake_redis_connected 1$/m.test(await (await fetch(`${server.url}/metrics`)).text());

beforeAll(async () => {
  redis = await startTestRedis();
  a = await startTestServer({ REDIS_URL: redis.url, AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS: "30" });
  b = await startTestServer({ REDIS_URL: redis.url, DATABASE_URL: a.databaseUrl, AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS: "30" });
  key = await mintKey(a.url);
  await waitUntil(async () => (await redisConnected(a)) && (await redisConnected(b)), 10_000, "both replicas subscribed to Redis");
  redisObserver = await observeRedis();
  notifyObserver = new pg.Client({ connectionString: a.databaseUrl });
  notifyObserver.on("error", () => {});
  notifyObserver.on("notification", (n) => {
    if (n.channel === "agentbus_wake" && n.payload) seenOnNotify.push(n.payload);
  });
  await notifyObserver.connect();
  await notifyObserver.query("LISTEN agentbus_wake");
});

afterAll(async () => {
  redisObserver?.disconnect();
  await notifyObserver?.end().catch(() => {});
  await b?.close();
  await a?.close();
  await redis?.stop();
});

/** A long-poll on `server` from the start of the channel; resolves with status, page and duration. */
function longPoll(server: TestServer, ch: string, waitSeconds = 20) {
  const started = performance.now();
  return rest<PageJson>(server.url, "GET", `/v1/channels/${ch}/messages?since=0&wait=${waitSeconds}`, { key }).then((res) => ({
    ...res,
    ms: performance.now() - started,
    endedAt: performance.now(),
  }));
}

/** Starts waiters on B, lets them settle into waiting, posts on A; returns the waiters' answers and how long after the post they came. */
async function postWhileWaiting(ch: string, waiters: number, content: string) {
  const polls = Array.from({ length: waiters }, () => longPoll(b, ch));
  await untilParked(b, waiters);
  await postMessage(a.url, key, ch, { content });
  const postedAt = performance.now();
  const answers = await Promise.all(polls);
  return answers.map((r) => ({ status: r.status, contents: r.body.data?.map((m) => m.content), afterPostMs: r.endedAt - postedAt }));
}

describe("Redis stopped while long-polls wait", () => {
  it("wakes waiters across replicas before, during and after a Redis outage", async () => {
    const figures: Record<string, number> = {};

    // Redis up: the wake-up goes over Redis, not NOTIFY.
    const ch0 = await createChannel(a.url, key);
    const before = await postWhileWaiting(ch0, 3, "before");
    expect(before.map((r) => [r.status, r.contents])).toEqual(Array(3).fill([200, ["before"]]));
    figures.wake_before_ms = Math.round(Math.max(...before.map((r) => r.afterPostMs)));
    expect(figures.wake_before_ms).toBeLessThan(5_000);
    // Real time: the observers hear the wake-up over a real Redis and PostgreSQL; an absence needs a while to show.
    await sleep(200);
    expect(seenOnRedis).toContain(ch0);
    expect(seenOnNotify).not.toContain(ch0);

    // Waiters already waiting when Redis dies.
    const ch1 = await createChannel(a.url, key);
    const waiting = Array.from({ length: 5 }, () => longPoll(b, ch1));
    const waitingOnA = Array.from({ length: 2 }, () => longPoll(a, ch1));
    await untilParked(b, 5);
    await untilParked(a, 2);
    await redis.kill();
    // Real time: the replicas learn of the outage over their sockets; the write comes while they do.
    await sleep(500);
    await postMessage(a.url, key, ch1, { content: "during" });
    const postedAt = performance.now();
    const answers = await Promise.all([...waiting, ...waitingOnA]);
    expect(answers.map((r) => [r.status, r.body.data.map((m) => m.content)])).toEqual(Array(7).fill([200, ["during"]]));
    figures.wake_waiting_during_outage_ms = Math.round(Math.max(...answers.map((r) => r.endedAt - postedAt)));
    expect(figures.wake_waiting_during_outage_ms).toBeLessThan(5_000);
    expect(seenOnNotify).toContain(ch1);

    // New long-polls while Redis is still down.
    let slowest = 0;
    for (let round = 0; round < 3; round++) {
      const ch = await createChannel(a.url, key);
      const got = await postWhileWaiting(ch, 3, `down-${round}`);
      expect(got.map((r) => [r.status, r.contents])).toEqual(Array(3).fill([200, [`down-${round}`]]));
      slowest = Math.max(slowest, ...got.map((r) => r.afterPostMs));
    }
    figures.wake_new_during_outage_ms = Math.round(slowest);
    expect(slowest).toBeLessThan(5_000);
    expect(await redisConnected(b)).toBe(false);

    // Redis back on the same port: both replicas resubscribe by themselves.
    await redis.start();
    figures.resubscribed_after_ms = Math.round(
      await waitUntil(async () => (await redisConnected(a)) && (await redisConnected(b)), 20_000, "replicas back on Redis", 100),
    );
    redisObserver?.disconnect();
    redisObserver = await observeRedis();
    seenOnRedis.length = 0;
    seenOnNotify.length = 0;
    const ch2 = await createChannel(a.url, key);
    const after = await postWhileWaiting(ch2, 3, "after");
    expect(after.map((r) => [r.status, r.contents])).toEqual(Array(3).fill([200, ["after"]]));
    figures.wake_after_ms = Math.round(Math.max(...after.map((r) => r.afterPostMs)));
    expect(figures.wake_after_ms).toBeLessThan(5_000);
    // Real time: the observers hear the wake-up over a real Redis and PostgreSQL; an absence needs a while to show.
    await sleep(200);
    // Carried by Redis again; the NOTIFY fallback is idle.
    expect(seenOnRedis).toContain(ch2);
    expect(seenOnNotify).not.toContain(ch2);
    console.log(`[resilience-redis] ${JSON.stringify(figures)}`);

    // The outage logged once per replica (ioredis reports every reconnect attempt), without stacks, and its end once.
    for (const replica of [a, b]) {
      const down = replica.logs.filter((l) => String(l.msg).startsWith("Redis wake-up transport error"));
      expect(down.length).toBeGreaterThanOrEqual(1);
      expect(down.length).toBeLessThanOrEqual(2);
      expect(down.filter((l) => (l.err as { stack?: string } | undefined)?.stack !== undefined)).toEqual([]);
      expect(replica.logs.filter((l) => l.msg === "Redis wake-ups restored")).toHaveLength(1);
    }
  }, 90_000);
});
