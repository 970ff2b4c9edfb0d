/** Channels and ChannelAdmin use cases against in-memory stores. */
import { beforeEach, describe, expect, it } from "vitest";
import type { SecurityAudit } from "../../src/domain/audit.js";
import { ChannelAdmin } from "../../src/domain/channel-admin.js";
import type { Channels } from "../../src/domain/channels.js";
import { alice, bob, channelUpdateInput as update, createChannelInput as input, fakeDomain } from "../support/domain.js";
import { refusalCode as refusal } from "../support/errors.js";
import type { FakeChannelStore } from "../support/fakes/channels.js";

let store: FakeChannelStore;
let channels: Channels;
let audit: SecurityAudit;

beforeEach(() => {
  ({ channelStore: store, channels, audit } = fakeDomain());
});

describe("Channels", () => {
  it("finds a created channel by its id and by an alias added to it", async () => {
    const created = await channels.create(alice, input({ name: "builds" }));
    await channels.addAlias(alice, created.id, "ci");
    expect((await channels.get(bob, created.id)).name).toBe("builds");
    expect((await channels.get(bob, "ci")).id).toBe(created.id);
  });

  it("applies the contract's defaults to a create that names only name and mode", async () => {
    const created = await channels.create(alice, input());
    expect(created).toMatchObject({ access: "open", discoverable: true, ttlSeconds: 86_400, retentionDays: 7, maxMessages: null, ownerId: "alice" });
  });

  it("answers channel_not_found for an unknown identifier", async () => {
    expect(await refusal(channels.get(alice, "nowhere"))).toBe("channel_not_found");
  });

  it("hides a restricted channel from a key that is not a member", async () => {
    const created = await channels.create(alice, input({ access: "restricted" }));
    expect(await refusal(channels.get(bob, created.id))).toBe("channel_access_denied");
  });

  it("leaves a restricted channel out of discovery unless its creator makes it discoverable", async () => {
    await channels.create(alice, input({ name: "hidden", access: "restricted" }));
    await channels.create(alice, input({ name: "listed" }));
    const page = await channels.discover(bob, { cursor: undefined, limit: undefined });
    expect(page.data.map((c) => c.name)).toEqual(["listed"]);
  });

  it("refuses an update by a key other than the owner with forbidden", async () => {
    const created = await channels.create(alice, input());
    expect(await refusal(channels.update(bob, created.id, update({ description: "mine now" }), ["description"]))).toBe("forbidden");
  });

  it("applies the owner's update and moves updated_at", async () => {
    const created = await channels.create(alice, input());
    const updated = await channels.update(alice, created.id, update({ description: "nightly builds" }), ["description"]);
    expect(updated.description).toBe("nightly builds");
    expect(updated.updatedAt).toBeGreaterThan(created.updatedAt);
  });

  it("leaves updated_at alone when an update changes nothing", async () => {
    const created = await channels.create(alice, input({ description: "same" }));
    const updated = await channels.update(alice, created.id, update({ description: "same" }), ["description"]);
    expect(updated.updatedAt).toBe(created.updatedAt);
  });

  it("refuses an alias another channel holds with alias_conflict", async () => {
    const first = await channels.create(alice, input({ name: "one" }));
    const second = await channels.create(alice, input({ name: "two" }));
    await channels.addAlias(alice, first.id, "shared");
    expect(await refusal(channels.addAlias(alice, second.id, "shared"))).toBe("alias_conflict");
  });

  it("refuses a related channel that does not exist with channel_not_found", async () => {
    expect(await refusal(channels.create(alice, input({ relatedChannels: ["missing"] })))).toBe("channel_not_found");
  });

  it("frees a deleted channel's alias for another channel", async () => {
    const first = await channels.create(alice, input({ name: "one" }));
    await channels.addAlias(alice, first.id, "reused");
    await channels.delete(alice, first.id);
    const second = await channels.create(alice, input({ name: "two" }));
    expect((await channels.addAlias(alice, second.id, "reused")).aliases).toEqual(["reused"]);
  });
});

describe("ChannelAdmin", () => {
  it("pauses any channel by alias, whoever owns it", async () => {
    const created = await channels.create(alice, input());
    await channels.addAlias(alice, created.id, "to-pause");
    expect((await new ChannelAdmin(store, audit).pause("to-pause")).paused).toBe(true);
  });

  it("answers channel_not_found when pausing a channel that does not exist", async () => {
    expect(await refusal(new ChannelAdmin(store, audit).pause("nowhere"))).toBe("channel_not_found");
  });
});
