/** Messages and ChannelHistory use cases against in-memory stores. */
import { beforeEach, describe, expect, it } from "vitest";
import type { Channels } from "../../src/domain/channels.js";
import { ChannelHistory } from "../../src/domain/history.js";
import type { ListInput, Messages, ReceiveInput } from "../../src/domain/messages.js";
import { ApiError } from "../../src/model/errors.js";
import type { ManualClock } from "../support/clock.js";
import { alice, bob, createChannelInput as channelInput, fakeDomain } from "../support/domain.js";
import { rejectionOf } from "../support/errors.js";
import type { FakeChannelStore } from "../support/fakes/channels.js";
import { FakeHistoryStore } from "../support/fakes/history.js";
import type { FakeWakeBus } from "../support/fakes/wake-bus.js";

const post = (content: string) => ({ content, actor: undefined, actorLabel: undefined, metadata: undefined, mentions: [] });
const listAll = (fields: Partial<ListInput> = {}): ListInput => ({ since: undefined, cursor: undefined, limit: undefined, status: "all", ...fields });
const receiveInput = (fields: Partial<ReceiveInput> = {}): ReceiveInput => ({ maxMessages: undefined, leaseSeconds: undefined, wait: undefined, actor: undefined, ...fields });
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
