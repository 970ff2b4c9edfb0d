/**
 * The channel event log over REST (and gRPC): GET /v1/channels/{identifier}/events
 * (issue 4, item 5; docs/decisions.md#membership, #owner-only). Expiry moves with
 * an AdjustableClock; no test sleeps.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ChannelEventType } from "../../gen/agentbus/v1/channel_pb.js";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MICROS_PER_SECOND } from "../../src/model/time.js";
import { AdjustableClock } from "../support/clock.js";
import { createChannel } from "../support/fixtures.js";
import {
  addMember,
  createInvitation,
  DAY_MICROS,
  expectError,
  freshAddress,
  keyIdOf,
  listEvents,
  micros,
  resolveInvitation,
  restrictedChannel,
  restrictedChannelWithMember,
  TIMESTAMP_6,
  UUID,
  type EventJson,
  type EventsPageJson,
} from "../support/membership.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const clock = new AdjustableClock();
const server = useTestServer({ AGENTBUS_TRUST_PROXY: "true" }, { clock });

const url = () => server.url;
const events = (key: string, channel: string, query = "") => rest<EventsPageJson>(url(), "GET", `/v1/channels/${channel}/events${query}`, { key });
const grpc = () => createClient(ChannelService, createGrpcTransport({ baseUrl: server.url }));
const detailOf = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0];

/** A channel whose owner added `count` members, one member_added event each. */
async function channelWithEvents(count: number): Promise<{ owner: string; ch: string; subjects: string[] }> {
  const { owner, ch } = await restrictedChannel(url());
  const subjects: string[] = [];
  for (let i = 0; i < count; i++) {
    const keyId = keyIdOf(await mintKey(url()));
    await addMember(url(), owner, ch, keyId);
    subjects.push(keyId);
  }
  return { owner, ch, subjects };
}

describe("GET /v1/channels/{identifier}/events", () => {
  it("records every kind of event with every field present, oldest first", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const guest = await mintKey(url());
    const invitation = await createInvitation(url(), owner, ch);
    expect((await resolveInvitation(url(), guest, invitation.id, freshAddress())).status).toBe(200);
    expect((await rest(url(), "DELETE", `/v1/channel-invitations/${invitation.id}`, { key: owner })).status).toBe(200);
    expect((await rest(url(), "DELETE", `/v1/channels/${ch}/members/${keyIdOf(guest)}`, { key: owner })).status).toBe(200);

    const page = await events(owner, ch);
    expect(page.status).toBe(200);
    const o = keyIdOf(owner), g = keyIdOf(guest);
    const base = { id: expect.stringMatching(UUID), channel_id: ch, metadata: {}, created_at: expect.stringMatching(TIMESTAMP_6), expires_at: expect.stringMatching(TIMESTAMP_6) };
    expect(page.body.data).toEqual([
      { ...base, event_type: "invitation_resolved", actor_key_id: g, subject_key_id: g, invitation_id: invitation.id },
      { ...base, event_type: "member_added", actor_key_id: g, subject_key_id: g, invitation_id: invitation.id },
      { ...base, event_type: "invitation_revoked", actor_key_id: o, subject_key_id: null, invitation_id: invitation.id },
      { ...base, event_type: "member_removed", actor_key_id: o, subject_key_id: g, invitation_id: null },
    ]);
    expect(Object.keys(page.body.data[0] as EventJson)).toEqual([
      "id", "channel_id", "event_type", "actor_key_id", "subject_key_id", "invitation_id", "metadata", "created_at", "expires_at",
    ]);
    expect(page.body.limit).toBe(50);
    expect(page.body.next_cursor).toBe(page.body.data.at(-1)?.created_at);
  });

  it("stamps each event to expire 24 h after it was created, created_at strictly increasing", async () => {
    const { owner, ch } = await channelWithEvents(3);
    const data = (await listEvents(url(), owner, ch)).data;
    for (const e of data) expect(micros(e.expires_at) - micros(e.created_at)).toBe(DAY_MICROS);
    const stamps = data.map((e) => micros(e.created_at));
    for (let i = 1; i < stamps.length; i++) expect(stamps[i]).toBeGreaterThan(stamps[i - 1] as number);
  });

  it("pages with limit and an exclusive since", async () => {
    const { owner, ch, subjects } = await channelWithEvents(5);
    const first = await listEvents(url(), owner, ch, "?since=0&limit=2");
    expect(first.limit).toBe(2);
    expect(first.data.map((e) => e.subject_key_id)).toEqual(subjects.slice(0, 2));
    expect(first.next_cursor).toBe(first.data[1]?.created_at);
    const second = await listEvents(url(), owner, ch, `?since=${encodeURIComponent(first.next_cursor!)}&limit=2`);
    expect(second.data.map((e) => e.subject_key_id)).toEqual(subjects.slice(2, 4));
    const third = await listEvents(url(), owner, ch, `?since=${encodeURIComponent(second.next_cursor!)}&limit=2`);
    expect(third.data.map((e) => e.subject_key_id)).toEqual(subjects.slice(4));
  });

  it("echoes the given since as next_cursor on an empty page", async () => {
    const { owner, ch } = await channelWithEvents(1);
    const all = await listEvents(url(), owner, ch);
    const cursor = all.next_cursor!;
    const empty = await listEvents(url(), owner, ch, `?since=${encodeURIComponent(cursor)}`);
    expect(empty).toEqual({ data: [], limit: 50, next_cursor: cursor });
  });

  it("answers next_cursor null for an empty page without since, and lists everything live without since", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    expect(await listEvents(url(), owner, ch, "")).toEqual({ data: [], limit: 50, next_cursor: null });
    await addMember(url(), owner, ch, keyIdOf(await mintKey(url())));
    expect((await listEvents(url(), owner, ch, "")).data).toHaveLength(1);
  });

  it("accepts since with any RFC 3339 offset", async () => {
    const { owner, ch } = await channelWithEvents(2);
    const all = await listEvents(url(), owner, ch);
    // The first event's instant, written with a +02:00 offset.
    const firstUs = micros(all.data[0]!.created_at);
    const shifted = new Date(Math.floor(firstUs / 1000) + 2 * 3600_000).toISOString().slice(0, 19);
    const fraction = String(firstUs % MICROS_PER_SECOND).padStart(6, "0");
    const page = await listEvents(url(), owner, ch, `?since=${encodeURIComponent(`${shifted}.${fraction}+02:00`)}`);
    expect(page.data.map((e) => e.id)).toEqual([all.data[1]!.id]);
  });

  it("refuses a malformed since with 422 invalid_since", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    expectError(await events(owner, ch, "?since=yesterday"), 422, "invalid_since");
  });

  it.each([["?limit=0"], ["?limit=101"], ["?limit=abc"], ["?limit=2.5"]])("refuses %s with 422 invalid_limit", async (query) => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    expectError(await events(owner, ch, query), 422, "invalid_limit");
  });

  it("accepts limit 100", async () => {
    const { owner, ch } = await channelWithEvents(1);
    expect((await listEvents(url(), owner, ch, "?limit=100")).limit).toBe(100);
  });

  it("keeps events 24 hours: after that they are no longer listed", async () => {
    const { owner, ch } = await channelWithEvents(1);
    clock.advanceSeconds(24 * 60 * 60 - 10);
    expect((await listEvents(url(), owner, ch)).data).toHaveLength(1);
    clock.advanceSeconds(11);
    expect((await listEvents(url(), owner, ch)).data).toEqual([]);
  });

  it("gives concurrent events unique, increasing created_at so paging by cursor sees each exactly once", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const keys = await Promise.all(Array.from({ length: 16 }, async () => keyIdOf(await mintKey(url()))));
    await Promise.all(keys.map((k) => addMember(url(), owner, ch, k)));
    const all = (await listEvents(url(), owner, ch, "?since=0&limit=100")).data;
    expect(new Set(all.map((e) => e.created_at)).size).toBe(16);
    const seen: string[] = [];
    let cursor = "0";
    for (;;) {
      const page = await listEvents(url(), owner, ch, `?since=${encodeURIComponent(cursor)}&limit=1`);
      if (page.data.length === 0) break;
      seen.push(...page.data.map((e) => e.subject_key_id as string));
      cursor = page.next_cursor!;
    }
    expect(seen.sort()).toEqual([...keys].sort());
  });

  it("refuses a member with 403 forbidden", async () => {
    const { member, ch } = await restrictedChannelWithMember(url());
    expectError(await events(member, ch), 403, "forbidden");
  });

  it("refuses a stranger to a restricted channel with 403 channel_access_denied", async () => {
    const { ch } = await restrictedChannel(url());
    expectError(await events(await mintKey(url()), ch), 403, "channel_access_denied");
  });

  it("refuses another key on an open channel with 403 forbidden", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    expectError(await events(await mintKey(url()), ch), 403, "forbidden");
  });

  it("answers 404 channel_not_found for an unknown channel", async () => {
    expectError(await events(await mintKey(url()), "no-such-channel"), 404, "channel_not_found");
  });
});

describe("channel events over gRPC", () => {
  it("lists events with their types as enum values", async () => {
    const { owner, ch, subjects } = await channelWithEvents(2);
    const page = await grpc().listChannelEvents({ identifier: ch, since: "0" }, { headers: { "x-api-key": owner } });
    expect(page.data.map((e) => [e.eventType, e.subjectKeyId])).toEqual(subjects.map((s) => [ChannelEventType.MEMBER_ADDED, s]));
    expect(page.data[0]?.metadata).toEqual({});
    expect(page.limit).toBe(50);
    expect(page.nextCursor).toMatch(TIMESTAMP_6);
  });

  it("refuses an out-of-range limit as InvalidArgument with error invalid_limit and a suggestion", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const err = await grpc().listChannelEvents({ identifier: ch, limit: 500 }, { headers: { "x-api-key": owner } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(detailOf(err)?.error).toBe("invalid_limit");
    expect(detailOf(err)?.suggestion).not.toBe("");
  });
});
