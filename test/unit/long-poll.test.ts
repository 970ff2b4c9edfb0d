/** The long-poll's timing rules (docs/decisions.md#long-poll), on a manual clock: no test sleeps. */
import { describe, expect, it } from "vitest";
import { LocalFanout } from "../../src/bus/wake-bus.js";
import type { WakeBus, WakeListener } from "../../src/ports/wake-bus.js";
import { readOrWait, type LongPollOptions } from "../../src/domain/long-poll.js";
import { ManualClock, settle } from "../support/clock.js";

/** A wake bus within the test: publish wakes the subscribers at once. */
class LocalBus implements WakeBus {
  private readonly fanout = new LocalFanout();
  get subscriptions(): number {
    return this.fanout.subscriptions;
  }
  publish(channelId: string): void {
    this.fanout.deliver(channelId);
  }
  subscribe(channelId: string, listener: WakeListener): () => void {
    return this.fanout.subscribe(channelId, listener);
  }
  async close(): Promise<void> {}
}

/** A channel whose reads return what the test put in it, and how often it was read. */
function channel() {
  const state = { rows: [] as string[], reads: 0 };
  const read = () => {
    state.reads++;
    return Promise.resolve([...state.rows]);
  };
  return { state, read };
}

/** Starts a long-poll; `settled` tells whether it has answered yet. */
function start(read: () => Promise<string[]>, options: Partial<LongPollOptions> & { clock: ManualClock; bus: WakeBus }) {
  const result = { settled: false, value: undefined as string[] | undefined, atMs: Number.NaN };
  const done = readOrWait(read, { channelId: "ch", waitMs: 1_000, maxWaiters: 100, ...options }).then((value) => {
    Object.assign(result, { settled: true, value, atMs: options.clock.monotonicMs() });
    return value;
  });
  return { result, done };
}

describe("readOrWait", () => {
  it("re-reads when nextDue falls due, with no wake-up", async () => {
    const clock = new ManualClock();
    const ch = channel();
    const due = clock.now() + 400_000;
    const poll = start(ch.read, { clock, bus: new LocalBus(), waitMs: 10_000, nextDue: async () => (clock.now() < due ? due : null) });
    await clock.advance(399);
    expect(ch.state.reads).toBe(2);
    ch.state.rows.push("due now");
    await clock.advance(1);
    expect(poll.result).toEqual({ settled: true, value: ["due now"], atMs: 400 });
  });

  it("re-reads at once when the data fell due between the read and the next-due look-up", async () => {
    // A read sees the channel as it was when it began and takes 10 ms; the message falls due 5 ms in.
    // Asked afterwards "what falls due after now", the look-up would answer nothing and the wait would
    // run to its end (issue 27, item 8: retries came back 20 s late); asked "after the read began", it
    // answers a moment already past, and the wait re-reads at once.
    const clock = new ManualClock();
    const start0 = clock.now();
    const due = start0 + 5_000;
    let reads = 0;
    const read = async () => {
      reads++;
      const began = clock.now();
      if (reads === 2) await clock.advance(10);
      return began >= due ? ["fell due"] : [];
    };
    const nextDue = async (after: number) => (due > after ? due : null);
    const poll = start(read, { clock, bus: new LocalBus(), waitMs: 20_000, nextDue });
    for (let step = 0; step < 10 && !poll.result.settled; step++) await clock.advance(0);
    expect(poll.result).toEqual({ settled: true, value: ["fell due"], atMs: 10 });
  });

  it("ends at once, with nothing, when the caller leaves while the wait is still looking up what falls due", async () => {
    // The abort event fires before the wait listens for it: the wait must see that it has fired already.
    const clock = new ManualClock();
    const gone = new AbortController();
    const read = async () => [] as string[];
    const nextDue = async () => {
      gone.abort();
      return null;
    };
    const poll = start(read, { clock, bus: new LocalBus(), waitMs: 20_000, signal: gone.signal, nextDue });
    await settle();
    await clock.advance(0);
    expect(poll.result).toEqual({ settled: true, value: [], atMs: 0 });
  });

  it("keeps to the deadline when nextDue lies beyond it", async () => {
    const clock = new ManualClock();
    const ch = channel();
    const poll = start(ch.read, { clock, bus: new LocalBus(), nextDue: async () => clock.now() + 5_000_000 });
    await clock.advance(1_000);
    expect(poll.result).toEqual({ settled: true, value: [], atMs: 1_000 });
  });

  it("returns an empty page exactly at the deadline", async () => {
    const clock = new ManualClock();
    const { read } = channel();
    const poll = start(read, { clock, bus: new LocalBus() });
    await clock.advance(999);
    expect(poll.result.settled).toBe(false);
    await clock.advance(1);
    expect(poll.result).toEqual({ settled: true, value: [], atMs: 1_000 });
  });

  it("returns the message when a wake-up comes before the deadline", async () => {
    const clock = new ManualClock();
    const bus = new LocalBus();
    const ch = channel();
    const poll = start(ch.read, { clock, bus });
    await clock.advance(300);
    ch.state.rows.push("wake up");
    bus.publish("ch");
    await settle();
    expect(poll.result).toEqual({ settled: true, value: ["wake up"], atMs: 300 });
  });

  it("keeps waiting until the deadline past a wake-up its read filters out", async () => {
    const clock = new ManualClock();
    const bus = new LocalBus();
    const ch = channel();
    const poll = start(ch.read, { clock, bus });
    await clock.advance(400);
    bus.publish("ch");
    await settle();
    expect(poll.result.settled).toBe(false);
    expect(ch.state.reads).toBe(3);
    await clock.advance(600);
    expect(poll.result).toEqual({ settled: true, value: [], atMs: 1_000 });
  });

  it("answers at once without a timer when the wait is 0", async () => {
    const clock = new ManualClock();
    const poll = start(channel().read, { clock, bus: new LocalBus(), waitMs: 0 });
    await settle();
    expect(poll.result).toEqual({ settled: true, value: [], atMs: 0 });
    expect(clock.pendingTimers).toBe(0);
  });

  it("ends the wait when the signal aborts, before the deadline", async () => {
    const clock = new ManualClock();
    const abort = new AbortController();
    const poll = start(channel().read, { clock, bus: new LocalBus(), signal: abort.signal });
    await clock.advance(250);
    abort.abort();
    await settle();
    expect(poll.result).toEqual({ settled: true, value: [], atMs: 250 });
  });

  it("leaves no timer and no subscription behind once it has answered", async () => {
    const clock = new ManualClock();
    const bus = new LocalBus();
    const ch = channel();
    const poll = start(ch.read, { clock, bus });
    await settle();
    expect(clock.pendingTimers).toBe(1);
    expect(bus.subscriptions).toBe(1);
    ch.state.rows.push("done");
    bus.publish("ch");
    await poll.done;
    expect(clock.pendingTimers).toBe(0);
    expect(bus.subscriptions).toBe(0);
  });
});
