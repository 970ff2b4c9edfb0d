/**
 * Members over REST (and key paths over gRPC): list, add, remove — owner
 * only (issue 4, item 2; docs/decisions.md#membership, #owner-only).
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import {
  addMember,
  expectError,
  keyIdOf,
  listEvents,
  readStatus,
  restrictedChannel,
  restrictedChannelWithMember,
  TIMESTAMP_6,
  UUID,
  type MemberJson,
} from "../support/membership.js";
import { mintKey, rest, useSqlClient, useTestServer } from "../support/server.js";

const server = useTestServer();
const sql = useSqlClient(server);

const url = () => server.url;
const members = (key: string, channel: string) => rest<{ data: MemberJson[] }>(url(), "GET", `/v1/channels/${channel}/members`, { key });
const remove = (key: string, channel: string, keyId: string) =>
  rest<{ status: string }>(url(), "DELETE", `/v1/channels/${channel}/members/${encodeURIComponent(keyId)}`, { key });
const grpc = () => createClient(ChannelService, createGrpcTransport({ baseUrl: server.url }));
const detailOf = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0];

describe("GET /v1/channels/{identifier}/members", () => {
  it("lists the owner's own row first, every field present", async () => {
    const owner = await mintKey(url(), `members-owner-${Math.random().toString(36).slice(2, 8)}`);
    const ch = await createChannel(url(), owner);
    const res = await members(owner, ch);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [
        {
          id: expect.stringMatching(UUID),
          channel_id: ch,
          key_id: keyIdOf(owner),
          agent_label: expect.stringMatching(/^members-owner-/),
          granted_at: expect.stringMatching(TIMESTAMP_6),
          granted_via_invitation_id: null,
        },
      ],
    });
  });

  it("orders members by granted_at", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const a = keyIdOf(await mintKey(url()));
    const b = keyIdOf(await mintKey(url()));
    await addMember(url(), owner, ch, b);
    await addMember(url(), owner, ch, a);
    const res = await members(owner, ch);
    expect(res.body.data.map((m) => m.key_id)).toEqual([keyIdOf(owner), b, a]);
    const granted = res.body.data.map((m) => m.granted_at);
    expect([...granted].sort()).toEqual(granted);
  });

  it("addresses the channel by alias", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const alias = `members-${Math.random().toString(36).slice(2, 8)}`;
    expect((await rest(url(), "POST", `/v1/channels/${ch}/aliases`, { key: owner, body: { alias } })).status).toBe(201);
    const res = await members(owner, alias);
    expect(res.status).toBe(200);
    expect(res.body.data[0]?.channel_id).toBe(ch);
  });

  it("refuses a member with 403 forbidden", async () => {
    const { member, ch } = await restrictedChannelWithMember(url());
    expectError(await members(member, ch), 403, "forbidden");
  });

  it("refuses a stranger to a restricted channel with 403 channel_access_denied", async () => {
    const { ch } = await restrictedChannel(url());
    expectError(await members(await mintKey(url()), ch), 403, "channel_access_denied");
  });

  it("refuses another key on an open channel with 403 forbidden", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    expectError(await members(await mintKey(url()), ch), 403, "forbidden");
  });

  it("answers 404 channel_not_found for an unknown channel", async () => {
    expectError(await members(await mintKey(url()), "no-such-channel"), 404, "channel_not_found");
  });
});

describe("POST /v1/channels/{identifier}/members", () => {
  it("adds an active key: 201 Member", async () => {
    const owner = await mintKey(url());
    const label = `members-other-${Math.random().toString(36).slice(2, 8)}`;
    const other = keyIdOf(await mintKey(url(), label));
    const ch = await createChannel(url(), owner, { access: "restricted" });
    const res = await rest<MemberJson>(url(), "POST", `/v1/channels/${ch}/members`, { key: owner, body: { key_id: other } });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(UUID),
      channel_id: ch,
      key_id: other,
      agent_label: label,
      granted_at: expect.stringMatching(TIMESTAMP_6),
      granted_via_invitation_id: null,
    });
  });

  it("returns the existing row with 201 when the key already is a member, and records member_added once", async () => {
    const owner = await mintKey(url());
    const other = keyIdOf(await mintKey(url()));
    const ch = await createChannel(url(), owner, { access: "restricted" });
    const first = await addMember(url(), owner, ch, other);
    const second = await addMember(url(), owner, ch, other);
    expect(second).toEqual(first);
    const events = await listEvents(url(), owner, ch);
    expect(events.data.filter((e) => e.event_type === "member_added")).toHaveLength(1);
  });

  it("records member_added with the owner as actor and the key as subject", async () => {
    const owner = await mintKey(url());
    const other = keyIdOf(await mintKey(url()));
    const ch = await createChannel(url(), owner);
    await addMember(url(), owner, ch, other);
    const events = await listEvents(url(), owner, ch);
    expect(events.data).toEqual([
      expect.objectContaining({ event_type: "member_added", actor_key_id: keyIdOf(owner), subject_key_id: other, invitation_id: null }),
    ]);
  });

  it("adding the owner's own key returns its existing row", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const row = await addMember(url(), owner, ch, keyIdOf(owner));
    expect((await members(owner, ch)).body.data).toEqual([row]);
    expect((await listEvents(url(), owner, ch)).data).toEqual([]);
  });

  it("requires key_id: 422 missing_field", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const body = expectError(await rest(url(), "POST", `/v1/channels/${ch}/members`, { key: owner, body: {} }), 422, "missing_field");
    expect(body.field).toBe("key_id");
  });

  it("refuses a blank key_id with 422 missing_field", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    expectError(await rest(url(), "POST", `/v1/channels/${ch}/members`, { key: owner, body: { key_id: "  " } }), 422, "missing_field");
  });

  it("refuses a key_id that is not a string with 422 invalid_key_id", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    expectError(await rest(url(), "POST", `/v1/channels/${ch}/members`, { key: owner, body: { key_id: 42 } }), 422, "invalid_key_id");
  });

  it("refuses an unknown key_id with 422 invalid_key_id", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const res = await rest(url(), "POST", `/v1/channels/${ch}/members`, { key: owner, body: { key_id: "ak_doesnotexist" } });
    expectError(res, 422, "invalid_key_id");
    expect((await members(owner, ch)).body.data).toHaveLength(1);
  });

  it("refuses a revoked key with 422 invalid_key_id", async () => {
    const owner = await mintKey(url());
    const revoked = await mintKey(url());
    expect((await rest(url(), "DELETE", "/v1/keys/me", { key: revoked })).status).toBe(200);
    const ch = await createChannel(url(), owner);
    const res = await rest(url(), "POST", `/v1/channels/${ch}/members`, { key: owner, body: { key_id: keyIdOf(revoked) } });
    expectError(res, 422, "invalid_key_id");
  });

  it("refuses a member (not the owner) with 403 forbidden", async () => {
    const { member, ch } = await restrictedChannelWithMember(url());
    const res = await rest(url(), "POST", `/v1/channels/${ch}/members`, { key: member, body: { key_id: keyIdOf(await mintKey(url())) } });
    expectError(res, 403, "forbidden");
  });

  it("does not tell a non-owner whether a key_id exists (403 before 422)", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const res = await rest(url(), "POST", `/v1/channels/${ch}/members`, { key: await mintKey(url()), body: { key_id: "ak_doesnotexist" } });
    expectError(res, 403, "forbidden");
  });

  it("answers 404 channel_not_found for an unknown channel", async () => {
    const key = await mintKey(url());
    const res = await rest(url(), "POST", "/v1/channels/no-such-channel/members", { key, body: { key_id: keyIdOf(key) } });
    expectError(res, 404, "channel_not_found");
  });
});

describe("DELETE /v1/channels/{identifier}/members/{key_id}", () => {
  it("removes a member: 200 {status: removed} and records member_removed", async () => {
    const owner = await mintKey(url());
    const other = keyIdOf(await mintKey(url()));
    const ch = await createChannel(url(), owner, { access: "restricted" });
    await addMember(url(), owner, ch, other);
    const res = await remove(owner, ch, other);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "removed" });
    expect((await members(owner, ch)).body.data.map((m) => m.key_id)).toEqual([keyIdOf(owner)]);
    const events = await listEvents(url(), owner, ch);
    expect(events.data.map((e) => [e.event_type, e.actor_key_id, e.subject_key_id])).toEqual([
      ["member_added", keyIdOf(owner), other],
      ["member_removed", keyIdOf(owner), other],
    ]);
  });

  it("answers 200 for a key that is not a member, recording nothing", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const res = await remove(owner, ch, "ak_nobody");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "removed" });
    expect((await listEvents(url(), owner, ch)).data).toEqual([]);
  });

  it("refuses to remove the owner's own key with 409 cannot_remove_owner", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    expectError(await remove(owner, ch, keyIdOf(owner)), 409, "cannot_remove_owner");
    expect((await members(owner, ch)).body.data).toHaveLength(1);
  });

  it("refuses a member removing another member with 403 forbidden", async () => {
    const owner = await mintKey(url());
    const member = await mintKey(url());
    const other = keyIdOf(await mintKey(url()));
    const ch = await createChannel(url(), owner, { access: "restricted" });
    await addMember(url(), owner, ch, keyIdOf(member));
    await addMember(url(), owner, ch, other);
    expectError(await remove(member, ch, other), 403, "forbidden");
  });

  it("refuses a stranger to a restricted channel with 403 channel_access_denied", async () => {
    const { owner, ch } = await restrictedChannel(url());
    expectError(await remove(await mintKey(url()), ch, keyIdOf(owner)), 403, "channel_access_denied");
  });

  it("makes a restricted channel unreadable to the removed key", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const reader = await mintKey(url());
    await postMessage(url(), owner, ch, { content: "members only" });
    expect(await readStatus(url(), reader, ch)).toBe(403);
    await addMember(url(), owner, ch, keyIdOf(reader));
    expect(await readStatus(url(), reader, ch)).toBe(200);
    await remove(owner, ch, keyIdOf(reader));
    expect(await readStatus(url(), reader, ch)).toBe(403);
  });
});

describe("channel deletion", () => {
  it("takes the channel's members, events, invitations and access requests with it", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const stranger = await mintKey(url());
    await addMember(url(), owner, ch, keyIdOf(await mintKey(url())));
    expect((await rest(url(), "POST", `/v1/channels/${ch}/invitations`, { key: owner })).status).toBe(201);
    expect((await rest(url(), "POST", `/v1/channels/${ch}/access-requests`, { key: stranger, body: {} })).status).toBe(202);
    expect((await rest(url(), "DELETE", `/v1/channels/${ch}`, { key: owner })).status).toBe(204);
    for (const table of ["channel_members", "channel_events", "channel_invitations", "access_requests"]) {
      const { rows } = await sql.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE channel_id = $1`, [ch]);
      expect(rows[0]?.n, table).toBe("0");
    }
  });
});

describe("members over gRPC", () => {
  it("adds, lists and removes with the same handlers", async () => {
    const owner = await mintKey(url());
    const other = keyIdOf(await mintKey(url()));
    const ch = await createChannel(url(), owner, { access: "restricted" });
    const headers = { "x-api-key": owner };
    const added = await grpc().addMember({ identifier: ch, keyId: other }, { headers });
    expect(added.keyId).toBe(other);
    expect(added.grantedViaInvitationId).toBeUndefined();
    const listed = await grpc().listMembers({ identifier: ch }, { headers });
    expect(listed.data.map((m) => m.keyId)).toEqual([keyIdOf(owner), other]);
    const removed = await grpc().removeMember({ identifier: ch, keyId: other }, { headers });
    expect(removed.status).toBe("removed");
  });

  it("refuses removing the owner as FailedPrecondition with error cannot_remove_owner and a suggestion", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const err = await grpc()
      .removeMember({ identifier: ch, keyId: keyIdOf(owner) }, { headers: { "x-api-key": owner } })
      .catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.FailedPrecondition);
    expect(detailOf(err)?.error).toBe("cannot_remove_owner");
    expect(detailOf(err)?.suggestion).not.toBe("");
  });

  it("refuses a missing key_id as InvalidArgument with error missing_field", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const err = await grpc().addMember({ identifier: ch }, { headers: { "x-api-key": owner } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(detailOf(err)?.error).toBe("missing_field");
  });

  it("refuses removing an empty key_id as InvalidArgument with error missing_field", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const err = await grpc().removeMember({ identifier: ch, keyId: "" }, { headers: { "x-api-key": owner } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(detailOf(err)?.error).toBe("missing_field");
  });

  it("refuses a non-owner as PermissionDenied with error forbidden", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const err = await grpc().listMembers({ identifier: ch }, { headers: { "x-api-key": await mintKey(url()) } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.PermissionDenied);
    expect(detailOf(err)?.error).toBe("forbidden");
  });
});
