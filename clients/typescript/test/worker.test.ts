/** runWorker: claim with a lease, heartbeat, ack or release, exactly once across workers. */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AdjustableClock } from "../../../test/support/clock.js";
import { startTestServer, type TestServer } from "../../../test/support/server.js";
import { ChannelMode, isAgentbusError, runWorker, type AgentbusClient, type Message, type WorkerOptions } from "../src/index.js";
import { clientWithNewKey, wireSpy } from "./helpers.js";

let server: TestServer;
let clock: AdjustableClock;
beforeAll(async () => {
  clock = new AdjustableClock();
  server = await startTestServer({}, { clock });
});
afterEach(() => clock.reset());
afterAll(async () => {
  await server?.close();
});

/** A claimable channel with `contents` posted in order, owned by a fresh key. */
async function channelWith(contents: string[]): Promise<{ owner: AgentbusClient; channel: string; ids: string[] }> {
  const { client: owner } = await clientWithNewKey(server.url);
  const { id: channel } = await owner.channels.createChannel({ name: "work", mode: ChannelMode.CLAIMABLE });
  const ids: string[] = [];
  for (const content of contents) ids.push((await owner.messages.createMessage({ identifier: channel, content })).message?.id ?? "");
  return { owner, channel, ids };
}

async function allMessages(client: AgentbusClient, channel: string): Promise<Message[]> {
  return (await client.messages.listMessages({ identifier: channel, since: "0", limit: 100 })).data;
}

/** Runs a worker in the background; `stop()` aborts it and returns its result. */
function start(options: Omit<WorkerOptions, "signal">) {
  const abort = new AbortController();
  const errors: unknown[] = [];
  const running = runWorker({ waitSeconds: 2, onError: (e) => errors.push(e), ...options, signal: abort.signal });
  return {
    errors,
    running,
    stop: async () => {
      abort.abort();
      return running;
    },
  };
}

/** A promise with its resolve function, for "wait until this happened" in tests. */
function signalled<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe("runWorker", () => {
  it("claims each message with a lease and acks it once the handler succeeds", async () => {
    const { owner, channel, ids } = await channelWith(["a", "b", "c"]);
    const spy = wireSpy();
    const { client } = await clientWithNewKey(server.url, { interceptors: [spy.interceptor] });
    const seen: string[] = [];
    const allDone = signalled();
    const worker = start({
      client,
      channel,
      handle: (m) => {
        seen.push(m.content);
        if (seen.length === 3) allDone.resolve();
      },
    });
    await allDone.promise;
    const stats = await worker.stop();
    expect(seen).toEqual(["a", "b", "c"]);
    expect(stats).toEqual({ acked: 3, failed: 0, skipped: 0 });
    expect(spy.calls.filter((c) => c.method === "ClaimMessageWithLease")).toHaveLength(3);
    expect(spy.calls.some((c) => c.method === "ClaimMessage")).toBe(false);
    const messages = await allMessages(owner, channel);
    expect(messages.map((m) => [m.id, m.claimedByKeyId !== undefined, m.acknowledgedBy.length])).toEqual(ids.map((id) => [id, true, 1]));
  });

  it("heartbeats the lease while a handler outlasts it, so no one else can claim the message, then acks", async () => {
    const { owner, channel, ids } = await channelWith(["slow"]);
    const spy = wireSpy();
    const { client } = await clientWithNewKey(server.url, { interceptors: [spy.interceptor] });
    const { client: rival } = await clientWithNewKey(server.url);
    const handled = signalled<unknown>();
    const worker = start({
      client,
      channel,
      leaseSeconds: 30,
      heartbeatIntervalMs: 100,
      handle: async () => {
        // 3 × 20 s of service time: twice the 30 s lease. Two completed beats
        // after each step guarantee one was sent after the clock moved.
        for (let i = 0; i < 3; i++) {
          clock.advanceSeconds(20);
          await spy.completed("HeartbeatLease");
          await spy.completed("HeartbeatLease");
        }
        handled.resolve(await rival.messages.claimMessageWithLease({ messageId: ids[0] ?? "" }).catch((e: unknown) => e));
      },
    });
    const rivalOutcome = await handled.promise;
    expect(isAgentbusError(rivalOutcome, "already_claimed"), String(rivalOutcome)).toBe(true);
    await expect.poll(async () => (await allMessages(owner, channel))[0]?.acknowledgedBy.length, { timeout: 10_000 }).toBe(1);
    expect(await worker.stop()).toEqual({ acked: 1, failed: 0, skipped: 0 });
    expect(worker.errors).toEqual([]);
  });

  it("releases the message when the handler fails, so another worker processes it", async () => {
    const { owner, channel, ids } = await channelWith(["flaky"]);
    const { client: failingClient } = await clientWithNewKey(server.url);
    const { client: healthyClient } = await clientWithNewKey(server.url);
    const failed = signalled();
    const failing = start({
      client: failingClient,
      channel,
      handle: () => {
        failed.resolve();
        throw new Error("cannot do this one");
      },
    });
    await failed.promise;
    const doneBy = signalled<string>();
    const healthy = start({ client: healthyClient, channel, handle: (m) => doneBy.resolve(m.id) });
    expect(await doneBy.promise).toBe(ids[0]);
    const failingStats = await failing.stop();
    const healthyStats = await healthy.stop();
    expect(failingStats).toEqual({ acked: 0, failed: 1, skipped: 0 });
    expect(failing.errors.map(String)).toEqual(["Error: cannot do this one"]);
    expect(healthyStats.acked).toBe(1);
    const [message] = await allMessages(owner, channel);
    expect(message?.acknowledgedBy).toHaveLength(1);
    expect(message?.claimedByKeyId).toBe((await healthyClient.keys.getCurrentKey({})).keyId);
  });

  it("gets past a full page of messages it keeps failing to the work behind them", async () => {
    const { owner, channel, ids } = await channelWith(["poison 1", "poison 2", "poison 3", "good"]);
    const { client } = await clientWithNewKey(server.url);
    const done = signalled<string>();
    const worker = start({
      client,
      channel,
      batchSize: 2,
      retryFailedAfterMs: 60_000,
      handle: (m) => {
        if (m.content.startsWith("poison")) throw new Error("poison");
        done.resolve(m.id);
      },
    });
    expect(await done.promise).toBe(ids[3]);
    const stats = await worker.stop();
    expect(stats).toEqual({ acked: 1, failed: 3, skipped: 0 });
    const messages = await allMessages(owner, channel);
    expect(messages.map((m) => m.acknowledgedBy.length)).toEqual([0, 0, 0, 1]);
  });

  it("skips a message another worker claimed first (already_claimed) and moves on", async () => {
    const { channel, ids } = await channelWith(["taken", "free"]);
    const { client: rival } = await clientWithNewKey(server.url);
    let stolen = false;
    // Just before the worker's first claim, a rival claims that message.
    const { client } = await clientWithNewKey(server.url, {
      interceptors: [
        (next) => async (req) => {
          if (req.method.name === "ClaimMessageWithLease" && !stolen) {
            stolen = true;
            await rival.messages.claimMessageWithLease({ messageId: ids[0] ?? "" });
          }
          return next(req);
        },
      ],
    });
    const handled = signalled<string>();
    const worker = start({ client, channel, handle: (m) => handled.resolve(m.content) });
    expect(await handled.promise).toBe("free");
    expect(await worker.stop()).toEqual({ acked: 1, failed: 0, skipped: 1 });
    expect(worker.errors).toEqual([]);
  });

  it("processes each of 30 messages exactly once across three concurrent workers", async () => {
    const contents = Array.from({ length: 30 }, (_, i) => `task ${i}`);
    const { owner, channel } = await channelWith(contents);
    const processed: string[] = [];
    const allDone = signalled();
    const handle = async (m: Message) => {
      await new Promise((r) => setTimeout(r, Math.random() * 20));
      processed.push(m.content);
      if (new Set(processed).size === contents.length) allDone.resolve();
    };
    const workers = await Promise.all(
      [1, 2, 3].map(async () => start({ client: (await clientWithNewKey(server.url)).client, channel, handle, batchSize: 5 })),
    );
    await allDone.promise;
    const stats = await Promise.all(workers.map((w) => w.stop()));
    expect(processed.slice().sort()).toEqual(contents.slice().sort());
    expect(stats.reduce((sum, s) => sum + s.acked, 0)).toBe(contents.length);
    expect(stats.every((s) => s.failed === 0)).toBe(true);
    expect((await allMessages(owner, channel)).map((m) => m.acknowledgedBy.length)).toEqual(contents.map(() => 1));
  });

  it("stops cleanly when its signal aborts while it long-polls an empty channel", async () => {
    const { channel } = await channelWith([]);
    const spy = wireSpy();
    const { client } = await clientWithNewKey(server.url, { interceptors: [spy.interceptor] });
    const worker = start({ client, channel, waitSeconds: 20, handle: () => {} });
    await expect.poll(() => spy.calls.some((c) => c.method === "ListMessages")).toBe(true);
    expect(await worker.stop()).toEqual({ acked: 0, failed: 0, skipped: 0 });
    expect(worker.errors).toEqual([]);
  });

  it("rejects with the service's error when the channel does not exist", async () => {
    const { client } = await clientWithNewKey(server.url);
    const worker = start({ client, channel: "no-such-channel", handle: () => {} });
    await expect(worker.running).rejects.toMatchObject({ name: "AgentbusError", code: "channel_not_found" });
  });
});
