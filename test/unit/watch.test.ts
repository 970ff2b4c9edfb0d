/** The watch stream's recheck rule, on a manual clock: no test sleeps. */
import { describe, expect, it } from "vitest";
import { LocalFanout } from "../../src/bus/wake-bus.js";
import { Messages } from "../../src/domain/messages.js";
import type { Caller } from "../../src/model/caller.js";
import { ManualClock, settle } from "../support/clock.js";

type Args = ConstructorParameters<typeof Messages>;
type Channel = NonNullable<Awaited<ReturnType<Args[1]["findView"]>>>;

const RECHECK_MS = 15_000;
const member: Caller = { keyId: "ak_member", agentLabel: "member", ownerId: "member" };

/**
 * A restricted channel the caller is a member of until the test says
 * otherwise; the store holds no messages. Counts the lookups (access checks)
 * and the reads.
 */
function watchedChannel() {
  const clock = new ManualClock();
  const state = { isMember: true, lookups: 0, reads: 0 };
  const view = (): Channel =>
    ({ id: "ch_1", access: "restricted", createdByKeyId: "ak_owner", callerIsMember: state.isMember }) as Channel;
  const store = {
    channelHead: () => Promise.resolve(null),
    list: () => {
      state.reads++;
      return Promise.resolve([]);
    },
  } as unknown as Args[0];
  const channels = {
    findView: () => {
      state.lookups++;
      return Promise.resolve(view());
    },
  } as unknown as Args[1];
  const fanout = new LocalFanout();
  const bus = {
    get subscriptions() {
      return fanout.subscriptions;
    },
    publish: (id: string) => fanout.deliver(id),
    subscribe: fanout.subscribe.bind(fanout),
    close: () => Promise.resolve(),
  };
  const messages = new Messages(store, channels, {} as Args[2], clock, {
    maxContentBytes: 1_000,
    bus,
    afterCommit: (fn) => fn(),
    longPollMaxWaitSeconds: 30,
    longPollMaxWaiters: 100,
    longPollMaxWaitersPerKey: 10,
  });
  return { clock, state, messages };
}

/** Opens a watch and starts reading it; `outcome` tells how the read ended, if it has. */
async function follow(messages: Messages, abort: AbortController) {
  const watch = await messages.openWatch(member, "ch_1", undefined, abort.signal);
  const outcome: { error?: unknown; done?: boolean } = {};
  void watch.messages.next().then(
    (r) => (outcome.done = r.done),
    (err: unknown) => (outcome.error = err),
  );
  return outcome;
}

describe("watch", () => {
  it("re-reads an idle channel once per recheck interval", async () => {
    const { clock, state, messages } = watchedChannel();
    const abort = new AbortController();
    await follow(messages, abort);
    await settle();
    expect(state.reads).toBe(1);
    await clock.advance(RECHECK_MS - 1);
    expect(state.reads).toBe(1);
    await clock.advance(1);
    expect(state.reads).toBe(2);
    await clock.advance(RECHECK_MS);
    expect(state.reads).toBe(3);
    abort.abort();
  });

  it("rechecks access once the recheck interval has passed, not before", async () => {
    const { clock, state, messages } = watchedChannel();
    const abort = new AbortController();
    const outcome = await follow(messages, abort);
    await settle();
    const opened = state.lookups;
    state.isMember = false;
    await clock.advance(RECHECK_MS - 1);
    expect(state.lookups).toBe(opened);
    expect(outcome).toEqual({});
    await clock.advance(1);
    expect(state.lookups).toBe(opened + 1);
    expect(outcome.error).toMatchObject({ code: "channel_access_denied" });
    abort.abort();
  });

  it("leaves no timer behind when the client goes away", async () => {
    const { clock, messages } = watchedChannel();
    const abort = new AbortController();
    const outcome = await follow(messages, abort);
    await settle();
    expect(clock.pendingTimers).toBe(1);
    abort.abort();
    await settle();
    expect(outcome).toEqual({ done: true });
    expect(clock.pendingTimers).toBe(0);
  });
});
