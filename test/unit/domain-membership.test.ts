/** Membership use cases (members, invitations, access requests) against in-memory stores. */
import { beforeEach, describe, expect, it } from "vitest";
import { namedChannel } from "../../src/domain/channel.js";
import type { Channels } from "../../src/domain/channels.js";
import type { Membership } from "../../src/domain/membership.js";
import type { ManualClock } from "../support/clock.js";
import { caller, createChannelInput, fakeDomain } from "../support/domain.js";
import { refusalCode as refusal } from "../support/errors.js";
import type { FakeChannelStore } from "../support/fakes/channels.js";
import type { FakeMembershipStore } from "../support/fakes/membership.js";

const owner = caller("owner");
const guest = caller("guest");

let channelStore: FakeChannelStore;
let store: FakeMembershipStore;
let clock: ManualClock;
let channels: Channels;
let membership: Membership;
let channelId: string;

beforeEach(async () => {
  ({ channelStore, membershipStore: store, clock, channels, membership } = fakeDomain());
  store.activeKeys.add(owner.keyId);
  store.activeKeys.add(guest.keyId);
  channelId = (await channels.create(owner, createChannelInput({ name: "private", access: "restricted" }))).id;
});

describe("Membership: invitations", () => {
  it("makes the key that resolves an invitation a member of the channel", async () => {
    const invitation = await membership.createInvitation(owner, channelId);
    await membership.resolveInvitation(guest, invitation.id, "198.51.100.7");
    expect(namedChannel(await channelStore.findView(channelId, guest.keyId), channelId).callerIsMember).toBe(true);
  });

  it("records invitation_resolved and member_added when an invitation admits a new member", async () => {
    const invitation = await membership.createInvitation(owner, channelId);
    await membership.resolveInvitation(guest, invitation.id, "198.51.100.7");
    const page = await membership.listEvents(owner, channelId, { since: undefined, limit: undefined });
    expect(page.data.map((e) => e.eventType)).toEqual(["invitation_resolved", "member_added"]);
  });

  it("counts one use per new member, not per resolution", async () => {
    const invitation = await membership.createInvitation(owner, channelId);
    expect((await membership.resolveInvitation(guest, invitation.id, "198.51.100.7")).uses).toBe(1);
    expect((await membership.resolveInvitation(guest, invitation.id, "198.51.100.7")).uses).toBe(1);
  });

  it("refuses a revoked invitation with invitation_revoked and adds no member", async () => {
    const invitation = await membership.createInvitation(owner, channelId);
    await membership.revokeInvitation(owner, invitation.id);
    expect(await refusal(membership.resolveInvitation(guest, invitation.id, "198.51.100.7"))).toBe("invitation_revoked");
    expect(namedChannel(await channelStore.findView(channelId, guest.keyId), channelId).callerIsMember).toBe(false);
  });

  it("refuses an invitation older than 24 hours with invitation_expired", async () => {
    const invitation = await membership.createInvitation(owner, channelId);
    await clock.advance(24 * 60 * 60 * 1000);
    expect(await refusal(membership.resolveInvitation(guest, invitation.id, "198.51.100.7"))).toBe("invitation_expired");
  });

  it("refuses an invitation whose creator was removed from the restricted channel with invitation_invalidated", async () => {
    const member = caller("member");
    store.activeKeys.add(member.keyId);
    await membership.addMember(owner, channelId, member.keyId);
    const invitation = await membership.createInvitation(member, channelId);
    await membership.removeMember(owner, channelId, member.keyId);
    expect(await refusal(membership.resolveInvitation(guest, invitation.id, "198.51.100.7"))).toBe("invitation_invalidated");
  });

  it("refuses a revoke by a member who neither created the invitation nor owns the channel with forbidden", async () => {
    const invitation = await membership.createInvitation(owner, channelId);
    await membership.addMember(owner, channelId, guest.keyId);
    expect(await refusal(membership.revokeInvitation(guest, invitation.id))).toBe("forbidden");
  });
});

describe("Membership: members", () => {
  it("refuses to add a key that is not active with invalid_key_id", async () => {
    expect(await refusal(membership.addMember(owner, channelId, "ak_unknown"))).toBe("invalid_key_id");
  });

  it("refuses to remove the owner's key with cannot_remove_owner", async () => {
    expect(await refusal(membership.removeMember(owner, channelId, owner.keyId))).toBe("cannot_remove_owner");
  });

  it("records member_added only the first time a key is added", async () => {
    await membership.addMember(owner, channelId, guest.keyId);
    await membership.addMember(owner, channelId, guest.keyId);
    const page = await membership.listEvents(owner, channelId, { since: undefined, limit: undefined });
    expect(page.data.map((e) => e.eventType)).toEqual(["member_added"]);
  });
});

describe("Membership: access requests", () => {
  it("answers open without filing a request when the channel is open", async () => {
    const open = await channels.create(owner, createChannelInput({ name: "public", access: "open" }));
    expect((await membership.requestAccess(guest, open.id, undefined)).status).toBe("open");
    expect(store.requests.size).toBe(0);
  });

  it("gives a repeated request the id of the one already pending", async () => {
    const first = await membership.requestAccess(guest, channelId, "please");
    const second = await membership.requestAccess(guest, channelId, "please?");
    expect(first).toEqual(second);
  });

  it("makes the requester a member when the owner approves", async () => {
    const request = await membership.requestAccess(guest, channelId, undefined);
    if (request.status !== "pending") throw new Error(request.status);
    await membership.decideAccessRequest(owner, channelId, request.requestId, "approved");
    expect(namedChannel(await channelStore.findView(channelId, guest.keyId), channelId).callerIsMember).toBe(true);
  });

  it("refuses to decide a request twice with access_request_resolved", async () => {
    const request = await membership.requestAccess(guest, channelId, undefined);
    if (request.status !== "pending") throw new Error(request.status);
    await membership.decideAccessRequest(owner, channelId, request.requestId, "denied");
    expect(await refusal(membership.decideAccessRequest(owner, channelId, request.requestId, "approved"))).toBe("access_request_resolved");
  });
});
