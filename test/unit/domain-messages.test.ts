/** Messages and ChannelHistory use cases against in-memory stores. */
import { beforeEach, describe, expect, it } from "vitest";
import type { Channels } from "../../src/domain/channels.js";
import { ChannelHistory } from "../../src/domain/history.js";
import type { ListInput, Messages } from "../../src/domain/messages.js";
import { ApiError } from "../../src/model/errors.js";
import type { ManualClock } from "../support/clock.js";
import { alice, bob, createChannelInput as channelInput, fakeDomain } from "../support/domain.js";
import { rejectionOf } from "../support/errors.js";
import type { FakeChannelStore } from "../support/fakes/channels.js";
import { FakeHistoryStore } from "../support/fakes/history.js";
import type { FakeWakeBus } from "../support/fakes/wake-bus.js";

const post = (content: string) => ({ content, actor: undefined, actorLabel: undefined, metadata: undefined, mentions: [] });
const listAll = (fields: Partial<ListInput> = {}): ListInput => ({ since: undefined, cursor: undefined, limit: undefined, status: "all", ...fields });
const refusal = (promise: Promise<unknown>) => rejectionOf(ApiError, promise);

let channelStore: FakeChannelStore;
let bus: FakeWakeBus;
let clock: ManualClock;
let channels: Channels;
let messages: Messages;
let channelId: string;

beforeEach(async () => {
  ({ channelStore, bus, clock, channels, messages } = fakeDomain());
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
