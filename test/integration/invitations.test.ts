/**
 * Invitations over REST (and key paths over gRPC): create, resolve, revoke
 * (issue 4, item 3; docs/decisions.md#invitations). Expiry and the lookup
 * window move with an AdjustableClock; no test sleeps. Each test resolves
 * from its own source address (X-Forwarded-For, trusted here) so the
 * per-address lookup limit of one test never trips another.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ChannelMode, InvitationState } from "../../gen/agentbus/v1/channel_pb.js";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { AdjustableClock } from "../support/clock.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import {
  createInvitation,
  DAY_MICROS,
  expectError,
  freshAddress,
  keyIdOf,
  listEvents,
  micros,
  readStatus,
  resolveInvitation,
  restrictedChannel,
  restrictedChannelWithMember,
  TIMESTAMP_6,
  type InvitationJson,
  type InvitationsPageJson,
  type MemberJson,
} from "../support/membership.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const clock = new AdjustableClock();
const server = useTestServer({ AGENTBUS_TRUST_PROXY: "true" }, { clock });

const url = () => server.url;
const members = async (owner: string, channel: string) =>
  (await rest<{ data: MemberJson[] }>(url(), "GET", `/v1/channels/${channel}/members`, { key: owner })).body.data;
const revoke = (key: string, id: string) => rest<InvitationJson>(url(), "DELETE", `/v1/channel-invitations/${encodeURIComponent(id)}`, { key });
const listInvitations = (key: string, channel: string, query = "") =>
  rest<InvitationsPageJson>(url(), "GET", `/v1/channels/${channel}/invitations${query}`, { key });
const removeMember = (owner: string, channel: string, key: string) =>
  rest(url(), "DELETE", `/v1/channels/${channel}/members/${keyIdOf(key)}`, { key: owner });
const revokeKey = (key: string) => rest(url(), "DELETE", "/v1/keys/me", { key });
/** A restricted channel of a fresh owner with one member, and an invitation created by each. */
async function invitationsOfOwnerAndMember() {
  const { owner, member, ch } = await restrictedChannelWithMember(url());
  return { owner, member, ch, ownerInvitation: await createInvitation(url(), owner, ch), memberInvitation: await createInvitation(url(), member, ch) };
}
const grpc = () => createClient(ChannelService, createGrpcTransport({ baseUrl: server.url }));
const detailOf = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0];

describe("POST /v1/channels/{identifier}/invitations", () => {
  it("creates an invitation expiring 24 h later: 201 with every field", async () => {
    const label = `inviter-${Math.random().toString(36).slice(2, 8)}`;
    const owner = await mintKey(url(), label);
    const ch = await createChannel(url(), owner, { name: "invite-me", mode: "broadcast", description: "about", access: "restricted" });
    const res = await rest<InvitationJson>(url(), "POST", `/v1/channels/${ch}/invitations`, { key: owner, body: {} });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^[A-Za-z0-9_-]{24}$/),
      owner_id: label,
      created_by_key_id: keyIdOf(owner),
      created_at: expect.stringMatching(TIMESTAMP_6),
      expires_at: expect.stringMatching(TIMESTAMP_6),
      revoked_at: null,
      active: true,
      channel: { id: ch, name: "invite-me", mode: "broadcast", description: "about" },
      state: "active",
      uses: 0,
    });
    expect(micros(res.body.expires_at) - micros(res.body.created_at)).toBe(DAY_MICROS);
  });

  it("gives each invitation a fresh id that is not a UUID", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const a = await createInvitation(url(), owner, ch);
    const b = await createInvitation(url(), owner, ch);
    expect(a.id).not.toBe(b.id);
    expect(a.id).not.toMatch(/^[0-9a-f]{8}-/);
  });

  it("lets any key invite to an open channel, with its own owner_id", async () => {
    const owner = await mintKey(url());
    const otherLabel = `other-${Math.random().toString(36).slice(2, 8)}`;
    const other = await mintKey(url(), otherLabel);
    const ch = await createChannel(url(), owner);
    const invitation = await createInvitation(url(), other, ch);
    expect(invitation.owner_id).toBe(otherLabel);
    expect(invitation.created_by_key_id).toBe(keyIdOf(other));
  });

  it("lets a member invite to a restricted channel", async () => {
    const { member, ch } = await restrictedChannelWithMember(url());
    expect((await createInvitation(url(), member, ch)).created_by_key_id).toBe(keyIdOf(member));
  });

  it("refuses a stranger to a restricted channel with 403 channel_access_denied", async () => {
    const { ch } = await restrictedChannel(url());
    const res = await rest(url(), "POST", `/v1/channels/${ch}/invitations`, { key: await mintKey(url()), body: {} });
    expectError(res, 403, "channel_access_denied");
  });

  it("ignores the body's fields", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const res = await rest<InvitationJson>(url(), "POST", `/v1/channels/${ch}/invitations`, { key: owner, body: { ttl: 5, anything: [1] } });
    expect(res.status).toBe(201);
    expect(micros(res.body.expires_at) - micros(res.body.created_at)).toBe(DAY_MICROS);
  });

  it("accepts no body at all", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    expect((await rest(url(), "POST", `/v1/channels/${ch}/invitations`, { key: owner })).status).toBe(201);
  });

  it("answers 404 channel_not_found for an unknown channel", async () => {
    expectError(await rest(url(), "POST", "/v1/channels/nope/invitations", { key: await mintKey(url()), body: {} }), 404, "channel_not_found");
  });
});

describe("GET /v1/channel-invitations/{invitation_id}", () => {
  it("answers 401 api_key_required with advice on minting a key when no key is sent", async () => {
    const owner = await mintKey(url());
    const invitation = await createInvitation(url(), owner, await createChannel(url(), owner));
    const body = expectError(await resolveInvitation(url(), undefined, invitation.id, freshAddress()), 401, "api_key_required");
    expect(body.suggestion).toContain("POST /v1/keys");
  });

  it("points a person without a key at the web console's page for the invitation (redirect_to), over REST and gRPC", async () => {
    const owner = await mintKey(url());
    const invitation = await createInvitation(url(), owner, await createChannel(url(), owner));
    const body = expectError(await resolveInvitation(url(), undefined, invitation.id, freshAddress()), 401, "api_key_required");
    expect(body.redirect_to).toBe(`${url()}/#/invitations/${invitation.id}`);
    const client = createClient(ChannelService, createGrpcTransport({ baseUrl: url() }));
    const err = await client.resolveInvitation({ invitationId: invitation.id }, { headers: { "x-forwarded-for": freshAddress() } }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.Unauthenticated);
    expect(err?.findDetails(ErrorDetailSchema)[0]?.details).toMatchObject({ redirect_to: `${url()}/#/invitations/${invitation.id}` });
  });

  it("resolves: 200 Invitation, and the key becomes a member granted via the invitation", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const guest = await mintKey(url());
    const invitation = await createInvitation(url(), owner, ch);
    const res = await resolveInvitation(url(), guest, invitation.id, freshAddress());
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...invitation, uses: 1 });
    const rows = await members(owner, ch);
    expect(rows.find((m) => m.key_id === keyIdOf(guest))?.granted_via_invitation_id).toBe(invitation.id);
  });

  it("records invitation_resolved and member_added with the resolver as actor and subject", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const guestKey = await mintKey(url());
    const invitation = await createInvitation(url(), owner, ch);
    await resolveInvitation(url(), guestKey, invitation.id, freshAddress());
    const events = await listEvents(url(), owner, ch);
    expect(events.data.map((e) => [e.event_type, e.actor_key_id, e.subject_key_id, e.invitation_id])).toEqual([
      ["invitation_resolved", keyIdOf(guestKey), keyIdOf(guestKey), invitation.id],
      ["member_added", keyIdOf(guestKey), keyIdOf(guestKey), invitation.id],
    ]);
  });

  it("is idempotent: resolving again keeps one member row and records member_added once", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const guest = await mintKey(url());
    const invitation = await createInvitation(url(), owner, ch);
    const address = freshAddress();
    expect((await resolveInvitation(url(), guest, invitation.id, address)).status).toBe(200);
    const before = await members(owner, ch);
    expect((await resolveInvitation(url(), guest, invitation.id, address)).status).toBe(200);
    expect(await members(owner, ch)).toEqual(before);
    const types = (await listEvents(url(), owner, ch)).data.map((e) => e.event_type);
    expect(types).toEqual(["invitation_resolved", "member_added", "invitation_resolved"]);
  });

  it("is multi-use: every key that resolves it becomes a member", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const invitation = await createInvitation(url(), owner, ch);
    const guests = [await mintKey(url()), await mintKey(url()), await mintKey(url())];
    for (const guest of guests) expect((await resolveInvitation(url(), guest, invitation.id, freshAddress())).status).toBe(200);
    expect((await members(owner, ch)).map((m) => m.key_id)).toEqual([keyIdOf(owner), ...guests.map(keyIdOf)]);
  });

  it("makes a restricted channel's messages readable, until the owner removes the key", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const guest = await mintKey(url());
    await postMessage(url(), owner, ch, { content: "for members" });
    expect(await readStatus(url(), guest, ch)).toBe(403);
    const invitation = await createInvitation(url(), owner, ch);
    await resolveInvitation(url(), guest, invitation.id, freshAddress());
    const page = await rest<{ data: Array<{ content: string }> }>(url(), "GET", `/v1/channels/${ch}/messages?since=0`, { key: guest });
    expect(page.status).toBe(200);
    expect(page.body.data.map((m) => m.content)).toEqual(["for members"]);
    expect((await rest(url(), "DELETE", `/v1/channels/${ch}/members/${keyIdOf(guest)}`, { key: owner })).status).toBe(200);
    expect(await readStatus(url(), guest, ch)).toBe(403);
  });

  it("answers 404 invitation_not_found for an unknown id", async () => {
    expectError(await resolveInvitation(url(), await mintKey(url()), "no-such-invitation-xxxxx", freshAddress()), 404, "invitation_not_found");
  });

  it("answers 410 invitation_revoked for a revoked invitation, granting nothing", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const guest = await mintKey(url());
    const invitation = await createInvitation(url(), owner, ch);
    expect((await revoke(owner, invitation.id)).status).toBe(200);
    expectError(await resolveInvitation(url(), guest, invitation.id, freshAddress()), 410, "invitation_revoked");
    expect((await members(owner, ch)).map((m) => m.key_id)).toEqual([keyIdOf(owner)]);
  });

  it("answers 410 invitation_expired 24 h after creation, granting nothing", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const guest = await mintKey(url());
    const invitation = await createInvitation(url(), owner, ch);
    clock.advanceSeconds(24 * 60 * 60 + 1);
    expectError(await resolveInvitation(url(), guest, invitation.id, freshAddress()), 410, "invitation_expired");
    expect((await members(owner, ch)).map((m) => m.key_id)).toEqual([keyIdOf(owner)]);
  });

  it("reports a revoked and expired invitation as revoked", async () => {
    const owner = await mintKey(url());
    const invitation = await createInvitation(url(), owner, await createChannel(url(), owner));
    await revoke(owner, invitation.id);
    clock.advanceSeconds(24 * 60 * 60 + 1);
    expectError(await resolveInvitation(url(), await mintKey(url()), invitation.id, freshAddress()), 410, "invitation_revoked");
  });

  it("limits lookups to 10 per minute per source address, checked before the lookup", async () => {
    const key = await mintKey(url());
    const owner = await mintKey(url());
    const invitation = await createInvitation(url(), owner, await createChannel(url(), owner));
    const address = freshAddress();
    for (let i = 0; i < 10; i++) expect((await resolveInvitation(url(), key, "unknown-invitation", address)).status).toBe(404);
    const limited = await resolveInvitation(url(), key, invitation.id, address);
    const body = expectError(limited, 429, "rate_limit_exceeded");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(body.retry_after).toEqual(Number(limited.headers.get("retry-after")));
    // Another address is unaffected; the same one recovers when the window ends.
    expect((await resolveInvitation(url(), key, invitation.id, freshAddress())).status).toBe(200);
    clock.advanceSeconds(61);
    expect((await resolveInvitation(url(), key, invitation.id, address)).status).toBe(200);
  });
});

describe("invitations outlive no right of their creator", () => {
  it("refuses a removed member's invitation with 410 invitation_invalidated and a suggestion, granting nothing", async () => {
    const { owner, member, ch, memberInvitation } = await invitationsOfOwnerAndMember();
    expect((await removeMember(owner, ch, member)).status).toBe(200);
    const guest = await mintKey(url());
    const body = expectError(await resolveInvitation(url(), guest, memberInvitation.id, freshAddress()), 410, "invitation_invalidated");
    expect(body.suggestion).toContain("new invitation");
    expect((await members(owner, ch)).map((m) => m.key_id)).toEqual([keyIdOf(owner)]);
  });

  it("refuses the invitation of a member whose key was revoked with 410 invitation_invalidated", async () => {
    const { owner, member, ch, memberInvitation } = await invitationsOfOwnerAndMember();
    expect((await revokeKey(member)).status).toBe(200);
    expectError(await resolveInvitation(url(), await mintKey(url()), memberInvitation.id, freshAddress()), 410, "invitation_invalidated");
    expect((await members(owner, ch)).map((m) => m.key_id)).toEqual([keyIdOf(owner), keyIdOf(member)]);
  });

  it("refuses an invitation to an open channel once its creator's key is revoked", async () => {
    const owner = await mintKey(url());
    const passerby = await mintKey(url());
    const invitation = await createInvitation(url(), passerby, await createChannel(url(), owner));
    await revokeKey(passerby);
    expectError(await resolveInvitation(url(), await mintKey(url()), invitation.id, freshAddress()), 410, "invitation_invalidated");
  });

  it("refuses a stranger's invitation once the open channel it was made for turns restricted", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const invitation = await createInvitation(url(), await mintKey(url()), ch);
    expect((await rest(url(), "PATCH", `/v1/channels/${ch}`, { key: owner, body: { access: "restricted" } })).status).toBe(200);
    expectError(await resolveInvitation(url(), await mintKey(url()), invitation.id, freshAddress()), 410, "invitation_invalidated");
  });

  it("keeps honouring the owner's own invitations after a member is removed", async () => {
    const { owner, member, ch, ownerInvitation } = await invitationsOfOwnerAndMember();
    await removeMember(owner, ch, member);
    expect((await resolveInvitation(url(), await mintKey(url()), ownerInvitation.id, freshAddress())).status).toBe(200);
  });

  it("honours a member's invitation again when the owner re-adds the member", async () => {
    const { owner, member, ch, memberInvitation } = await invitationsOfOwnerAndMember();
    await removeMember(owner, ch, member);
    await rest(url(), "POST", `/v1/channels/${ch}/members`, { key: owner, body: { key_id: keyIdOf(member) } });
    expect((await resolveInvitation(url(), await mintKey(url()), memberInvitation.id, freshAddress())).status).toBe(200);
  });

  it("shows the removed member's invitation as invalidated, and inactive, when revoked by its creator", async () => {
    const { owner, member, ch, memberInvitation } = await invitationsOfOwnerAndMember();
    await removeMember(owner, ch, member);
    const listed = (await listInvitations(owner, ch)).body.data.find((i) => i.id === memberInvitation.id);
    expect(listed).toMatchObject({ state: "invalidated", active: false, revoked_at: null });
    expect((await revoke(member, memberInvitation.id)).body).toMatchObject({ state: "revoked", active: false });
  });
});

describe("GET /v1/channels/{identifier}/invitations", () => {
  it("lists every invitation of the channel, newest first, with creator, times, uses and state", async () => {
    const { owner, member, ch, ownerInvitation, memberInvitation } = await invitationsOfOwnerAndMember();
    const revoked = await createInvitation(url(), owner, ch);
    await revoke(owner, revoked.id);
    await resolveInvitation(url(), await mintKey(url()), ownerInvitation.id, freshAddress());
    await resolveInvitation(url(), await mintKey(url()), ownerInvitation.id, freshAddress());
    const res = await listInvitations(owner, ch);
    expect(res.status).toBe(200);
    expect(res.body.limit).toBe(50);
    expect(res.body.next_cursor).toBeNull();
    expect(res.body.data.map((i) => [i.id, i.created_by_key_id, i.state, i.uses])).toEqual([
      [revoked.id, keyIdOf(owner), "revoked", 0],
      [memberInvitation.id, keyIdOf(member), "active", 0],
      [ownerInvitation.id, keyIdOf(owner), "active", 2],
    ]);
    expect(res.body.data[1]).toEqual(memberInvitation);
  });

  it("shows an invitation as expired 24 h after creation", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    await createInvitation(url(), owner, ch);
    clock.advanceSeconds(24 * 60 * 60 + 1);
    expect((await listInvitations(owner, ch)).body.data.map((i) => [i.state, i.active])).toEqual([["expired", false]]);
  });

  it("pages with limit and next_cursor, each invitation once", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const created = [];
    for (let i = 0; i < 5; i++) created.push((await createInvitation(url(), owner, ch)).id);
    const seen: string[] = [];
    let cursor: string | null = "";
    while (cursor !== null) {
      const page: InvitationsPageJson = (await listInvitations(owner, ch, `?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`)).body;
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((i) => i.id));
      cursor = page.next_cursor;
    }
    expect(seen).toEqual([...created].reverse());
  });

  it("refuses a malformed cursor with 422 invalid_cursor and a limit out of range with 422 invalid_limit", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    expectError(await listInvitations(owner, ch, "?cursor=nope"), 422, "invalid_cursor");
    expectError(await listInvitations(owner, ch, "?limit=101"), 422, "invalid_limit");
  });

  it("refuses a member with 403 forbidden and a stranger to a restricted channel with 403 channel_access_denied", async () => {
    const { member, ch } = await invitationsOfOwnerAndMember();
    expectError(await listInvitations(member, ch), 403, "forbidden");
    expectError(await listInvitations(await mintKey(url()), ch), 403, "channel_access_denied");
  });

  it("lists over gRPC with the same states, and refuses a non-owner as PermissionDenied", async () => {
    const { owner, member, ch, memberInvitation } = await invitationsOfOwnerAndMember();
    await removeMember(owner, ch, member);
    const page = await grpc().listInvitations({ identifier: ch, limit: 10 }, { headers: { "x-api-key": owner } });
    expect(page.data.map((i) => [i.id, i.state])).toEqual([
      [memberInvitation.id, InvitationState.INVALIDATED],
      [expect.any(String), InvitationState.ACTIVE],
    ]);
    const err = await grpc().listInvitations({ identifier: ch }, { headers: { "x-api-key": await mintKey(url()) } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.PermissionDenied);
  });
});

describe("DELETE /v1/channel-invitations/{invitation_id}", () => {
  it("revokes for its creator: 200 with revoked_at set and active false", async () => {
    const owner = await mintKey(url());
    const invitation = await createInvitation(url(), owner, await createChannel(url(), owner));
    const res = await revoke(owner, invitation.id);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...invitation, revoked_at: expect.stringMatching(TIMESTAMP_6), active: false, state: "revoked" });
  });

  it("records invitation_revoked with no subject", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const invitation = await createInvitation(url(), owner, ch);
    await revoke(owner, invitation.id);
    expect((await listEvents(url(), owner, ch)).data).toEqual([
      expect.objectContaining({ event_type: "invitation_revoked", actor_key_id: keyIdOf(owner), subject_key_id: null, invitation_id: invitation.id }),
    ]);
  });

  it("is idempotent: a second revoke keeps the first revoked_at and records nothing more", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const invitation = await createInvitation(url(), owner, ch);
    const first = await revoke(owner, invitation.id);
    clock.advanceSeconds(5);
    const second = await revoke(owner, invitation.id);
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
    expect((await listEvents(url(), owner, ch)).data).toHaveLength(1);
  });

  it("lets the channel owner revoke a member's invitation", async () => {
    const owner = await mintKey(url());
    const creator = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const invitation = await createInvitation(url(), creator, ch);
    const res = await revoke(owner, invitation.id);
    expect(res.status).toBe(200);
    expect(res.body.active).toBe(false);
  });

  it("refuses any other key with 403 forbidden", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const invitation = await createInvitation(url(), owner, ch);
    expectError(await revoke(await mintKey(url()), invitation.id), 403, "forbidden");
    expect((await resolveInvitation(url(), await mintKey(url()), invitation.id, freshAddress())).status).toBe(200);
  });

  it("refuses another member of a restricted channel with 403 forbidden", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const creator = await mintKey(url());
    const member = await mintKey(url());
    for (const k of [creator, member]) await rest(url(), "POST", `/v1/channels/${ch}/members`, { key: owner, body: { key_id: keyIdOf(k) } });
    const invitation = await createInvitation(url(), creator, ch);
    expectError(await revoke(member, invitation.id), 403, "forbidden");
  });

  it("refuses a stranger to a restricted channel with 403 channel_access_denied", async () => {
    const owner = await mintKey(url());
    const invitation = await createInvitation(url(), owner, await createChannel(url(), owner, { access: "restricted" }));
    expectError(await revoke(await mintKey(url()), invitation.id), 403, "channel_access_denied");
  });

  it("still lets its creator revoke it after the owner removed the creator from a restricted channel", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const creator = await mintKey(url());
    await rest(url(), "POST", `/v1/channels/${ch}/members`, { key: owner, body: { key_id: keyIdOf(creator) } });
    const invitation = await createInvitation(url(), creator, ch);
    await rest(url(), "DELETE", `/v1/channels/${ch}/members/${keyIdOf(creator)}`, { key: owner });
    expect((await revoke(creator, invitation.id)).status).toBe(200);
  });

  it("answers 404 invitation_not_found for an unknown id", async () => {
    expectError(await revoke(await mintKey(url()), "no-such-invitation"), 404, "invitation_not_found");
  });
});

describe("invitations over gRPC", () => {
  it("creates and resolves with the same handlers", async () => {
    const owner = await mintKey(url());
    const guest = await mintKey(url());
    const ch = await createChannel(url(), owner, { access: "restricted", mode: "claimable" });
    const created = await grpc().createInvitation({ identifier: ch }, { headers: { "x-api-key": owner } });
    expect(created.active).toBe(true);
    expect(created.revokedAt).toBeUndefined();
    expect(created.channel?.mode).toBe(ChannelMode.CLAIMABLE);
    const resolved = await grpc().resolveInvitation(
      { invitationId: created.id },
      { headers: { "x-api-key": guest, "x-forwarded-for": freshAddress() } },
    );
    expect(resolved.id).toBe(created.id);
    expect(await readStatus(url(), guest, ch)).toBe(200);
  });

  it("refuses an expired invitation as FailedPrecondition with error invitation_expired and a suggestion", async () => {
    const owner = await mintKey(url());
    const created = await grpc().createInvitation({ identifier: await createChannel(url(), owner) }, { headers: { "x-api-key": owner } });
    clock.advanceSeconds(24 * 60 * 60 + 1);
    const err = await grpc()
      .resolveInvitation({ invitationId: created.id }, { headers: { "x-api-key": await mintKey(url()), "x-forwarded-for": freshAddress() } })
      .catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.FailedPrecondition);
    expect(detailOf(err)?.error).toBe("invitation_expired");
    expect(detailOf(err)?.suggestion).not.toBe("");
  });

  it("refuses a missing key as Unauthenticated with error api_key_required", async () => {
    const err = await grpc().resolveInvitation({ invitationId: "whatever" }, { headers: { "x-forwarded-for": freshAddress() } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.Unauthenticated);
    expect(detailOf(err)?.error).toBe("api_key_required");
  });

  it("refuses a stranger's revoke as PermissionDenied with error forbidden", async () => {
    const owner = await mintKey(url());
    const invitation = await createInvitation(url(), owner, await createChannel(url(), owner));
    const err = await grpc()
      .revokeInvitation({ invitationId: invitation.id }, { headers: { "x-api-key": await mintKey(url()) } })
      .catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.PermissionDenied);
    expect(detailOf(err)?.error).toBe("forbidden");
  });
});
