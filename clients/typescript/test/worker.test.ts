/** runWorker: receive leased batches, heartbeat, ack with the result or release, exactly once across workers. */
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
  for (let i = 0; i < contents.length; i += 100) {
    const page = await owner.messages.batchCreateMessages({ identifier: channel, messages: contents.slice(i, i + 100).map((content) => ({ content })) });
    ids.push(...page.data.map((m) => m.id));
  }
  return { owner, channel, ids };
}

async function allMessages(client: AgentbusClient, channel: string): Promise<Message[]> {
  const messages: Message[] = [];
  let since = "0";
  for (;;) {
    const page = await client.messages.listMessages({ identifier: channel, since, limit: 100 });
    messages.push(...page.data);
    if (page.data.length < 100 || !page.nextCursor) return messages;
    since = page.nextCursor;
  }
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
  it("receives each message with a lease and acks it with the handler's string as its result", async () => {
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
        return `done ${m.content}`;
      },
    });
    await allDone.promise;
    const stats = await worker.stop();
    expect(seen).toEqual(["a", "b", "c"]);
    expect(stats).toEqual({ acked: 3, failed: 0 });
    expect(spy.calls.some((c) => c.method === "ClaimMessageWithLease" || c.method === "ListMessages")).toBe(false);
    const messages = await allMessages(owner, channel);
    expect(messages.map((m) => [m.id, m.acknowledgedBy.length, m.result])).toEqual(ids.map((id, i) => [id, 1, `done ${["a", "b", "c"][i]}`]));
  });

  it("sends no idempotency key on its waiting receive (the service refuses one) but keys its acks", async () => {
    const { channel } = await channelWith(["a"]);
    const spy = wireSpy();
    const { client } = await clientWithNewKey(server.url, { interceptors: [spy.interceptor] });
    const done = signalled();
    const worker = start({ client, channel, handle: () => done.resolve() });
    await done.promise;
    await worker.stop();
    const receives = spy.calls.filter((c) => c.method === "ReceiveMessages");
    expect(receives.length).toBeGreaterThan(0);
    expect(receives.every((c) => c.idempotencyKey === null)).toBe(true);
    expect(spy.calls.find((c) => c.method === "AckMessage")?.idempotencyKey).toMatch(/.+/);
    expect(worker.errors).toEqual([]);
  });

  it("JSON-encodes a result that is not a string, and acks without one when the handler returns nothing", async () => {
    const { owner, channel } = await channelWith(["object", "nothing"]);
    const { client } = await clientWithNewKey(server.url);
    const done = signalled();
    const worker = start({
      client,
      channel,
      handle: (m) => {
        if (m.content === "object") return { ok: true, n: 1 };
        done.resolve();
        return undefined;
      },
    });
    await done.promise;
    expect(await worker.stop()).toEqual({ acked: 2, failed: 0 });
    const [object, nothing] = await allMessages(owner, channel);
    expect(object?.result).toBe('{"ok":true,"n":1}');
    expect(nothing?.acknowledgedBy).toHaveLength(1);
    expect(nothing?.result).toBeUndefined();
  });

  it("releases a message whose handler failed at once, and the redelivery shows the handler deliveryCount 2", async () => {
    const { owner, channel } = await channelWith(["flaky"]);
    const { client } = await clientWithNewKey(server.url);
    const deliveries: number[] = [];
    const done = signalled();
    const worker = start({
      client,
      channel,
      handle: (_m, { deliveryCount }) => {
        deliveries.push(deliveryCount);
        if (deliveryCount === 1) throw new Error("first try fails");
        done.resolve();
        return "second try";
      },
    });
    await done.promise;
    expect(await worker.stop()).toEqual({ acked: 1, failed: 1 });
    expect(deliveries).toEqual([1, 2]);
    expect(worker.errors.map(String)).toEqual(["Error: first try fails"]);
    const [message] = await allMessages(owner, channel);
    expect(message).toMatchObject({ deliveryCount: 2, result: "second try" });
  });

  it("surfaces a result over 64 KiB as the service's result_too_large and releases the message", async () => {
    const { owner, channel } = await channelWith(["big"]);
    const { client } = await clientWithNewKey(server.url);
    const handled = signalled();
    const worker = start({
      client,
      channel,
      handle: () => {
        handled.resolve();
        return "x".repeat(65_537);
      },
    });
    await handled.promise;
    await expect.poll(() => worker.errors.length, { timeout: 10_000 }).toBeGreaterThan(0);
    const stats = await worker.stop();
    expect(stats.acked).toBe(0);
    expect(stats.failed).toBeGreaterThan(0);
    expect(isAgentbusError(worker.errors[0], "result_too_large"), String(worker.errors[0])).toBe(true);
    const [message] = await allMessages(owner, channel);
    expect(message?.acknowledgedBy).toEqual([]);
    expect(message?.claimedByKeyId).toBeUndefined();
  });

  it("heartbeats the lease while a handler outlasts it, so no one else can take the message, then acks", async () => {
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
        const received = await rival.messages.receiveMessages({ identifier: channel, maxMessages: 10 });
        const claim = await rival.messages.claimMessageWithLease({ messageId: ids[0] ?? "" }).catch((e: unknown) => e);
        handled.resolve({ received: received.data.length, claim });
      },
    });
    const rivalOutcome = (await handled.promise) as { received: number; claim: unknown };
    expect(rivalOutcome.received).toBe(0);
    expect(isAgentbusError(rivalOutcome.claim, "already_claimed"), String(rivalOutcome.claim)).toBe(true);
    await expect.poll(async () => (await allMessages(owner, channel))[0]?.acknowledgedBy.length, { timeout: 10_000 }).toBe(1);
    expect(await worker.stop()).toEqual({ acked: 1, failed: 0 });
    expect(worker.errors).toEqual([]);
  });

  for (const batchSize of [1, 10]) {
    it(`drains 60 messages across three concurrent workers with batchSize ${batchSize}, acking each exactly once with its result`, async () => {
      const contents = Array.from({ length: 60 }, (_, i) => `task ${i}`);
      const { owner, channel } = await channelWith(contents);
      const processed: string[] = [];
      const allDone = signalled();
      const handle = async (m: Message) => {
        await new Promise((r) => setTimeout(r, Math.random() * 20));
        processed.push(m.content);
        if (processed.length === contents.length) allDone.resolve();
        return `result of ${m.content}`;
      };
      const workers = await Promise.all([1, 2, 3].map(async () => start({ client: (await clientWithNewKey(server.url)).client, channel, handle, batchSize })));
      await allDone.promise;
      const stats = await Promise.all(workers.map((w) => w.stop()));
      expect(processed.slice().sort()).toEqual(contents.slice().sort());
      expect(stats.reduce((sum, s) => sum + s.acked, 0)).toBe(contents.length);
      expect(stats.every((s) => s.failed === 0)).toBe(true);
      const stored = await allMessages(owner, channel);
      expect(stored.map((m) => [m.acknowledgedBy.length, m.deliveryCount, m.result])).toEqual(contents.map((c) => [1, 1, `result of ${c}`]));
    });
  }

  it("runs up to `concurrency` handlers at once from one received batch", async () => {
    const { channel } = await channelWith(["1", "2", "3", "4"]);
    const { client } = await clientWithNewKey(server.url);
    let running = 0;
    let peak = 0;
    const allIn = signalled();
    const gate = signalled();
    let started = 0;
    const worker = start({
      client,
      channel,
      batchSize: 4,
      concurrency: 2,
      handle: async () => {
        peak = Math.max(peak, ++running);
        if (++started === 2) allIn.resolve();
        await gate.promise;
        running--;
      },
    });
    await allIn.promise;
    expect(running).toBe(2);
    gate.resolve();
    await expect.poll(() => started).toBe(4);
    expect(await worker.stop()).toEqual({ acked: 4, failed: 0 });
    expect(peak).toBe(2);
  });

  it("stops cleanly when its signal aborts while it long-polls an empty channel", async () => {
    const { channel } = await channelWith([]);
    const spy = wireSpy();
    const { client } = await clientWithNewKey(server.url, { interceptors: [spy.interceptor] });
    const worker = start({ client, channel, waitSeconds: 20, handle: () => {} });
    await expect.poll(() => spy.calls.some((c) => c.method === "ReceiveMessages")).toBe(true);
    expect(await worker.stop()).toEqual({ acked: 0, failed: 0 });
    expect(worker.errors).toEqual([]);
  });

  it("takes a fractional waitSeconds (its deadline goes out in whole milliseconds)", async () => {
    const { channel } = await channelWith(["a"]);
    const { client } = await clientWithNewKey(server.url);
    const done = signalled();
    // (2.3 + 30) * 1000 is 32299.999999999996 in floating point.
    const worker = start({ client, channel, waitSeconds: 2.3, handle: () => done.resolve() });
    await done.promise;
    expect(await worker.stop()).toEqual({ acked: 1, failed: 0 });
    expect(worker.errors).toEqual([]);
  });

  it("rejects with the service's error when the channel does not exist", async () => {
    const { client } = await clientWithNewKey(server.url);
    const worker = start({ client, channel: "no-such-channel", handle: () => {} });
    await expect(worker.running).rejects.toMatchObject({ name: "AgentbusError", code: "channel_not_found" });
  });
});
