/** Messages and ChannelHistory use cases against in-memory stores. */
import { beforeEach, describe, expect, it } from "vitest";
import type { Channels } from "../../src/domain/channels.js";
import { ChannelHistory } from "../../src/domain/history.js";
import { Messages, type ListInput, type ReceiveInput } from "../../src/domain/messages.js";
import { ApiError } from "../../src/model/errors.js";
import type { ManualClock } from "../support/clock.js";
import { alice, bob, createChannelInput as channelInput, fakeDomain } from "../support/domain.js";
import { rejectionOf } from "../support/errors.js";
import { eventually } from "../support/eventually.js";
import type { FakeChannelStore } from "../support/fakes/channels.js";
import { FakeHistoryStore } from "../support/fakes/history.js";
import type { FakeWakeBus } from "../support/fakes/wake-bus.js";
import type { FakeMessageStore } from "../support/fakes/messages.js";
import type { Actors } from "../../src/domain/actors.js";

const post = (content: string) => ({ content, actor: undefined, actorLabel: undefined, metadata: undefined, mentions: [] });
const listAll = (fields: Partial<ListInput> = {}): ListInput => ({ since: undefined, cursor: undefined, limit: undefined, status: "all", ...fields });
const receiveInput = (fields: Partial<ReceiveInput> = {}): ReceiveInput => ({ maxMessages: undefined, leaseSeconds: undefined, wait: undefined, actor: undefined, ...fields });
const refusal = (promise: Promise<unknown>) => rejectionOf(ApiError, promise);

let channelStore: FakeChannelStore;
let messageStore: FakeMessageStore;
let actors: Actors;
let bus: FakeWakeBus;
let clock: ManualClock;
let channels: Channels;
let messages: Messages;
let channelId: string;

beforeEach(async () => {
  ({ channelStore, messageStore, actors, bus, clock, channels, messages } = fakeDomain());
  channelId = (await channels.create(alice, channelInput())).id;
});

describe("Messages", () => {
  it("lists posted messages oldest first", async () => {
    await messages.create(alice, channelId, post("one"));
    await messages.create(alice, channelId, post("two"));
    const page = await messages.list(bob, channelId, listAll());
    expect(page.data.map((m) => m.content)).toEqual(["one", "two"]);
  });

  it("lists only the messages after the cursor it returned", async () => {
    const { nextCursor } = await messages.create(alice, channelId, post("seen"));
    await messages.create(alice, channelId, post("new"));
    const page = await messages.list(bob, channelId, listAll({ since: nextCursor }));
    expect(page.data.map((m) => m.content)).toEqual(["new"]);
  });

  it("announces a post on the wake-up bus", async () => {
    await messages.create(alice, channelId, post("wake"));
    expect(bus.published).toEqual([channelId]);
  });

  it("refuses a post to a paused channel with channel_paused and Retry-After", async () => {
    await channelStore.setPaused(channelId, true);
    const err = await refusal(messages.create(alice, channelId, post("held")));
    expect([err.code, err.headers["Retry-After"]]).toEqual(["channel_paused", "30"]);
  });

  it("refuses a post by a stranger to a restricted channel with channel_access_denied", async () => {
    const restricted = await channels.create(alice, channelInput({ name: "private", access: "restricted" }));
    expect((await refusal(messages.create(bob, restricted.id, post("hi")))).code).toBe("channel_access_denied");
  });

  it("lets one key claim a message and refuses another key with already_claimed", async () => {
    const { message } = await messages.create(alice, channelId, post("task"));
    expect((await messages.claim(alice, message.id, undefined, undefined)).status).toBe("claimed");
    expect((await refusal(messages.claim(bob, message.id, undefined, undefined))).code).toBe("already_claimed");
  });

  it("tells the holder that claims again that it already holds the claim", async () => {
    const { message } = await messages.create(alice, channelId, post("task"));
    await messages.claim(alice, message.id, undefined, undefined);
    expect((await messages.claim(alice, message.id, undefined, undefined)).status).toBe("already_claimed");
  });

  it("lets another key claim a message whose lease ran out", async () => {
    const { message } = await messages.create(alice, channelId, post("task"));
    await messages.claimWithLease(alice, message.id, undefined, 30, undefined);
    await clock.advance(31 * 1000);
    expect((await messages.claim(bob, message.id, undefined, undefined)).status).toBe("claimed");
  });

  it("refuses a claim in a broadcast channel with channel_not_claimable", async () => {
    const broadcast = await channels.create(alice, channelInput({ name: "news", mode: "broadcast" }));
    const { message } = await messages.create(alice, broadcast.id, post("fyi"));
    expect((await refusal(messages.claim(bob, message.id, undefined, undefined))).code).toBe("channel_not_claimable");
  });
});

describe("Messages batches", () => {
  it("creates a batch in order, announces it once and returns the cursor of its last message", async () => {
    const { messages: created, nextCursor } = await messages.createBatch(alice, channelId, [post("a"), post("b"), post("c")]);
    expect(created.map((m) => m.content)).toEqual(["a", "b", "c"]);
    expect(bus.published).toEqual([channelId]);
    expect((await messages.list(bob, channelId, listAll({ since: nextCursor }))).data).toEqual([]);
  });

  it("refuses a batch whose item is invalid with that item's code and index, before writing any", async () => {
    const err = await refusal(messages.createBatch(alice, channelId, [post("fine"), post("  ")]));
    expect([err.code, err.details.index, err.details.field]).toEqual(["invalid_string", 1, "content"]);
    expect(err.message).toMatch(/^messages\[1\]: /);
    expect((await messages.list(bob, channelId, listAll())).data).toEqual([]);
  });

  it("refuses an empty batch and one of 101 items with invalid_batch_size", async () => {
    expect((await refusal(messages.createBatch(alice, channelId, []))).code).toBe("invalid_batch_size");
    expect((await refusal(messages.createBatch(alice, channelId, Array.from({ length: 101 }, () => post("x"))))).code).toBe("invalid_batch_size");
  });

  it("acks each id on its own, judging a repeated id again", async () => {
    const { message } = await messages.create(alice, channelId, post("task"));
    const results = await messages.ackBatch(bob, [message.id, "nope", message.id], undefined);
    expect(results.map((r) => ("error" in r ? r.error.code : r.status))).toEqual(["acknowledged", "message_not_found", "already_acknowledged"]);
  });

  it("releases only the caller's own claims, the others answering as release() would", async () => {
    const { messages: [mine, theirs] } = await messages.createBatch(alice, channelId, [post("mine"), post("theirs")]);
    await messages.claim(alice, mine!.id, undefined, undefined);
    await messages.claim(bob, theirs!.id, undefined, undefined);
    const results = await messages.releaseBatch(alice, [mine!.id, theirs!.id], undefined);
    expect(results.map((r) => ("error" in r ? r.error.code : r.status))).toEqual(["released", "forbidden"]);
  });
});

describe("Messages: results", () => {
  /** A task in the (claimable) channel, claimed by bob. */
  async function claimedByBob() {
    const { message } = await messages.create(alice, channelId, post("task"));
    await messages.claim(bob, message.id, undefined, undefined);
    return message;
  }

  it("stores the claim holder's result and announces the ack on the wake-up bus", async () => {
    const task = await claimedByBob();
    bus.published.length = 0;
    const { status, message } = await messages.ack(bob, task.id, undefined, { result: "done", metadata: { n: 1 } });
    expect([status, message.result, message.acknowledgedBy[0]?.metadata]).toEqual(["acknowledged", "done", { n: 1 }]);
    expect(bus.published).toEqual([channelId]);
  });

  it("refuses a result over 64 KiB counted in UTF-8 bytes with result_too_large, before anything is stored", async () => {
    const task = await claimedByBob();
    const err = await refusal(messages.ack(bob, task.id, undefined, { result: "€".repeat(21_846) }));
    expect([err.code, err.details]).toEqual(["result_too_large", { max_result_bytes: 65_536, received_bytes: 65_538 }]);
    expect(messageStore.messages.get(task.id)?.acknowledgedBy).toEqual([]);
  });

  it("refuses ack metadata over 16 KiB with metadata_too_large", async () => {
    const task = await claimedByBob();
    expect((await refusal(messages.ack(bob, task.id, undefined, { metadata: { blob: "x".repeat(16_384) } }))).code).toBe("metadata_too_large");
  });

  it("answers a replay already_acknowledged with the first result, whatever result it carries", async () => {
    const task = await claimedByBob();
    await messages.ack(bob, task.id, undefined, { result: "first" });
    const replay = await messages.ack(bob, task.id, undefined, { result: "second" });
    expect([replay.status, replay.message.result]).toEqual(["already_acknowledged", "first"]);
  });

  it("refuses a result from another key than the claim holder with forbidden", async () => {
    const task = await claimedByBob();
    expect((await refusal(messages.ack(alice, task.id, undefined, { result: "mine" }))).code).toBe("forbidden");
  });

  it("refuses a result for an unclaimed message of a claimable channel with not_claimed", async () => {
    const { message } = await messages.create(alice, channelId, post("open"));
    expect((await refusal(messages.ack(bob, message.id, undefined, { result: "done" }))).code).toBe("not_claimed");
  });

  it("refuses a second result in a broadcast channel with result_already_set, and keeps the first", async () => {
    const broadcast = await channels.create(alice, channelInput({ name: "news", mode: "broadcast" }));
    const { message } = await messages.create(alice, broadcast.id, post("question"));
    await messages.ack(bob, message.id, undefined, { result: "bob's answer" });
    expect((await refusal(messages.ack(alice, message.id, undefined, { result: "alice's" }))).code).toBe("result_already_set");
    expect(messageStore.messages.get(message.id)?.result).toBe("bob's answer");
  });

  it("gets a message for a reader, and refuses a stranger to a restricted channel with channel_access_denied", async () => {
    const restricted = await channels.create(alice, channelInput({ name: "private", access: "restricted" }));
    const { message } = await messages.create(alice, restricted.id, post("secret"));
    expect((await messages.get(alice, message.id)).message.content).toBe("secret");
    expect((await refusal(messages.get(bob, message.id))).code).toBe("channel_access_denied");
  });

  it("answers message_not_found for an unknown or malformed id", async () => {
    expect((await refusal(messages.get(bob, "00000000-0000-4000-8000-000000000000"))).code).toBe("message_not_found");
    expect((await refusal(messages.get(bob, "nope"))).code).toBe("message_not_found");
  });

  it("gets a retracted message as its archived copy", async () => {
    const { message } = await messages.create(alice, channelId, post("withdrawn"));
    await messages.retract(alice, message.id);
    expect((await messages.get(bob, message.id)).archivedAt).toBe(clock.now());
  });

  it("refuses a negative or non-finite wait with invalid_wait", async () => {
    const { message } = await messages.create(alice, channelId, post("task"));
    expect((await refusal(messages.get(bob, message.id, { wait: -1 }))).code).toBe("invalid_wait");
    expect((await refusal(messages.get(bob, message.id, { wait: Number.NaN }))).code).toBe("invalid_wait");
  });

  describe("with wait", () => {
    let waiting: Messages;
    beforeEach(() => {
      waiting = new Messages(messageStore, channelStore, actors, clock, {
        maxContentBytes: 1024,
        bus,
        afterCommit: (fn) => fn(),
        longPollMaxWaitSeconds: 30,
        longPollMaxWaiters: 10,
        longPollMaxWaitersPerKey: 2,
      });
    });

    it("returns once the message is acknowledged, with its result", async () => {
      const task = await claimedByBob();
      const awaited = waiting.get(alice, task.id, { wait: 30 });
      await eventually(async () => bus.subscriptions === 1);
      await waiting.ack(bob, task.id, undefined, { result: "done" });
      expect((await awaited).message.result).toBe("done");
    });

    it("keeps waiting through wake-ups that leave the message unacknowledged", async () => {
      const task = await claimedByBob();
      const awaited = waiting.get(alice, task.id, { wait: 30 });
      await eventually(async () => bus.subscriptions === 1);
      await waiting.create(alice, channelId, post("another"));
      await eventually(async () => bus.subscriptions === 1);
      await waiting.ack(bob, task.id, undefined, { result: "done" });
      expect((await awaited).message.acknowledgedBy).toHaveLength(1);
    });

    it("returns the archived copy once the message is retracted", async () => {
      const { message } = await waiting.create(alice, channelId, post("withdrawn"));
      const awaited = waiting.get(bob, message.id, { wait: 30 });
      await eventually(async () => bus.subscriptions === 1);
      await waiting.retract(alice, message.id);
      expect((await awaited).archivedAt).toBe(clock.now());
    });

    it("returns the message unacknowledged when the wait runs out", async () => {
      const task = await claimedByBob();
      const awaited = waiting.get(alice, task.id, { wait: 5 });
      await eventually(async () => bus.subscriptions === 1);
      await clock.advance(5_000);
      const found = await awaited;
      expect([found.message.result, found.message.acknowledgedBy]).toEqual([null, []]);
      expect(bus.subscriptions).toBe(0);
    });

    it("answers at once, without waiting, past the key's waiter slots", async () => {
      const task = await claimedByBob();
      const held = [waiting.get(alice, task.id, { wait: 30 }), waiting.get(alice, task.id, { wait: 30 })];
      await eventually(async () => bus.subscriptions === 2);
      expect((await waiting.get(alice, task.id, { wait: 30 })).message.acknowledgedBy).toEqual([]);
      await waiting.ack(bob, task.id, undefined, {});
      await Promise.all(held);
    });
  });
});

describe("Messages.receive", () => {
  it.each([
    [{ maxMessages: 0 }, "invalid_max_messages", "max_messages"],
    [{ maxMessages: 101 }, "invalid_max_messages", "max_messages"],
    [{ maxMessages: 2.5 }, "invalid_max_messages", "max_messages"],
    [{ leaseSeconds: 29 }, "invalid_lease_seconds", "lease_seconds"],
    [{ leaseSeconds: 3601 }, "invalid_lease_seconds", "lease_seconds"],
    [{ wait: -1 }, "invalid_wait", "wait"],
    [{ wait: Number.NaN }, "invalid_wait", "wait"],
  ])("refuses %o with %s on field %s", async (fields, code, field) => {
    const err = await refusal(messages.receive(bob, channelId, receiveInput(fields)));
    expect([err.code, err.details.field]).toEqual([code, field]);
  });

  it("judges the fields before looking up the channel", async () => {
    expect((await refusal(messages.receive(bob, "no-such-channel", receiveInput({ maxMessages: 0 })))).code).toBe("invalid_max_messages");
  });

  it("refuses a broadcast channel with channel_not_claimable", async () => {
    const broadcast = await channels.create(alice, channelInput({ name: "news", mode: "broadcast" }));
    expect((await refusal(messages.receive(bob, broadcast.id, receiveInput()))).code).toBe("channel_not_claimable");
  });

  it("refuses a stranger to a restricted channel with channel_access_denied", async () => {
    const restricted = await channels.create(alice, channelInput({ name: "private", access: "restricted" }));
    expect((await refusal(messages.receive(bob, restricted.id, receiveInput()))).code).toBe("channel_access_denied");
  });

  it("leases one message by default for 300 seconds, counting the delivery", async () => {
    const { message } = await messages.create(alice, channelId, post("task"));
    await messages.create(alice, channelId, post("later"));
    const [leased, ...rest] = await messages.receive(bob, channelId, receiveInput());
    expect(rest).toEqual([]);
    expect(leased!.message).toMatchObject({ id: message.id, deliveryCount: 1 });
    expect(leased!.leaseExpiresAt - clock.now()).toBe(300 * 1_000_000);
    expect(leased!.leaseToken).toMatch(/^lease_/);
  });

  it("leases a message again once its lease ran out", async () => {
    await messages.create(alice, channelId, post("task"));
    await messages.receive(alice, channelId, receiveInput({ leaseSeconds: 30 }));
    expect(await messages.receive(bob, channelId, receiveInput())).toEqual([]);
    await clock.advance(31 * 1000);
    const [again] = await messages.receive(bob, channelId, receiveInput());
    expect(again!.message.deliveryCount).toBe(2);
  });

  it("leases nothing for a caller that has gone away", async () => {
    const { message } = await messages.create(alice, channelId, post("task"));
    const gone = new AbortController();
    gone.abort();
    expect(await messages.receive(bob, channelId, receiveInput({ signal: gone.signal }))).toEqual([]);
    expect(messageStore.messages.get(message.id)).toMatchObject({ claim: null, deliveryCount: 0 });
  });

  it("gives back at once, uncounted, what it leased in the instant its caller went away", async () => {
    const { message } = await messages.create(alice, channelId, post("task"));
    const gone = new AbortController();
    const receive = messageStore.receive.bind(messageStore);
    messageStore.receive = async (...args) => {
      const leased = await receive(...args);
      gone.abort();
      return leased;
    };
    expect(await messages.receive(bob, channelId, receiveInput({ signal: gone.signal }))).toEqual([]);
    expect(messageStore.messages.get(message.id)).toMatchObject({ claim: null, deliveryCount: 0 });
    messageStore.receive = receive;
    const [again] = await messages.receive(alice, channelId, receiveInput());
    expect(again!.message).toMatchObject({ id: message.id, deliveryCount: 1 });
  });

  it("does not read once more when its caller goes away while it waits", async () => {
    const waiting = new Messages(messageStore, channelStore, actors, clock, {
      maxContentBytes: 1024,
      bus,
      afterCommit: (fn) => fn(),
      longPollMaxWaitSeconds: 30,
      longPollMaxWaiters: 10,
      longPollMaxWaitersPerKey: 2,
    });
    const gone = new AbortController();
    const waited = waiting.receive(bob, channelId, receiveInput({ wait: 30, signal: gone.signal }));
    await eventually(async () => bus.subscriptions === 1);
    // Work arrives unannounced (no wake-up), then the caller leaves: the wait ends with nothing leased.
    const { message } = await messageStore.create({ channelId, authorKeyId: alice.keyId, authorLabel: alice.agentLabel, actor: null, actorLabel: null, content: "late", metadata: {}, mentions: [] }).then((o) => {
      if (o.outcome !== "created") throw new Error(o.outcome);
      return o;
    });
    gone.abort();
    expect(await waited).toEqual([]);
    expect(messageStore.messages.get(message.id)).toMatchObject({ claim: null, deliveryCount: 0 });
  });
});

describe("Messages.completeAndReceive", () => {
  it("releases what it leased when the acknowledgements fail, and fails the request", async () => {
    const { message: done } = await messages.create(alice, channelId, post("done"));
    const { message: next } = await messages.create(alice, channelId, post("next"));
    await messages.receive(bob, channelId, receiveInput());
    messageStore.ackMany = () => Promise.reject(new Error("the database went away"));
    await expect(messages.completeAndReceive(bob, channelId, receiveInput(), [{ messageId: done.id }])).rejects.toThrow("the database went away");
    const [again] = await messages.receive(alice, channelId, receiveInput());
    expect(again!.message.id).toBe(next.id);
  });

  it("leaves out of the answer a finished task the receive leased again after its lease lapsed", async () => {
    const { message } = await messages.create(alice, channelId, post("slow task"));
    await messages.receive(bob, channelId, receiveInput({ leaseSeconds: 30 }));
    await clock.advance(31 * 1000);
    // The acknowledgement lands after the receive.
    const ackMany = messageStore.ackMany.bind(messageStore);
    messageStore.ackMany = async (...args) => {
      await new Promise((resolve) => setImmediate(resolve));
      return ackMany(...args);
    };
    const { completed, leases } = await messages.completeAndReceive(bob, channelId, receiveInput(), [{ messageId: message.id }]);
    expect(completed).toEqual([{ messageId: message.id, status: "acknowledged" }]);
    expect(leases).toEqual([]);
  });

  it("judges every result before acknowledging anything", async () => {
    const { message } = await messages.create(alice, channelId, post("task"));
    await messages.receive(bob, channelId, receiveInput());
    const err = await refusal(messages.completeAndReceive(bob, channelId, receiveInput(), [{ messageId: message.id }, { messageId: message.id, result: "x".repeat(65_537) }]));
    expect([err.code, err.details.index]).toEqual(["result_too_large", 1]);
    expect(messageStore.messages.get(message.id)!.acknowledgedBy).toEqual([]);
  });
});

describe("ChannelHistory", () => {
  it("refuses a stranger to a restricted channel with channel_access_denied", async () => {
    const restricted = await channels.create(alice, channelInput({ name: "private", access: "restricted" }));
    const history = new ChannelHistory(new FakeHistoryStore(), channelStore);
    expect((await refusal(history.list(bob, restricted.id, { cursor: undefined, limit: undefined }))).code).toBe("channel_access_denied");
  });

  it("returns a next_cursor only when the page is full", async () => {
    const historyStore = new FakeHistoryStore();
    const { message } = await messages.create(alice, channelId, post("old"));
    historyStore.records.push({ ...message, archivedAt: message.createdAt + 1, reason: "retracted" });
    const history = new ChannelHistory(historyStore, channelStore);
    expect((await history.list(bob, channelId, { cursor: undefined, limit: 1 })).nextCursor).not.toBeNull();
    expect((await history.list(bob, channelId, { cursor: undefined, limit: 2 })).nextCursor).toBeNull();
  });
});
