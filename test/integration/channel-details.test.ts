/**
 * What the console and the shell need to show and undo (issue 27, items 11,
 * 12, 13): an alias removed again, a channel list with owners and counts, the
 * owner's view of the webhook URL, an invitation previewed without joining,
 * and access requests that name the requester. Over REST and gRPC.
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import { createInvitation, freshAddress, keyIdOf, readStatus, restrictedChannel } from "../support/membership.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer({ AGENTBUS_TRUST_PROXY: "true", AGENTBUS_ALLOW_PRIVATE_TARGETS: "true" });
const url = () => server.url;
let owner: string;
let other: string;
beforeAll(async () => {
  owner = await mintKey(url(), `details-owner-${Date.now()}`);
  other = await mintKey(url());
});

describe("DELETE /v1/channels/{identifier}/aliases/{alias}", () => {
  it("takes the alias off the channel, frees it for anyone, and answers the channel", async () => {
    const ch = await createChannel(url(), owner);
    const alias = `undo-${Date.now()}`;
    expect((await rest(url(), "POST", `/v1/channels/${ch}/aliases`, { key: owner, body: { alias } })).status).toBe(201);
    const removed = await rest<{ id: string; aliases: string[] }>(url(), "DELETE", `/v1/channels/${ch}/aliases/${alias}`, { key: owner });
    expect(removed.status).toBe(200);
    expect(removed.body).toMatchObject({ id: ch, aliases: [] });
    expect((await rest(url(), "GET", `/v1/channels/${alias}`, { key: owner })).status).toBe(404);
    const theirs = await createChannel(url(), other);
    expect((await rest(url(), "POST", `/v1/channels/${theirs}/aliases`, { key: other, body: { alias } })).status).toBe(201);
  });

  it("answers 404 alias_not_found for an alias the channel does not hold, and 403 to anyone but the owner", async () => {
    const ch = await createChannel(url(), owner);
    const missing = await rest<{ error: string }>(url(), "DELETE", `/v1/channels/${ch}/aliases/never-held`, { key: owner });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toBe("alias_not_found");
    const alias = `kept-${Date.now()}`;
    await rest(url(), "POST", `/v1/channels/${ch}/aliases`, { key: owner, body: { alias } });
    expect((await rest(url(), "DELETE", `/v1/channels/${ch}/aliases/${alias}`, { key: other })).status).toBe(403);
  });

  it("works over gRPC", async () => {
    const ch = await createChannel(url(), owner);
    const alias = `grpc-undo-${Date.now()}`;
    const client = createClient(ChannelService, createGrpcTransport({ baseUrl: url() }));
    const headers = { "x-api-key": owner };
    await client.addChannelAlias({ identifier: ch, alias }, { headers });
    expect((await client.removeChannelAlias({ identifier: ch, alias }, { headers })).aliases).toEqual([]);
  });
});

describe("channel lists", () => {
  it("name each channel's owner and count its live messages and open work", async () => {
    const ch = await createChannel(url(), owner, { mode: "claimable", name: `counted-${Date.now()}` });
    for (const content of ["a", "b", "c"]) await postMessage(url(), owner, ch, { content });
    const first = (await rest<{ data: Array<{ id: string }> }>(url(), "GET", `/v1/channels/${ch}/messages`, { key: owner })).body.data[0]!.id;
    await rest(url(), "POST", `/v1/messages/${first}/claim`, { key: other, body: {} });
    const mine = await rest<{ data: Array<Record<string, unknown>> }>(url(), "GET", "/v1/keys/me/channels", { key: owner });
    expect(mine.body.data.find((c) => c.id === ch)).toMatchObject({ owner_id: expect.stringMatching(/^details-owner-/), live_messages: 3, open_messages: 2 });
    const discovered = await rest<{ data: Array<Record<string, unknown>> }>(url(), "GET", "/v1/channels?limit=100", { key: other });
    expect(discovered.body.data.find((c) => c.id === ch)).toMatchObject({ live_messages: 3, open_messages: 2 });
  });

  it("count no open work on a broadcast channel", async () => {
    const ch = await createChannel(url(), owner, { mode: "broadcast" });
    await postMessage(url(), owner, ch, { content: "x" });
    const mine = await rest<{ data: Array<Record<string, unknown>> }>(url(), "GET", "/v1/keys/me/channels", { key: owner });
    expect(mine.body.data.find((c) => c.id === ch)).toMatchObject({ live_messages: 1, open_messages: 0 });
  });
});

describe("a channel's webhook_url", () => {
  it("is shown to the owner and to no one else; the secret never", async () => {
    const ch = await createChannel(url(), owner, { webhook_url: "http://127.0.0.1:9/hook?token=t0p", webhook_secret: "s3cret" });
    const mine = await rest<Record<string, unknown>>(url(), "GET", `/v1/channels/${ch}`, { key: owner });
    expect(mine.body.webhook_url).toBe("http://127.0.0.1:9/hook?token=t0p");
    expect(JSON.stringify(mine.body)).not.toContain("s3cret");
    const theirs = await rest<Record<string, unknown>>(url(), "GET", `/v1/channels/${ch}`, { key: other });
    expect(theirs.body.webhook_url).toBeNull();
  });
});

describe("GET /v1/channel-invitations/{invitation_id}/preview", () => {
  it("names the channel and the invitation's state without making the caller a member", async () => {
    const { owner: o, ch } = await restrictedChannel(url());
    await rest(url(), "PATCH", `/v1/channels/${ch}`, { key: o, body: { name: "war-room", description: "incident 42" } });
    const invitation = await createInvitation(url(), o, ch);
    const res = await rest<Record<string, unknown>>(url(), "GET", `/v1/channel-invitations/${invitation.id}/preview`, { key: other, headers: { "X-Forwarded-For": freshAddress() } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ channel: { name: "war-room", mode: "claimable", description: "incident 42" }, state: "active", expires_at: expect.any(String) });
    expect(await readStatus(url(), other, ch)).toBe(403);
  });

  it("answers 404 invitation_not_found for an unknown id", async () => {
    const res = await rest<{ error: string }>(url(), "GET", "/v1/channel-invitations/nope/preview", { key: other, headers: { "X-Forwarded-For": freshAddress() } });
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("invitation_not_found");
  });
});

describe("access requests", () => {
  it("name the requesting key's agent label", async () => {
    const { owner: o, ch } = await restrictedChannel(url());
    const label = `asker-${Date.now()}`;
    const asker = await mintKey(url(), label);
    expect((await rest(url(), "POST", `/v1/channels/${ch}/access-requests`, { key: asker, body: { reason: "please" } })).status).toBe(202);
    const pending = await rest<{ data: Array<{ requester_key_id: string; requester_label: string }> }>(url(), "GET", `/v1/channels/${ch}/access-requests`, { key: o });
    expect(pending.body.data).toEqual([expect.objectContaining({ requester_key_id: keyIdOf(asker), requester_label: label })]);
  });
});
