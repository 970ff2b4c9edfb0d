/**
 * The channel-view cache (docs/decisions.md#channel-view-cache) never hides a
 * change made through the same process: each test reads first (so the
 * channel's view is remembered), changes the channel or its members, and
 * reads again at once. A change made through another process is seen within
 * the cache's lifetime.
 */
import { describe, expect, it } from "vitest";
import { TTL_MS } from "../../src/domain/channel-view-cache.js";
import { eventually } from "../support/eventually.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import {
  addMember,
  createInvitation,
  freshAddress,
  keyIdOf,
  readStatus,
  resolveInvitation,
  restrictedChannel,
  restrictedChannelWithMember,
} from "../support/membership.js";
import { mintKey, rest, startTestServer, useTestServer } from "../support/server.js";

const server = useTestServer({ AGENTBUS_TRUST_PROXY: "true" });
const url = () => server.url;

describe("a change through this process is seen by the next request", () => {
  it("restricting an open channel shuts a stranger out at once", async () => {
    const owner = await mintKey(url());
    const stranger = await mintKey(url());
    const ch = await createChannel(url(), owner);
    expect(await readStatus(url(), stranger, ch)).toBe(200);
    expect((await rest(url(), "PATCH", `/v1/channels/${ch}`, { key: owner, body: { access: "restricted" } })).status).toBe(200);
    expect(await readStatus(url(), stranger, ch)).toBe(403);
  });

  it("removing a member shuts them out at once", async () => {
    const { owner, member, ch } = await restrictedChannelWithMember(url());
    expect(await readStatus(url(), member, ch)).toBe(200);
    expect((await rest(url(), "DELETE", `/v1/channels/${ch}/members/${keyIdOf(member)}`, { key: owner })).status).toBe(200);
    expect(await readStatus(url(), member, ch)).toBe(403);
  });

  it("adding a member lets them in at once", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const newcomer = await mintKey(url());
    expect(await readStatus(url(), newcomer, ch)).toBe(403);
    await addMember(url(), owner, ch, keyIdOf(newcomer));
    expect(await readStatus(url(), newcomer, ch)).toBe(200);
  });

  it("accepting an invitation lets the key in at once", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const guest = await mintKey(url());
    expect(await readStatus(url(), guest, ch)).toBe(403);
    const invitation = await createInvitation(url(), owner, ch);
    expect((await resolveInvitation(url(), guest, invitation.id, freshAddress())).status).toBe(200);
    expect(await readStatus(url(), guest, ch)).toBe(200);
  });

  it("approving an access request lets the requester in at once", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const requester = await mintKey(url());
    expect(await readStatus(url(), requester, ch)).toBe(403);
    const request = await rest<{ request_id: string }>(url(), "POST", `/v1/channels/${ch}/access-requests`, { key: requester, body: { reason: "please" } });
    expect(request.status).toBe(202);
    expect((await rest(url(), "POST", `/v1/channels/${ch}/access-requests/${request.body.request_id}/approve`, { key: owner, body: {} })).status).toBe(200);
    expect(await readStatus(url(), requester, ch)).toBe(200);
  });

  it("deleting a channel makes it unknown at once", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    await postMessage(url(), owner, ch, { content: "before" });
    expect((await rest(url(), "DELETE", `/v1/channels/${ch}`, { key: owner })).status).toBe(204);
    expect((await rest(url(), "GET", `/v1/channels/${ch}/messages`, { key: owner })).status).toBe(404);
  });

  it("a new metadata_schema applies to the next post", async () => {
    const owner = await mintKey(url());
    const ch = await createChannel(url(), owner);
    await postMessage(url(), owner, ch, { content: "free", metadata: { n: "text" } });
    const schema = { type: "object", properties: { n: { type: "number" } } };
    expect((await rest(url(), "PATCH", `/v1/channels/${ch}`, { key: owner, body: { metadata_schema: schema } })).status).toBe(200);
    const refused = await rest(url(), "POST", `/v1/channels/${ch}/messages`, { key: owner, body: { content: "typed", metadata: { n: "text" } } });
    expect(refused.status).toBe(422);
  });

  it("a second channel with the same name takes the name at once", async () => {
    const owner = await mintKey(url());
    const name = `twin-${Date.now()}`;
    await createChannel(url(), owner, { name });
    expect(await readStatus(url(), owner, encodeURIComponent(name))).toBe(200);
    const second = await createChannel(url(), owner, { name });
    const res = await rest<{ message: { channel_id: string } }>(url(), "POST", `/v1/channels/${encodeURIComponent(name)}/messages`, { key: owner, body: { content: "x" } });
    expect(res.status).toBe(201);
    expect(res.body.message.channel_id).toBe(second);
  });
});

describe("a change through another process", () => {
  it("is seen within the cache's lifetime", async () => {
    const other = await startTestServer({ DATABASE_URL: server.databaseUrl });
    try {
      const owner = await mintKey(url());
      const stranger = await mintKey(url());
      const ch = await createChannel(url(), owner);
      expect(await readStatus(url(), stranger, ch)).toBe(200);
      expect((await rest(other.url, "PATCH", `/v1/channels/${ch}`, { key: owner, body: { access: "restricted" } })).status).toBe(200);
      // Real time: this process's view expires TTL_MS after it was read; the bound here leaves a loaded machine room.
      await eventually(async () => (await readStatus(url(), stranger, ch)) === 403, 10 * TTL_MS, 20);
    } finally {
      await other.close();
    }
  });
});
