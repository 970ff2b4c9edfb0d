/** The channel-name rule (docs/decisions.md#channel-names): namedChannel, and the use cases over in-memory stores. */
import { beforeEach, describe, expect, it } from "vitest";
import { namedChannel } from "../../src/domain/channel.js";
import type { Channels } from "../../src/domain/channels.js";
import type { Membership } from "../../src/domain/membership.js";
import type { Messages } from "../../src/domain/messages.js";
import { ApiError } from "../../src/model/errors.js";
import { alice, bob, channelUpdateInput as update, createChannelInput as input, fakeDomain } from "../support/domain.js";
import { settle } from "../support/clock.js";
import { refusalCode as refusal, thrownBy } from "../support/errors.js";

describe("namedChannel", () => {
  it("answers 404 channel_not_found naming the identifier when nothing matched", () => {
    const err = thrownBy(ApiError, () => namedChannel(undefined, "nowhere"));
    expect(err.code).toBe("channel_not_found");
    expect(err.message).toContain("nowhere");
  });
});

describe("use cases by name", () => {
  let channels: Channels;
  let messages: Messages;
  let membership: Membership;
  let clock: ReturnType<typeof fakeDomain>["clock"];

  beforeEach(() => {
    ({ channels, messages, membership, clock } = fakeDomain());
  });

  const post = (identifier: string, content: string) =>
    messages.create(alice, identifier, { content, actor: undefined, actorLabel: undefined, metadata: undefined, mentions: [] });

  it("gets, posts to and lists the members of the caller's channel by its name", async () => {
    const created = await channels.create(alice, input({ name: "builds" }));
    expect((await channels.get(alice, "builds")).id).toBe(created.id);
    expect((await post("builds", "hi")).message.channelId).toBe(created.id);
    expect((await membership.listMembers(alice, "builds")).map((m) => m.keyId)).toEqual([alice.keyId]);
  });

  it("does not resolve another key's channel name", async () => {
    await channels.create(alice, input({ name: "builds" }));
    expect(await refusal(channels.get(bob, "builds"))).toBe("channel_not_found");
  });

  it("prefers an alias to a name", async () => {
    const aliased = await channels.create(bob, input({ name: "other" }));
    await channels.addAlias(bob, aliased.id, "builds");
    await channels.create(alice, input({ name: "builds" }));
    expect((await channels.get(alice, "builds")).id).toBe(aliased.id);
  });

  it("resolves a name several of the caller's channels share to the newest of them", async () => {
    await channels.create(alice, input({ name: "twice" }));
    await clock.advance(1_000);
    const newest = await channels.create(alice, input({ name: "twice" }));
    expect((await channels.update(alice, "twice", update({ description: "x" }), undefined)).id).toBe(newest.id);
    expect((await post("twice", "to the newest")).message.channelId).toBe(newest.id);
  });

  it("keeps a watch opened by name on its channel once a newer channel takes the name", async () => {
    const first = await channels.create(alice, input({ name: "builds" }));
    const abort = new AbortController();
    const watch = await messages.openWatch(alice, "builds", undefined, abort.signal);
    await channels.create(alice, input({ name: "builds" }));
    const next = watch.messages.next();
    // Past the watch's access recheck, which must look the channel up by the id it opened, not by the name.
    await clock.advance(15_000);
    await settle();
    await post(first.id, "still here");
    expect((await next).value).toMatchObject({ channelId: first.id, content: "still here" });
    abort.abort();
  });
});
