/**
 * Access requests over REST (and key paths over gRPC): ask, list, approve,
 * deny (issue 4, item 4; docs/decisions.md#membership, #owner-only).
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { AccessRequestStatus } from "../../gen/agentbus/v1/channel_pb.js";
import { AccessRequestOutcome, ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import {
  expectError,
  keyIdOf,
  listEvents,
  readStatus,
  restrictedChannel,
  restrictedChannelWithMember,
  TIMESTAMP_6,
  UUID,
  type AccessRequestJson,
  type MemberJson,
} from "../support/membership.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer();

interface OutcomeJson {
  status: string;
  request_id: string | null;
  note: string | null;
  error?: string;
}

interface DecisionJson {
  status: string;
  request_id: string;
  requester_key_id: string;
}

const url = () => server.url;
const ask = (key: string, channel: string, body: unknown = {}, headers: Record<string, string> = {}) =>
  rest<OutcomeJson>(url(), "POST", `/v1/channels/${channel}/access-requests`, { key, body, headers });
const pending = (key: string, channel: string) =>
  rest<{ data: AccessRequestJson[] }>(url(), "GET", `/v1/channels/${channel}/access-requests`, { key });
const decide = (key: string, channel: string, requestId: string, decision: "approve" | "deny") =>
  rest<DecisionJson>(url(), "POST", `/v1/channels/${channel}/access-requests/${encodeURIComponent(requestId)}/${decision}`, { key });
const memberKeys = async (owner: string, channel: string) =>
  (await rest<{ data: MemberJson[] }>(url(), "GET", `/v1/channels/${channel}/members`, { key: owner })).body.data.map((m) => m.key_id);
const grpc = () => createClient(ChannelService, createGrpcTransport({ baseUrl: server.url }));
const detailOf = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0];

async function restrictedWithRequest(reason?: string) {
  const { owner, ch } = await restrictedChannel(url());
  const requester = await mintKey(url());
  const res = await ask(requester, ch, reason === undefined ? {} : { reason });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  return { owner, requester, ch, requestId: res.body.request_id as string };
}

describe("POST /v1/channels/{identifier}/access-requests", () => {
  it("files a pending request for a stranger to a restricted channel: 202 with a request_id", async () => {
    const { ch } = await restrictedChannel(url());
    const res = await ask(await mintKey(url()), ch, { reason: "I run the nightly build" });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ status: "pending", request_id: expect.stringMatching(UUID), note: null });
  });

  it("does not need the channel to be discoverable", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner, { access: "restricted", discoverable: false });
    expect((await ask(await mintKey(url()), ch)).status).toBe(202);
  });

  it("answers a repeat while pending with 202 and the same request_id", async () => {
    const { requester, ch, requestId } = await restrictedWithRequest();
    const again = await ask(requester, ch, { reason: "still waiting" });
    expect(again.status).toBe(202);
    expect(again.body.request_id).toBe(requestId);
  });

  it("files exactly one request for concurrent repeats", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const requester = await mintKey(url());
    const results = await Promise.all(Array.from({ length: 12 }, () => ask(requester, ch)));
    expect(results.map((r) => r.status)).toEqual(Array(12).fill(202));
    expect(new Set(results.map((r) => r.body.request_id)).size).toBe(1);
    const list = await pending(owner, ch);
    expect(list.body.data.map((r) => r.id)).toEqual([results[0]?.body.request_id]);
  });

  it("answers 200 {status: open} with a note for an open channel, filing nothing", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const res = await ask(await mintKey(url()), ch);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      status: "open",
      request_id: null,
      note: "Channel is open; no access request needed — you can already read and post.",
    });
    expect((await pending(owner, ch)).body.data).toEqual([]);
  });

  it("answers 200 {status: already_member} for the owner", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const res = await ask(owner, ch);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "already_member", request_id: null, note: null });
  });

  it("answers 200 {status: already_member} for a member", async () => {
    const { member, ch } = await restrictedChannelWithMember(url());
    const res = await ask(member, ch);
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("already_member");
  });

  it("replays the 200 of an already_member outcome under the same Idempotency-Key", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const first = await ask(owner, ch, {}, { "Idempotency-Key": "ask-once" });
    const replay = await ask(owner, ch, {}, { "Idempotency-Key": "ask-once" });
    expect(first.status).toBe(200);
    expect(replay.status).toBe(200);
    expect(replay.headers.get("x-idempotent-replay")).toBe("true");
    expect(replay.body).toEqual(first.body);
  });

  it("answers 404 channel_not_found for an unknown channel", async () => {
    expectError(await ask(await mintKey(url()), "no-such-channel"), 404, "channel_not_found");
  });

  it("refuses a reason that is not a string with 422", async () => {
    const { ch } = await restrictedChannel(url());
    expectError(await ask(await mintKey(url()), ch, { reason: 5 }), 422, "invalid_string");
  });

  it("refuses a reason longer than 2000 characters with 422 invalid_string", async () => {
    const { ch } = await restrictedChannel(url());
    expectError(await ask(await mintKey(url()), ch, { reason: "x".repeat(2001) }), 422, "invalid_string");
  });
});

describe("GET /v1/channels/{identifier}/access-requests", () => {
  it("lists pending requests oldest first with every field; reason verbatim, default empty", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const tag = Math.random().toString(36).slice(2, 8);
    const first = await mintKey(url(), `first-${tag}`);
    const second = await mintKey(url(), `second-${tag}`);
    const a = await ask(first, ch, { reason: "  please  " });
    const b = await ask(second, ch);
    const res = await pending(owner, ch);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [
        {
          id: a.body.request_id,
          channel_id: ch,
          requester_key_id: keyIdOf(first),
          reason: "  please  ",
          status: "pending",
          created_at: expect.stringMatching(TIMESTAMP_6),
          requester_label: `first-${tag}`,
        },
        {
          id: b.body.request_id,
          channel_id: ch,
          requester_key_id: keyIdOf(second),
          reason: "",
          status: "pending",
          created_at: expect.stringMatching(TIMESTAMP_6),
          requester_label: `second-${tag}`,
        },
      ],
    });
  });

  it("leaves decided requests out", async () => {
    const { owner, ch, requestId } = await restrictedWithRequest();
    const other = await ask(await mintKey(url()), ch);
    await decide(owner, ch, requestId, "deny");
    expect((await pending(owner, ch)).body.data.map((r) => r.id)).toEqual([other.body.request_id]);
  });

  it("refuses a member with 403 forbidden", async () => {
    const { member, ch } = await restrictedChannelWithMember(url());
    expectError(await pending(member, ch), 403, "forbidden");
  });

  it("refuses a stranger to a restricted channel with 403 channel_access_denied", async () => {
    const { requester, ch } = await restrictedWithRequest();
    expectError(await pending(requester, ch), 403, "channel_access_denied");
  });

  it("answers 404 channel_not_found for an unknown channel", async () => {
    expectError(await pending(await mintKey(url()), "no-such-channel"), 404, "channel_not_found");
  });
});

describe("POST …/access-requests/{request_id}/approve", () => {
  it("approves: 200 {status: approved, request_id, requester_key_id} and the requester becomes a member", async () => {
    const { owner, requester, ch, requestId } = await restrictedWithRequest();
    const res = await decide(owner, ch, requestId, "approve");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "approved", request_id: requestId, requester_key_id: keyIdOf(requester) });
    expect(await memberKeys(owner, ch)).toEqual([keyIdOf(owner), keyIdOf(requester)]);
    expect((await ask(requester, ch)).body.status).toBe("already_member");
  });

  it("records member_added with the owner as actor and the requester as subject", async () => {
    const { owner, requester, ch, requestId } = await restrictedWithRequest();
    await decide(owner, ch, requestId, "approve");
    expect((await listEvents(url(), owner, ch)).data).toEqual([
      expect.objectContaining({ event_type: "member_added", actor_key_id: keyIdOf(owner), subject_key_id: keyIdOf(requester), invitation_id: null }),
    ]);
  });

  it("makes a restricted channel's messages readable, until the owner removes the key", async () => {
    const { owner, requester, ch, requestId } = await restrictedWithRequest();
    await postMessage(url(), owner, ch, { content: "secret plans" });
    expect(await readStatus(url(), requester, ch)).toBe(403);
    await decide(owner, ch, requestId, "approve");
    expect(await readStatus(url(), requester, ch)).toBe(200);
    expect((await rest(url(), "DELETE", `/v1/channels/${ch}/members/${keyIdOf(requester)}`, { key: owner })).status).toBe(200);
    expect(await readStatus(url(), requester, ch)).toBe(403);
  });

  it("refuses a second approval with 409 access_request_resolved saying it was already approved", async () => {
    const { owner, ch, requestId } = await restrictedWithRequest();
    await decide(owner, ch, requestId, "approve");
    const body = expectError(await decide(owner, ch, requestId, "approve"), 409, "access_request_resolved");
    expect(body.message).toContain("already approved");
  });

  it("names the decided access request in access_request_id, leaving request_id to the call's own id", async () => {
    const { owner, ch, requestId } = await restrictedWithRequest();
    await decide(owner, ch, requestId, "deny");
    const res = await decide(owner, ch, requestId, "approve");
    const body = expectError(res, 409, "access_request_resolved") as unknown as Record<string, unknown>;
    expect(body.access_request_id).toBe(requestId);
    expect(body.status).toBe("denied");
    expect(body.request_id).toBe(res.headers.get("x-request-id"));
  });

  it("refuses to deny an approved request with 409 access_request_resolved", async () => {
    const { owner, ch, requestId } = await restrictedWithRequest();
    await decide(owner, ch, requestId, "approve");
    expectError(await decide(owner, ch, requestId, "deny"), 409, "access_request_resolved");
  });

  it("lets exactly one of two concurrent decisions win; the other gets 409", async () => {
    for (let round = 0; round < 5; round++) {
      const { owner, requester, ch, requestId } = await restrictedWithRequest();
      const results = await Promise.all([decide(owner, ch, requestId, "approve"), decide(owner, ch, requestId, "deny")]);
      const statuses = results.map((r) => r.status).sort();
      expect(statuses).toEqual([200, 409]);
      const winner = results.find((r) => r.status === 200)!.body.status;
      expect((await memberKeys(owner, ch)).includes(keyIdOf(requester))).toBe(winner === "approved");
      const events = (await listEvents(url(), owner, ch)).data;
      expect(events).toHaveLength(winner === "approved" ? 1 : 0);
    }
  });

  it("answers 404 access_request_not_found for a request of another channel", async () => {
    const { owner, requestId } = await restrictedWithRequest();
    const otherChannel = await createChannel(url(), owner, { access: "restricted" });
    expectError(await decide(owner, otherChannel, requestId, "approve"), 404, "access_request_not_found");
  });

  it("answers 404 access_request_not_found for an id that is not a request id", async () => {
    const { owner, ch } = await restrictedChannel(url());
    expectError(await decide(owner, ch, "not-a-uuid", "approve"), 404, "access_request_not_found");
    expectError(await decide(owner, ch, "00000000-0000-4000-8000-000000000000", "deny"), 404, "access_request_not_found");
  });

  it("checks the owner before the request: a member gets 403 forbidden even for an unknown request", async () => {
    const { member, ch } = await restrictedChannelWithMember(url());
    expectError(await decide(member, ch, "00000000-0000-4000-8000-000000000000", "approve"), 403, "forbidden");
  });

  it("refuses the requester itself with 403 channel_access_denied", async () => {
    const { requester, ch, requestId } = await restrictedWithRequest();
    expectError(await decide(requester, ch, requestId, "approve"), 403, "channel_access_denied");
  });

  it("answers 404 channel_not_found for an unknown channel", async () => {
    const { owner, requestId } = await restrictedWithRequest();
    expectError(await decide(owner, "no-such-channel", requestId, "approve"), 404, "channel_not_found");
  });
});

describe("POST …/access-requests/{request_id}/deny", () => {
  it("denies: 200 {status: denied, request_id, requester_key_id}; the requester stays out", async () => {
    const { owner, requester, ch, requestId } = await restrictedWithRequest();
    const res = await decide(owner, ch, requestId, "deny");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "denied", request_id: requestId, requester_key_id: keyIdOf(requester) });
    expect(await memberKeys(owner, ch)).toEqual([keyIdOf(owner)]);
    expect(await readStatus(url(), requester, ch)).toBe(403);
    expect((await listEvents(url(), owner, ch)).data).toEqual([]);
  });

  it("lets the requester ask again after a denial, with a new request id", async () => {
    const { owner, requester, ch, requestId } = await restrictedWithRequest();
    await decide(owner, ch, requestId, "deny");
    const again = await ask(requester, ch);
    expect(again.status).toBe(202);
    expect(again.body.request_id).not.toBe(requestId);
    expect((await pending(owner, ch)).body.data.map((r) => r.id)).toEqual([again.body.request_id]);
  });

  it("refuses a second denial with 409 access_request_resolved saying it was already denied", async () => {
    const { owner, ch, requestId } = await restrictedWithRequest();
    await decide(owner, ch, requestId, "deny");
    const body = expectError(await decide(owner, ch, requestId, "deny"), 409, "access_request_resolved");
    expect(body.message).toContain("already denied");
  });
});

describe("access requests over gRPC", () => {
  it("asks, lists and approves with the same handlers", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const requester = await mintKey(url());
    const asked = await grpc().createAccessRequest({ identifier: ch, reason: "grpc" }, { headers: { "x-api-key": requester } });
    expect(asked.status).toBe(AccessRequestOutcome.PENDING);
    const listed = await grpc().listAccessRequests({ identifier: ch }, { headers: { "x-api-key": owner } });
    expect(listed.data.map((r) => [r.id, r.reason, r.status])).toEqual([[asked.requestId, "grpc", AccessRequestStatus.PENDING]]);
    const approved = await grpc().approveAccessRequest({ identifier: ch, requestId: asked.requestId! }, { headers: { "x-api-key": owner } });
    expect(approved.status).toBe(AccessRequestStatus.APPROVED);
    expect(approved.requesterKeyId).toBe(keyIdOf(requester));
  });

  it("answers an open channel with outcome OPEN and a note", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    const res = await grpc().createAccessRequest({ identifier: ch }, { headers: { "x-api-key": await mintKey(url()) } });
    expect(res.status).toBe(AccessRequestOutcome.OPEN);
    expect(res.note).toContain("open");
    expect(res.requestId).toBeUndefined();
  });

  it("refuses a decided request as FailedPrecondition with error access_request_resolved and a suggestion", async () => {
    const { owner, ch, requestId } = await restrictedWithRequest();
    await decide(owner, ch, requestId, "deny");
    const err = await grpc().denyAccessRequest({ identifier: ch, requestId }, { headers: { "x-api-key": owner } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.FailedPrecondition);
    expect(detailOf(err)?.error).toBe("access_request_resolved");
    expect(detailOf(err)?.suggestion).not.toBe("");
  });

  it("refuses an unknown request as NotFound with error access_request_not_found", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const err = await grpc()
      .approveAccessRequest({ identifier: ch, requestId: "00000000-0000-4000-8000-000000000000" }, { headers: { "x-api-key": owner } })
      .catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.NotFound);
    expect(detailOf(err)?.error).toBe("access_request_not_found");
  });
});
